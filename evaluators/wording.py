"""Counts and missing statistics in words, for every text SW-EVAL prints or reports (the
terminal summary, ``sweval compare``'s tables, the HTML report): ``1 fold`` but ``3 folds``, and
``n/a (one fold)`` where a bootstrap interval cannot be computed (one value has no spread to
resample: :func:`~evaluators.stats.significance.interval` gives none), never ``nan``."""

from __future__ import annotations

import math
import re

#: What stands where a bootstrap interval would: the values are one fold's.
NO_INTERVAL = "n/a (one fold)"


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``1 fold``, ``0 folds``, ``3 folds``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def interval_text(low: float, high: float, spec: str = ".3f", between: str = "–") -> str:
    """A bootstrap interval, each bound formatted with ``spec`` and joined by ``between``
    (``0.013–0.057``), or :data:`NO_INTERVAL` when it has no bounds."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return NO_INTERVAL
    return f"{low:{spec}}{between}{high:{spec}}"


def shown_uri(text: str) -> str:
    """``text`` with the password of every URI in it masked (``postgresql://u:***@host/db``,
    ``postgresql://:***@host/db``, ``postgresql://u@host/db?password=***``): terminals are
    read over shoulders and kept in logs. A password may hold ``@`` or ``/``: everything up to
    the token's last ``@`` is masked (a host hidden with it is the safer error)."""
    text = re.sub(r"(://[^:/@\s]*):\S*@", r"\1:***@", text)
    return re.sub(r"([?&](?:password|passwd|pwd)=)[^&\s]*", r"\1***", text, flags=re.IGNORECASE)


def units_line(reused: int, computed: int, code_changed: int, *, planned: bool = False,
               failed: int = 0) -> str:
    """``reused 10 units, computed 5 (3 because the code changed), 2 failed``: the part in
    brackets only when some computed units were stored as computed by other code
    (:func:`evaluators.units.unit.outdated_by_code`), the last only when some units' algorithms
    raised (tried again on every run: they are never stored); ``planned``, before the work:
    ``reusing 10 units, computing 5 (...)``."""
    done, doing = ("reusing", "computing") if planned else ("reused", "computed")
    line = f"{done} {plural(reused, 'unit')}, {doing} {computed}"
    line += f" ({code_changed} because the code changed)" if code_changed else ""
    return line + (f", {failed} failed" if failed else "")


def byte_size(n: float) -> str:
    """A number of bytes in binary units, as ``sweval cache`` prints them: ``512 B``,
    ``3.4 KiB``, ``12.0 MiB``, ``1.5 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def store_line(directory: object, n_units: int, n_bytes: int) -> str:
    """``unit store ~/.cache/sweval/units: 240 units, 12.0 MiB`` (the home directory as ``~``),
    the line a run's summary ends its unit counts with."""
    from pathlib import Path

    path = Path(str(directory))
    try:
        shown = "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        shown = str(path)
    return f"unit store {shown}: {plural(n_units, 'unit')}, {byte_size(n_bytes)}"
