"""The unit store's tag (``CACHEDIR.TAG``): what says a directory is an SW-EVAL unit store,
and of which format. A store is prepared (its directory created and tagged) and checked against
its tag before any work (:meth:`evaluators.units.store.UnitStore.prepare`, ``.check``).
"""

from __future__ import annotations

import re
from pathlib import Path

from sweval.data.errors import SwevalError
from sweval.evaluators.units.files import atomic_write_text
from sweval.evaluators.units.ownership import STORE_TAG, foreign_names

#: The layout this code reads and writes (in the tag).
STORE_FORMAT = 1
_TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_TAG_TEXT = (f"{_TAG_SIGNATURE}\n"
             f"# This directory is an SW-EVAL unit store (format {STORE_FORMAT}); "
             "`sweval cache` lists and prunes it.\n"
             "# For information about cache directory tags see https://bford.info/cachedir/\n")
_TAG_FORMAT = re.compile(r"SW-EVAL unit store \(format (\d+)\)")


def prepare_store(directory: Path) -> None:
    """Create the store now (its directory and tag), so an unusable one fails before any
    work. An existing directory must be a store already (:func:`check_store`), or empty.

    Raises:
        SwevalError: the directory cannot be created (e.g. a file is in the way), or it
            holds files that are not a store's.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tagged = (directory / STORE_TAG).is_file()
        if tagged or any(directory.iterdir()):
            check_store(directory)
        if not tagged:  # a new store, or an older one made before the tag
            atomic_write_text(directory / STORE_TAG, _TAG_TEXT)
    except OSError as exc:
        raise SwevalError(
            f"{directory}: cannot prepare the unit store ({exc})."
        ) from exc


def check_store(directory: Path) -> None:
    """Make sure the directory is a unit store this code can read: it has the store's tag,
    or (a store made before the tag) holds nothing but shard folders of units and
    ``.runs``.

    Raises:
        SwevalError: no such directory, a directory that is not a store (naming what does
            not belong there), or a store of a newer format.
    """
    if directory.is_symlink() or not directory.is_dir():
        raise SwevalError(f"{directory}: no unit store there.")
    try:
        tag = (directory / STORE_TAG).read_text(encoding="utf-8")
    except OSError:
        tag = None
    if tag is not None:
        found = _TAG_FORMAT.search(tag)
        if found is None:
            raise SwevalError(f"{directory}: its {STORE_TAG} is not an SW-EVAL unit "
                              "store's (another program's cache): choose another store.")
        if int(found.group(1)) > STORE_FORMAT:
            raise SwevalError(
                f"{directory}: a unit store of format {found.group(1)}, written by a newer "
                f"SW-EVAL (this one reads format {STORE_FORMAT}): upgrade, or choose "
                "another store.")
        return
    foreign = foreign_names(directory)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                           if len(foreign) > 5 else "")
        raise SwevalError(
            f"{directory}: not an SW-EVAL unit store (no {STORE_TAG}, and it holds what a "
            f"store never does: {shown}). Name a new or empty directory, or an existing "
            "store, with --cache or $SWEVAL_CACHE.")
