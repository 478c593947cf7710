"""Several capture files merged into one packets table in time order (as mergecap does).

A ring buffer's files follow each other: only one is open at a time and its batches pass
through as they are. Files that overlap in time (two mirror ports) are interleaved: a file is
opened once the open files have reached its first packet, and each open file hands on the rows
no other file can still precede (`_bounds`), so memory holds about one batch per open file
(packets.py reads a file opened beside n others in chunks of 1/(n+1) the size). A file's own
order is kept: rows are merged by the running maximum of their file's timestamps (a packet
stamped earlier than its predecessor stays behind it). Equal times keep the files' order
(first packet, then name). Frames are numbered in the merged order.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from roceview.batch import Batch


class _Source:
    """One file's batches, read on demand, each with its merge key (the running maximum of the
    file's timestamps, so non-decreasing: what is handed on is always a prefix)."""

    def __init__(self, batches: Iterator[Batch]):
        self.batches, self.pending, self.high, self.done = batches, [], None, False
        self.pull()

    def pull(self) -> None:
        """Read the file's next batch with rows (or find the file's end)."""
        for batch in self.batches:
            if batch.n:
                key = np.maximum.accumulate(batch.cols["ts_ns"])
                if self.high is not None:
                    np.maximum(key, self.high, out=key)
                self.pending.append((batch, key))
                self.high = int(key[-1])
                return
        self.done = True

    def take_until(self, bound: int | None) -> list[tuple[Batch, np.ndarray]]:
        """The pending rows whose key is at most `bound` (all when None): a prefix."""
        if bound is None:
            out, self.pending = self.pending, []
            return out
        out = []
        while self.pending:
            batch, key = self.pending[0]
            cut = int(np.searchsorted(key, bound, side="right"))
            if cut == len(key):
                out.append(self.pending.pop(0))
                continue
            if cut:
                out.append((batch.select(slice(0, cut)), key[:cut]))          # views
                self.pending[0] = (batch.select(slice(cut, batch.n)), key[cut:])
            break
        return out


def merge_in_time(starts: list[int], open_file: Callable[[int, int], Iterator[Batch]],
                  chunk_rows: int) -> Iterator[Batch]:
    """Batches of files 0..n-1 (ordered by `starts`, each file's first timestamp) merged in
    time; open_file(k, n) gives file k's batches, opened while n files are being read (a
    reader can then read smaller chunks). Merged batches hold at most chunk_rows rows."""
    active: list[_Source] = []
    following, frame = 0, 1
    while True:
        live = [s for s in active if not s.done]
        reached = min((s.high for s in live), default=None)
        if following < len(starts) and (reached is None or starts[following] <= reached):
            active.append(_Source(open_file(following, len(live))))   # its first packet is due
            following += 1
            continue
        due = starts[following] if following < len(starts) else None
        parts = [s.take_until(b) for s, b in zip(active, _bounds(active, due))]
        for batch in _in_order(parts, chunk_rows):
            batch.cols["frame"] = np.arange(frame, frame + batch.n, dtype=np.int64)
            frame += batch.n
            yield batch
        if not live:
            return                                             # every file read: all handed on
        min(live, key=lambda s: s.high).pull()                 # the file holding the others back
        active = [s for s in active if s.pending or not s.done]


def _bounds(active: list[_Source], due: int | None) -> list[int | None]:
    """Per open file (in file order), the last key it may hand on now: no file still being
    read can bring a row that goes before it (at equal keys an earlier file's rows come first,
    a later file's after), nor can the next file to open (it comes after every open one).
    Prefix and suffix minima: one pass each way however many files are open."""
    inf = 1 << 63
    n = len(active)
    before, after = [inf] * (n + 1), [inf] * (n + 1)
    for i, s in enumerate(active):                       # earlier files: strictly below their high
        before[i + 1] = min(before[i], s.high - 1 if not s.done else inf)
    for i in range(n - 1, -1, -1):                       # later files: up to their high
        s = active[i]
        after[i] = min(after[i + 1], s.high if not s.done else inf)
    cap = inf if due is None else due
    out = []
    for i in range(n):
        b = min(cap, before[i], after[i + 1])
        out.append(None if b == inf else b)
    return out


def _in_order(parts: list[list[tuple[Batch, np.ndarray]]], chunk_rows: int) -> list[Batch]:
    """One file's rows as they are; several files' rows by key (a stable sort: equal keys in
    file order, then each file's own order), in batches of at most chunk_rows rows."""
    parts = [p for p in parts if p]
    if not parts:
        return []
    if len(parts) == 1:
        return [batch for batch, _ in parts[0]]
    joined = Batch.concat([batch for p in parts for batch, _ in p])
    order = np.argsort(np.concatenate([key for p in parts for _, key in p]), kind="stable")
    return [joined.select(order[k:k + chunk_rows]) for k in range(0, len(order), chunk_rows)]
