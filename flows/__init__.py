"""Orchestration (Prefect) and tracking (MLflow) around the library packages.

Importing the package (or any of its modules) changes nothing in the environment. Each entry
point sets SW-EVAL's Prefect defaults itself, with :func:`flows.settings.apply_env_defaults`,
before Prefect is imported: the ``sweval`` command (:func:`flows.cli.app.main`),
``python -m sweval.flows.sliding_window``, and the test suite's ``conftest.py``.
"""
