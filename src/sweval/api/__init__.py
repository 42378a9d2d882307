"""SW-EVAL's Python API: the commands as functions that return their tables.

::

    import sweval

    run = sweval.evaluate("movielens-latest-small", window="7D", folds=10, u_min=3,
                          algorithms=["pop", "pop-n", "item-knn"])
    run.summary                       # mean ± std over folds, intervals, Δ% to the best
    run.results                       # one row per (fold, algorithm, stratum, metric, k)
    run.write("runs/ml")              # the files `sweval run --output runs/ml` writes
    run.report("runs/ml")             # and report.html

Every function takes the log as a path (any format ``sweval run --data`` reads, or a bundled
dataset's name) or a pandas DataFrame, and the options of ``sweval run`` as keyword arguments
(``window="7D"``, ``k=[5, 10]``, ``params={"item-knn": {"n_neighbors": 50}}``, ...; every
:class:`~sweval.evaluators.config.model.EvalConfig` field), or a whole ``config=EvalConfig``.

Finished units go to the unit store (``cache=``, else ``$SWEVAL_CACHE``, else the user's cache
directory: :func:`~sweval.evaluators.run.sources.user_store`), so asking again, or asking for one
more algorithm, computes only what is new. Nothing is written elsewhere unless ``output=`` is
given; nothing is logged to MLflow unless ``tracking=True``. ``workers=N`` runs N folds at once
in threads.
"""

from sweval.api.datasets import datasets, fetch
from sweval.api.evaluation import Evaluation, evaluate, history_sweep, load, widths
from sweval.api.experiments import compare, gap, inspect, leakage

__all__ = ["Evaluation", "compare", "datasets", "evaluate", "fetch", "gap", "history_sweep",
           "inspect", "leakage", "load", "widths"]
