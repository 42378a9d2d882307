"""Where SW-EVAL keeps what it reuses between runs: the user's cache directory.

::

    cache_home()    $XDG_CACHE_HOME/sweval (~/.cache/sweval) on Linux,
                    ~/Library/Caches/sweval on macOS, %LOCALAPPDATA%\\sweval\\Cache on Windows
      units/        the unit store (evaluators.run.sources.user_store; --cache, $SWEVAL_CACHE win)
      data/         fetched public datasets (data.datasets; $SWEVAL_DATA_DIR wins)

``$XDG_CACHE_HOME``, when set, is honoured on every platform (as uv and pip do on Linux): one
variable moves every cache, which is what a test suite or a container wants.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The environment variable naming the directory of fetched datasets.
DATA_ENV = "SWEVAL_DATA_DIR"


def cache_home() -> Path:
    """SW-EVAL's folder in the user's cache directory, by the platform's convention."""
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "sweval"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "sweval"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
        return Path(local) / "sweval" / "Cache"
    return Path.home() / ".cache" / "sweval"


def data_home() -> Path:
    """Where fetched datasets are kept: ``$SWEVAL_DATA_DIR``, else ``<cache_home>/data``."""
    named = os.environ.get(DATA_ENV)
    return Path(named).expanduser() if named else cache_home() / "data"
