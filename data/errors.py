"""The project's error type.

Every problem a user can cause (a bad file, a bad column, a bad option) raises
:class:`SwevalError` with a message that names the file, the column and the first offending
rows. The command line prints that message and exits with status 2, without a traceback.
"""

from __future__ import annotations


class SwevalError(ValueError):
    """A user-facing error: bad input data, bad options or an impossible protocol."""


def first_rows(mask_positions: object, limit: int = 5) -> str:
    """Format the first few (0-based data) row numbers of a problem, for error messages.

    Row numbers are reported 1-based as a person reading the file counts data rows
    (the header, if any, is not counted).
    """
    import numpy as np

    positions = np.asarray(mask_positions).ravel()
    shown = ", ".join(str(int(p) + 1) for p in positions[:limit])
    more = f" (and {len(positions) - limit} more)" if len(positions) > limit else ""
    return f"{shown}{more}"
