"""Time series of the result's tables drawn over a screen's width (no Textual: unit-testable).

The analysis sums per timeline bucket (timeline.csv, the PFC timeline); a screen column covers
its own stretch of time, longer or shorter than a bucket. Each bucket's value is spread evenly
over its part inside the axis [t0, t1] and the columns take what falls in them: a bucket wider
than the capture (a 160 µs capture in 1 ms buckets) fills every column, not the first. Binning
into the width is all that happens here: the sums are the analysis's.
"""
from __future__ import annotations

import numpy as np

from roceview.render.report import relative

BARS = " ▁▂▃▄▅▆▇█"


def bucket_ns(summary: dict) -> int:
    """The timeline's bucket (the PFC timeline's too), ns."""
    return max(1, int(round(float(summary.get("timeline_bucket_ms") or summary.get("bucket_ms") or 1.0) * 1e6)))


def rows_of(column, value) -> np.ndarray:
    """The rows of a table column (a Coded column, a list or an array of str) equal to `value`."""
    codes = getattr(column, "codes", None)
    if codes is not None:
        names = column.names
        return np.flatnonzero(codes == names.index(value)) if value in names else np.zeros(0, np.int64)
    return np.flatnonzero(np.asarray(column, dtype=object) == value) if len(column) else np.zeros(0, np.int64)


def edges(span: int, width: int) -> np.ndarray:
    """The width + 1 column edges of an axis `span` ns long, in ns from its start (float: times
    since the epoch are not, a float64 keeps 1.7e18 ns to 256 ns)."""
    return max(span, 1) * np.arange(width + 1) / width


def spread(starts, values, bucket_ns: int, t0: int, t1: int, width: int) -> np.ndarray:
    """Per column, the sum of `values`, each at its bucket [start, start + bucket_ns) spread
    evenly over the bucket's part inside [t0, t1] (rows of one bucket added first)."""
    out = np.zeros(max(width, 0))
    starts = np.asarray(starts, dtype=np.int64)
    if width <= 0 or len(starts) == 0:
        return out
    bucket, at = np.unique(starts - t0, return_inverse=True)           # from here on ns since t0
    value = np.bincount(at.reshape(-1), np.asarray(values, dtype=np.float64), minlength=len(bucket))
    span = max(t1 - t0, 1)
    lo, hi = np.clip(bucket, 0, span), np.clip(bucket + bucket_ns, 0, span)
    keep = hi > lo                      # buckets (partly) inside the axis
    lo, hi, value = lo[keep].astype(np.float64), hi[keep].astype(np.float64), value[keep]
    if len(lo) == 0:
        return out
    e = edges(span, width)
    i = np.searchsorted(lo, e, side="right") - 1        # the bucket an edge falls in or after
    j = np.maximum(i, 0)
    before = np.concatenate([[0.0], np.cumsum(value)])  # buckets disjoint and in order: a cumulative sum
    part = np.clip((e - lo[j]) / (hi[j] - lo[j]), 0.0, 1.0) * value[j]
    cumulative = np.where(i >= 0, before[j] + part, 0.0)
    return np.diff(cumulative)


def column_ns(t0: int, t1: int, width: int) -> np.ndarray:
    """Each column's length of time (ns)."""
    return np.diff(edges(t1 - t0, width))


def share_bar(share: np.ndarray) -> str:
    """A row of blocks, a full one for a share of 1: any share above 0 shows (an eighth)."""
    levels = np.ceil(np.clip(np.asarray(share, dtype=np.float64), 0.0, 1.0) * (len(BARS) - 1)).astype(int)
    return "".join(BARS[k] for k in levels.tolist())


def count_bar(values: np.ndarray) -> str:
    """A row of blocks scaled to the highest column; any count above 0 shows."""
    values = np.asarray(values, dtype=np.float64)
    top = values.max() if len(values) else 0.0
    return share_bar(values / top) if top > 0 else " " * len(values)


def ticks(ts, t0: int, t1: int, width: int, mark: str) -> str:
    """A row with `mark` in each column a time of `ts` falls in (times outside the axis left out)."""
    ts = np.asarray(ts, dtype=np.int64)
    row = [" "] * max(width, 0)
    inside = ts[(ts >= t0) & (ts <= t1)]
    if width > 0 and len(inside):
        col = np.minimum(((inside - t0) * width) // max(t1 - t0, 1), width - 1)
        for c in np.unique(col).tolist():
            row[c] = mark
    return "".join(row)


def plot(values: np.ndarray, height: int, top: float | None = None) -> list[str]:
    """`height` rows of blocks, top row first: each column's value against `top` (default the
    highest) in eighths of a row; any value above 0 shows."""
    values = np.asarray(values, dtype=np.float64)
    top = values.max() if top is None and len(values) else top
    if not top or top <= 0:
        return [" " * len(values)] * height
    eighths = np.ceil(np.clip(values / top, 0.0, 1.0) * 8 * height).astype(int)
    return ["".join(BARS[k] for k in np.clip(eighths - 8 * r, 0, 8).tolist()) for r in range(height - 1, -1, -1)]


def axis(t0: int, t1: int, width: int, start: int) -> str:
    """The axis's first and last time in seconds since `start` (the capture's first packet), at
    its ends: `0.000010592 s` ... `0.000024099 s`."""
    left, right = f"{relative(t0 - start)} s", f"{relative(t1 - start)} s"
    if len(left) + len(right) + 1 > width:          # too narrow for both: the first alone
        return left[:width]
    return left + right.rjust(width - len(left))
