"""Reliability tests: every subprocess gets a temporary SWEVAL_HOME, never ``~/.sweval``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="sweval-reliability-"))
os.environ.setdefault("SWEVAL_HOME", str(_SESSION_DIR / "sweval"))
os.environ.setdefault("PREFECT_HOME", str(_SESSION_DIR / "prefect"))
