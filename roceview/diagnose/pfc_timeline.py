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

from roceview.analysis.tables import Table
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
    periods = [_periods(frames[k], ns_per_quantum, _NEVER) for k in keys]
    bucket_ns = _bucket_ns(ctx, [frames[k] for k in keys], periods)
    parts = [_key_rows(frames[k], p, bucket_ns) for k, p in zip(keys, periods)]
    which = np.repeat(np.arange(len(keys)), [len(p[0]) for p in parts])
    bucket, pauses, paused, resumes = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((which, bucket))          # keys are sorted: (bucket, src_mac, priority)
    which = which[order].tolist()
    return Table(PFC_TIMELINE_COLUMNS, {
        "bucket_start": bucket[order] * bucket_ns, "src_mac": [keys[i][0] for i in which],
        "priority": [keys[i][1] for i in which], "pause_frames": pauses[order],
        "paused_us": paused[order] / 1000.0, "resume_frames": resumes[order]})


def _bucket_ns(ctx: Context, frames: list[np.ndarray], periods: list[np.ndarray]) -> int:
    """The timeline's bucket; doubled (as the timeline doubles its own) while the rows would
    pass MAX_ROWS: a pause held for an hour in 1 ms buckets, on hundreds of ports."""
    s = ctx.summary
    bucket_ns = max(1, int(round(float(s.get("timeline_bucket_ms") or s.get("bucket_ms") or 1.0) * 1e6)))
    while sum(_row_bound(f, p, bucket_ns) for f, p in zip(frames, periods)) > MAX_ROWS:
        bucket_ns *= 2
    return bucket_ns


def _row_bound(frames: np.ndarray, periods: np.ndarray, bucket_ns: int) -> int:
    """At most this many rows for one key: its frames' buckets and its periods' buckets."""
    spans = (periods[:, 1] - 1) // bucket_ns - periods[:, 0] // bucket_ns + 1
    return len(frames) + int(spans.sum())


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
