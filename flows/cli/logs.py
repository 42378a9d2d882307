"""The command line's log lines: SW-EVAL's and the libraries' records on stderr."""

from __future__ import annotations

import logging

from sweval.flows.settings import RepeatedFailuresInOneLine, RetriesInOneLine


def setup_logging(verbose: bool) -> None:
    """Our log lines on stderr: warnings, or INFO with -v. The handler's own level also keeps
    Prefect's INFO records (which propagate to the root logger) off the terminal; MLflow's
    retries show as one line (:class:`~flows.settings.RetriesInOneLine`), as does a unit
    failure whose traceback was shown already
    (:class:`~flows.settings.RepeatedFailuresInOneLine`); the HTTP clients' request lines stay
    off even with -v."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RetriesInOneLine())
    handler.addFilter(RepeatedFailuresInOneLine())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    for chatty in ("httpx", "httpcore"):  # a line per request to the Prefect API, under -v
        logging.getLogger(chatty).setLevel(logging.WARNING)
