"""SW-EVAL: sliding-window offline evaluation of recommender systems.

The installed package. In a checkout its four subpackages are symbolic links to the repository's
top-level folders (``src/sweval/data -> ../../data`` and so on), so code is imported as
``sweval.data``, ``sweval.evaluators``, ``sweval.algorithms`` and ``sweval.flows`` both from a
checkout and from a wheel, and an edit in a checkout takes effect without reinstalling.
"""

__version__ = "0.1.0"
