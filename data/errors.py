"""The project's error type, and the row numbers its messages name.

Every problem a user can cause (a bad file, a bad column, a bad option) raises
:class:`SwevalError` with a message that names the file, the column and the first offending
rows (:func:`first_rows`, :func:`file_rows`). The command line prints that message and exits
with status 2, without a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from numpy.typing import NDArray


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


def file_rows(values: pd.Series, positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """0-based data rows of the input for ``positions`` in ``values`` (which may have had invalid
    rows dropped: its index still holds the input's row numbers, see
    ``InteractionLog.from_frame``)."""
    import numpy as np
    import pandas as pd

    index = values.index
    if isinstance(index, pd.RangeIndex) or pd.api.types.is_integer_dtype(index.dtype):
        return np.asarray(index)[positions]
    return positions
