"""The partitioned Dask run's plan made file by file, so that the partitions are analyzed while
the later files are still read (run._streamed).

For files that follow each other in time (a ring buffer), what a file's rows need before they
can be analyzed is known once the files up to it are read: frame numbers count the rows of
the files before; the local engine's chunks are the reader's, joined by packets.read.coalesced,
whose rule closes a group when the next entry comes; and a chunk's one cross-flow decision
(plan.pairing_open) reads the flows first seen up to its end. `StreamPlan.add` takes
each file's summary (partition.read's meta) in order and returns the chunks it closes
with their decisions; `finish` the rest. Whether the files follow each other is judged file by
file (plan.follows, the rule of the whole Plan's); the run checks the streamed chunks and decisions
against the whole Plan and gates at the end (run), so a disagreement costs time, never
a result.
"""
from __future__ import annotations

import numpy as np

from roceview.engines.dask.plan import NONE, fold_flows, follows, pairing_open
from roceview.packets.read import Coalescer


class StreamPlan:
    """starts: the files' first timestamps, as the driver ordered them (packets.read.time_ordered)."""

    def __init__(self, starts: list, chunk_packets: int):
        self.starts = starts
        self.joining = Coalescer(chunk_packets)
        self.rows = 0                            # rows of the files added
        self.sizes: list[int] = []               # the closed chunks' rows
        self.last: list[int] = []                # and their last analyzed frame index (NONE: none)
        self.key = np.zeros((0, 5), np.uint64)   # the flows so far, folded (plan.fold_flows)
        self.best = np.zeros((4, 0), np.int64)
        self.decided: list[np.ndarray] = []      # the closed chunks' decisions, as handed out

    def follows(self, k: int, meta: dict) -> bool:
        """Whether file k follows the one before in time (plan.follows)."""
        return follows(self.starts, k, meta)

    def add(self, meta: dict) -> tuple[np.ndarray, np.ndarray, int]:
        """File k's summary (k: the files added so far): (the frame index of each chunk it
        closes, their decisions, the end of the last: the rows before it can be analyzed)."""
        o = self.rows
        closed = []
        for n, lo, hi, at in meta["chunks"]:
            if n:
                closed += self.joining.push((n, o + at if at >= 0 else NONE), n, lo, hi)
        self.rows += meta["n"]
        self._fold(meta["flows"], o)
        return self._closed(closed, final=False)

    def finish(self) -> tuple[np.ndarray, np.ndarray, int]:
        return self._closed(self.joining.flush(), final=True)

    def _fold(self, flows: dict, offset: int) -> None:
        folded = {"src": self.key[:, 0:2], "dst": self.key[:, 2:4], "qp": self.key[:, 4], "first": self.best}
        self.key, self.best = fold_flows([0, offset], [folded, flows])

    def _closed(self, groups: list[list], final: bool) -> tuple[np.ndarray, np.ndarray, int]:
        before = len(self.sizes)
        for group in groups:
            self.sizes.append(sum(n for n, _ in group))
            self.last.append(max(at for _, at in group))
        bounds = np.cumsum([0] + self.sizes).astype(np.int64)
        # the rows past the closed chunks as one more chunk, so that flows first seen there
        # count for no closed chunk (they decide later chunks, once those close)
        starts, last = (bounds[:-1], self.last) if final else (bounds, self.last + [NONE])
        if not len(starts):
            return np.zeros(0, np.int64), np.zeros(0, bool), 0
        gate = pairing_open(starts, np.array(last, np.int64), self.best)
        self.decided.append(gate[before:len(self.sizes)])
        return bounds[before:len(self.sizes)], self.decided[-1], int(bounds[-1])

    def agrees(self, plan, gate: np.ndarray) -> bool:
        """Whether the chunks and decisions handed out are the whole capture's (plan.Plan
        and gates, once every file is read): a run fed them is the local engine's. Only the
        decisions of chunks with an analyzed row count: the Analyzer reads no other's
        (analyzer.ChunkAnalysis), and gates() leaves them all False in a capture without a flow."""
        n = plan.n_chunks
        starts = np.cumsum([0] + self.sizes[:-1]).astype(np.int64)
        if n != len(self.sizes) or not np.array_equal(plan.chunk_starts[:n], starts):
            return False
        read = np.array(self.last, np.int64) != NONE
        return np.array_equal(gate[:n][read], np.concatenate(self.decided)[read] if n else gate[:0])
