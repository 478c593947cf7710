"""One style for numbers in text a person reads (the report, finding sentences and evidence).

Counts have thousands separators; a duration picks ns, us, ms or s so that 1 <= value < 1000
and shows 3 decimals (whole ns below 1 us: the capture's resolution); a rate in Gb/s shows
2-3 significant digits. CSV and JSON keep their fixed machine formats (docs/columns.md).
Microseconds are spelled "us", in ASCII, everywhere a person reads them: the report, the
finding sentences, the TUI's screens (render/, tui/) and `dissect`'s tags and -V sentences
(render/flag_text.py, and render/line_tags.py's column-wise copy of `duration`), as in the CSV
column names (rtt_p50_us): logs, grep and non-UTF-8 terminals read it, and one screen never
shows both "us" and "µs". Imports nothing: diagnose/, render/ and tui/ all use it.
"""
from __future__ import annotations

import math

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"))


def count(n) -> str:
    """A count with thousands separators: 1234567 -> '1,234,567'."""
    return f"{int(n):,}"


def plural(n, word: str, many: str | None = None) -> str:
    """'1 flow', '2 flows', '1,000 CNPs' ('many' for irregular plurals)."""
    n = int(n)
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def article(word: str) -> str:
    """'an int', 'a float': the indefinite article by the word's first letter."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def duration(ns) -> str:
    """A duration from nanoseconds: '500 ns', '1.828 us', '149.992 ms', '2.000 s'; '' for
    None or NaN (nothing measured). The unit is chosen after rounding, so 999.9996 us is
    '1.000 ms', never '1000.000 us'."""
    if ns is None:
        return ""
    ns = float(ns)
    if math.isnan(ns):
        return ""
    if math.isinf(ns):
        return "-inf s" if ns < 0 else "inf s"
    size = abs(ns)
    scales = (1.0,) + tuple(scale for scale, _ in reversed(_UNITS))   # ns, us, ms, s
    i = max([k for k, scale in enumerate(scales) if size >= scale] or [0])
    if i < 3 and round(size / scales[i], 3 if i else 0) >= 1000:
        i += 1                                                       # 999.9996 us -> 1.000 ms
    return f"{ns:.0f} ns" if i == 0 else f"{ns / scales[i]:.3f} {_UNITS[3 - i][1]}"


def seconds(s) -> str:
    """A duration given in seconds (the capture summary's), through `duration`."""
    return duration(None if s is None else float(s) * 1e9)


def gbps(x) -> str:
    """A rate in Gb/s with 3 significant digits from 1 up (17.7, 1.23, 400), 2 below 1
    (0.0062); '0' for none, '' for None or NaN (no duration to divide by)."""
    if x is None:
        return ""
    x = float(x)
    if math.isnan(x):
        return ""
    if x == 0:
        return "0"
    if math.isinf(x):
        return "inf"
    y = float(f"{abs(x):.{3 if abs(x) >= 1 else 2}g}")  # round first: 9.996 -> 10.0, not 10.00
    sig = 3 if y >= 1 else 2
    decimals = max(0, sig - 1 - math.floor(math.log10(y)))
    return f"{math.copysign(y, x):.{decimals}f}"
