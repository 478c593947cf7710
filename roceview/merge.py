"""Several capture files merged into one packets table in time order (as mergecap does).

A ring buffer's files follow each other: each file's batches pass through as they are, one file
open at a time. Files that overlap in time (two mirror ports, two hosts' captures of the same
minutes) are interleaved by timestamp: a file is opened once the files already open have
reached its first packet, and rows are handed on up to the earliest time every open file has
reached, so memory holds about one batch per open file, not the files. Ties keep the files'
order (first packet, then name) and each file's own order. Frame numbers count the merged
table's rows from 1.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from roceview.batch import Batch


class _Source:
    """One file's batches, read on demand; `high` is the latest timestamp read so far."""

    def __init__(self, batches: Iterator[Batch]):
        self.batches, self.pending, self.high, self.done = batches, [], None, False
        self.pull()

    def pull(self) -> None:
        """Read the file's next batch with rows (or find the file's end)."""
        for batch in self.batches:
            if batch.n:
                self.pending.append(batch)
                top = int(batch.cols["ts_ns"].max())
                self.high = top if self.high is None else max(self.high, top)
                return
        self.done = True

    def take_until(self, limit: int | None) -> list[Batch]:
        """The pending rows with ts <= limit (all when limit is None), in order; the rest stay."""
        if limit is None:
            out, self.pending = self.pending, []
            return out
        out, keep = [], []
        for batch in self.pending:
            ts = batch.cols["ts_ns"]
            if ts.max() <= limit:
                out.append(batch)
            elif ts.min() > limit:
                keep.append(batch)
            else:
                now = ts <= limit
                out.append(batch.select(np.flatnonzero(now)))
                keep.append(batch.select(np.flatnonzero(~now)))
        self.pending = keep
        return out


def merge_in_time(starts: list[int], open_file: Callable[[int], Iterator[Batch]]) -> Iterator[Batch]:
    """Batches of files 0..n-1 (ordered by `starts`, each file's first timestamp) merged by
    timestamp; open_file(k) gives file k's batches."""
    active: list[_Source] = []
    following, frame = 0, 1
    while True:
        live = [s for s in active if not s.done]
        reached = min((s.high for s in live), default=None)
        if following < len(starts) and (reached is None or starts[following] <= reached):
            active.append(_Source(open_file(following)))       # its first packet is due
            following += 1
            continue
        limit = reached if following == len(starts) else min(reached, starts[following])
        for batch in _in_order([s.take_until(limit) for s in active]):
            batch.cols["frame"] = np.arange(frame, frame + batch.n, dtype=np.int64)
            frame += batch.n
            yield batch
        if not live:
            return
        min(live, key=lambda s: s.high).pull()                   # the file holding the others back
        active = [s for s in active if s.pending or not s.done]


def _in_order(parts: list[list[Batch]]) -> list[Batch]:
    """One source's batches as they are; several sources' rows sorted by time (stable: ties
    in source order, then each source's own order)."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else []
    joined = Batch.concat([b for p in parts for b in p])
    return [joined.select(np.argsort(joined.cols["ts_ns"], kind="stable"))]
