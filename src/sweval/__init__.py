"""SW-EVAL: sliding-window offline evaluation of recommender systems.

The installed package. In a checkout its four subpackages are symbolic links to the repository's
top-level folders (``src/sweval/data -> ../../data`` and so on), so code is imported as
``sweval.data``, ``sweval.evaluators``, ``sweval.algorithms`` and ``sweval.flows`` both from a
checkout and from a wheel, and an edit in a checkout takes effect without reinstalling.
"""

__version__ = "0.1.0"

#: The Python API (:mod:`sweval.api`), imported on first use so that ``import sweval`` stays
#: cheap (the evaluation's libraries load with the first call).
_API = ("evaluate", "compare", "leakage", "gap", "inspect", "load", "Evaluation", "datasets",
        "fetch", "history_sweep", "widths")

__all__ = [*_API, "EvalConfig", "__version__"]


def __getattr__(name: str) -> object:
    if name in _API:
        from sweval import api

        return getattr(api, name)
    if name == "EvalConfig":
        from sweval.evaluators.config.model import EvalConfig

        return EvalConfig
    raise AttributeError(f"module 'sweval' has no attribute {name!r}")
