"""An example SW-EVAL plugin: see :mod:`sweval_recency.models`."""
