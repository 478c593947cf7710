"""pfc_timeline: per (pause source MAC, priority) and timeline bucket, the pause frames and the
time paused, for the TUI's PFC timeline and the JSON's series (`pfc_timeline`).

Buckets are the timeline's (summary `timeline_bucket_ms`), aligned on multiples of the bucket
length since the Unix epoch as analysis/timeline.py aligns them. `paused_us` is the time of the
bucket inside a continuous paused period of diagnose/pfc.py (802.1Qbb: q x 512 bit times at the
link speed, cut by the next frame for the priority, a refresh continuing the period). A pause
still running when the capture ends counts its full time, as pfc.csv's `paused_us` does, so a
key's paused_us summed over its buckets is pfc.csv's. The frames come from the event log: past
its MAX_PER_KIND pauses of a kind, the timeline covers the first ones only (as pfc_storm says).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import Coded, Table
from roceview.analysis.timeline import MAX_ROWS
from roceview.diagnose.context import Context
from roceview.diagnose.link_speed import link_speed
from roceview.diagnose.pfc import _periods, pause_frames

PFC_TIMELINE_COLUMNS = ("bucket_start", "src_mac", "priority", "pause_frames", "paused_us", "resume_frames")
_NEVER = np.iinfo(np.int64).max          # periods are not clipped at the capture's end (pfc.csv's)


def pfc_timeline(ctx: Context) -> Table:
    """The rows, in (bucket_start, src_mac, priority) order; only buckets with a pause frame, a
    resume frame or time paused."""
    frames = pause_frames(ctx)
    if not frames:
        return Table.empty(PFC_TIMELINE_COLUMNS)
    ns_per_quantum = 512.0 / link_speed(ctx)
    keys = sorted(frames)
    s = ctx.summary
    bucket_ns = max(1, int(round(float(s.get("timeline_bucket_ms") or s.get("bucket_ms") or 1.0) * 1e6)))
    frames = [frames[k] for k in keys]
    periods = [_periods(f, ns_per_quantum, _NEVER) for f in frames]
    until = _budget_end(frames, periods, bucket_ns)
    parts = [_key_rows(*_before(f, p, until), bucket_ns) for f, p in zip(frames, periods)]
    which = np.repeat(np.arange(len(keys)), [len(p[0]) for p in parts])
    bucket, pauses, paused, resumes = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((which, bucket))          # keys are sorted: (bucket, src_mac, priority)
    which = which[order]
    return Table(PFC_TIMELINE_COLUMNS, {
        "bucket_start": bucket[order] * bucket_ns, "src_mac": _coded([k[0] for k in keys], which),
        "priority": _coded([k[1] for k in keys], which), "pause_frames": pauses[order],
        "paused_us": paused[order] / 1000.0, "resume_frames": resumes[order]})


def _coded(of_key: list[str], which: np.ndarray) -> Coded:
    """A str column of the rows of keys `which`, as codes (a storm in 1 ms buckets over an hour:
    millions of rows naming a few keys; the TUI picks a key's rows by its code)."""
    names, code = np.unique(np.asarray(of_key, dtype=object), return_inverse=True)
    return Coded(code.reshape(-1)[which], names.tolist())


def _budget_end(frames: list[np.ndarray], periods: list[np.ndarray], bucket_ns: int) -> int:
    """A bucket edge before which the rows stay within MAX_ROWS (_NEVER: all of them do): a
    pause held for an hour in 1 ms buckets, on hundreds of ports, keeps its first rows."""
    def rows(until: int) -> int:
        return sum(_row_count(*_before(f, p, until), bucket_ns) for f, p in zip(frames, periods))

    if rows(_NEVER) <= MAX_ROWS:
        return _NEVER
    lo = min(int(f[0, 0]) for f in frames) // bucket_ns
    hi = max([int(f[-1, 0]) for f in frames] + [int(p[-1, 1]) for p in periods if len(p)]) // bucket_ns + 1
    while hi - lo > 1:                           # in buckets: rows(lo * bucket_ns) <= MAX_ROWS
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if rows(mid * bucket_ns) <= MAX_ROWS else (lo, mid)
    return lo * bucket_ns


def _before(frames: np.ndarray, periods: np.ndarray, until: int) -> tuple[np.ndarray, np.ndarray]:
    """A key's frames and paused periods before `until` (ns)."""
    if until == _NEVER:
        return frames, periods
    periods = periods[periods[:, 0] < until]
    return frames[frames[:, 0] < until], np.stack([periods[:, 0], np.minimum(periods[:, 1], until)], axis=1)


def _row_count(frames: np.ndarray, periods: np.ndarray, bucket_ns: int) -> int:
    """One key's rows (_key_rows') without making them: its periods' buckets (consecutive
    periods share at most one) and its frames' buckets outside them."""
    first, last = periods[:, 0] // bucket_ns, (periods[:, 1] - 1) // bucket_ns
    shared = int((first[1:] == last[:-1]).sum())
    at = np.unique(frames[:, 0] // bucket_ns)
    i = np.searchsorted(first, at, side="right") - 1
    inside = (i >= 0) & (last[np.maximum(i, 0)] >= at) if len(last) else np.zeros(len(at), bool)
    return int((last - first + 1).sum()) - shared + int((~inside).sum())


def _key_rows(frames: np.ndarray, periods: np.ndarray, bucket_ns: int) -> tuple[np.ndarray, ...]:
    """One key's (bucket, pause frames, paused ns, resume frames), buckets ascending."""
    frame_bucket = frames[:, 0] // bucket_ns
    cut_bucket, cut_ns = _cut(periods, bucket_ns)
    bucket, at = np.unique(np.concatenate([frame_bucket, cut_bucket]), return_inverse=True)
    n, at_frame, at_cut = len(bucket), at[:len(frame_bucket)], at[len(frame_bucket):]
    xoff = frames[:, 1] > 0
    return (bucket, np.bincount(at_frame[xoff], minlength=n), np.bincount(at_cut, cut_ns, minlength=n),
            np.bincount(at_frame[~xoff], minlength=n))


def _cut(periods: np.ndarray, bucket_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Periods [start, end) cut at bucket edges: (bucket, ns of the period in it) per piece."""
    start, end = periods[:, 0], periods[:, 1]
    first, last = start // bucket_ns, (end - 1) // bucket_ns
    count = last - first + 1
    which = np.repeat(np.arange(len(start)), count)
    step = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    bucket = first[which] + step
    lo = np.maximum(start[which], bucket * bucket_ns)
    hi = np.minimum(end[which], (bucket + 1) * bucket_ns)
    return bucket, (hi - lo).astype(np.float64)
