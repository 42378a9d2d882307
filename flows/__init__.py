"""Orchestration (Prefect) and tracking (MLflow) around the library packages.

Importing the package sets SW-EVAL's Prefect defaults in the environment where they are unset
(``PREFECT_HOME``, the ephemeral server's start timeout, terminal log level; see
:mod:`flows.settings`): every entry point imports this package before Prefect.
"""

from sweval.flows.settings import apply_env_defaults

apply_env_defaults()
