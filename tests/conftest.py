"""Test-wide settings. Shared helpers live in ``tests/sweval_testing.py``."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
