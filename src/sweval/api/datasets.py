"""The datasets to try SW-EVAL on: ``datasets()`` lists them, ``fetch()`` downloads one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweval.data.errors import SwevalError


def datasets() -> pd.DataFrame:
    """The datasets to try SW-EVAL on (``sweval datasets list``): one row each, ``name``,
    ``here`` (``bundled``, ``fetched`` or ``no``), ``title``, ``source``, ``directory``."""
    from sweval.data.datasets import DATASETS
    from sweval.data.loaders import BUNDLED, BUNDLED_DIR

    rows = [{"name": name, "here": "bundled", "title": "MovieLens latest-small (GroupLens)",
             "source": "bundled", "directory": str((BUNDLED_DIR / relative).parent)}
            for name, (relative, _fmt) in BUNDLED.items()]
    rows += [{"name": name, "here": "fetched" if found.fetched else "no", "title": found.title,
              "source": found.url, "directory": str(found.directory)}
             for name, found in DATASETS.items()]
    return pd.DataFrame(rows)


def fetch(name: str, *, accept_licence: bool = False, source: str | Path | None = None) -> Path:
    """Download a public dataset (``sweval datasets fetch NAME``), check its SHA-256 and store
    it in the user's cache directory; then ``evaluate(NAME, ...)`` reads it. Returns its folder.

    Args:
        name: the dataset (:func:`datasets`).
        accept_licence: True once you have read its terms (printed by a call without it).
        source: a copy to take instead of the publisher's address (a path or a URL).

    Raises:
        SwevalError: the terms not accepted (they are printed), a failed download, or a
            checksum that differs.
    """
    from sweval.data.datasets import dataset, licence_text
    from sweval.data.datasets import fetch as fetch_dataset

    found = dataset(name)
    if found.fetched:
        return found.directory
    if not accept_licence:
        print(licence_text(name))
        raise SwevalError(f"{name}: read its terms (above), then call "
                          f"sweval.fetch({name!r}, accept_licence=True).")
    return fetch_dataset(name, source=None if source is None else str(source), say=print)
