"""One partition's analysis on a worker (dask_partition.analyse): the unchanged Analyzer and
FactCollector fed the local engine's chunks restricted to the partition, and what the driver
needs to merge the partitions exactly (partition_merge.py) or to see that it cannot."""
from __future__ import annotations

import numpy as np

from roceview.analysis import Analyzer
from roceview.analysis.timeline import Timeline
from roceview.batch import Batch
from roceview.diagnose.facts import FactCollector

LEVELS = 12          # bucket doublings followed (the local Timeline's, past MAX_ROWS rows)


class PartitionAnalyzer(Analyzer):
    """An Analyzer told, chunk by chunk, whether the whole capture's chunk may pair QPs."""

    gate = True

    def pairing_open(self, last_idx: int) -> bool:
        return self.gate


class OrderedFacts(FactCollector):
    """A FactCollector that notes where each class was first seen: the local collector numbers
    the classes new in a chunk by their last row in it (facts_kernels.distinct_rank), so the
    whole capture's order is (chunk, frame of that row); except that distinct() numbers a class
    whose hash shares a table slot with another of the chunk's classes after the others, which
    the whole chunk decides and a partition does not see (the diagnoser reads classes per
    flow: its findings do not depend on their order)."""

    chunk = 0

    def __init__(self):
        super().__init__()
        self.first_seen: list[tuple[int, int]] = []

    def _new_classes(self, v, h, last, new, first) -> None:
        super()._new_classes(v, h, last, new, first)          # sorts `new` into their numbering
        frames = v.batch.cols["_gidx"][v.at(np.asarray(last)[new])] if new else []
        self.first_seen += [(self.chunk, int(f)) for f in frames]


class RecordingTimeline(Timeline):
    """A Timeline that notes, per chunk, how many (bucket, flow) rows it adds and how many of
    them are new, at buckets 1, 2, 4, ... times as long: the driver sums them over the
    partitions and replays when the local Timeline would have doubled its buckets."""

    def __init__(self, timeline: Timeline):
        super().__init__(timeline.bucket_ns, timeline.max_rows)
        self.chunk, self.record, self.unsure = 0, [], False
        self._last = np.full((LEVELS, 0), np.iinfo(np.int64).min, np.int64)

    def feed(self, ts, flow, values, n_flows, in_order=False):
        parts, rows = len(self._parts), self._rows
        out = super().feed(ts, flow, values, n_flows, in_order)
        if len(ts) == 0:
            return out
        if len(self._parts) == parts + 1 and self.bucket_ns == self.requested_ns and self._rows > rows:
            bucket, fl = self._parts[-1][:2]              # the chunk's distinct (bucket, flow) rows
        else:                                   # this chunk's rows were merged: from the rows
            bucket, fl = _distinct(ts // self.requested_ns, np.asarray(flow, np.int64))
        fl = np.asarray(fl, np.int64)
        if self._last.shape[1] < n_flows:
            grown = np.full((LEVELS, n_flows), np.iinfo(np.int64).min, np.int64)
            grown[:, :self._last.shape[1]] = self._last
            self._last = grown
        order = np.argsort(fl, kind="stable")           # (flow, bucket) order: one sort for every level
        bucket, fl = bucket[order], fl[order]
        counts = np.zeros((2, LEVELS), np.int64)
        new_flow = np.r_[True, fl[1:] != fl[:-1]]
        for level in range(LEVELS):
            b = bucket >> level
            first = new_flow.copy()
            first[1:] |= b[1:] != b[:-1]
            b, f = b[first], fl[first]
            last = self._last[level]
            self.unsure |= bool((b < last[f]).any())        # out of time order: cannot tell
            counts[:, level] = len(b), int(np.count_nonzero(b > last[f]))
            np.maximum.at(last, f, b)
        self.record.append((self.chunk, counts))
        return out


def _distinct(bucket: np.ndarray, flow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (bucket, flow) pairs (as Timeline keys them: bucket-major)."""
    if not len(bucket):
        return bucket, flow
    b0, width = int(bucket.min()), int(flow.max()) + 1
    key = np.unique((bucket - b0) * width + flow)
    return key // width + b0, key % width


def _runs(sorted_ids: np.ndarray) -> np.ndarray:
    return sorted_ids[np.r_[True, sorted_ids[1:] != sorted_ids[:-1]]]


def chunks(parts: list[Batch], chunk_starts: np.ndarray):
    """(chunk, its rows in frame order) from the partition's part of every file (each in frame
    order): only a chunk's own rows are copied, when they come from several files."""
    parts = [p for p in parts if p.n]
    if not parts:
        return
    of = [np.searchsorted(chunk_starts, p.cols["_gidx"], side="right") - 1 for p in parts]
    ids = np.unique(np.concatenate([_runs(c) for c in of]))
    cuts = [(np.searchsorted(c, ids, "left"), np.searchsorted(c, ids, "right")) for c in of]
    for i, c in enumerate(ids.tolist()):
        pieces = [p.select(slice(int(lo[i]), int(hi[i]))) for p, (lo, hi) in zip(parts, cuts) if hi[i] > lo[i]]
        batch = pieces[0] if len(pieces) == 1 else Batch.concat(pieces)
        g = batch.cols["_gidx"]
        if len(pieces) > 1 and not (g[1:] > g[:-1]).all():             # overlapping files
            batch = batch.select(np.argsort(g, kind="stable"))
        batch.cols["frame"] = batch.cols["_gidx"] + 1
        yield c, batch


def run_partition(parts: list[Batch], chunk_starts: np.ndarray, gates: np.ndarray, pmtu, link_speed: float,
                  bucket_ms: float, facts: bool) -> dict:
    an = PartitionAnalyzer(pmtu=pmtu, link_speed_gbps=link_speed, bucket_ms=bucket_ms)
    an.timeline = timeline = RecordingTimeline(an.timeline)
    fc = OrderedFacts() if facts else None
    held = False
    for c, part in chunks(parts, chunk_starts):
        an.gate, timeline.chunk = bool(gates[c]), c
        an.feed(part)
        held = held or bool(an._held)
        if fc is not None:
            fc.chunk = c
            fc.feed(part, an.flow_ids(part))
    result = an.finish()
    out = {"flows": result.flows_table, "events": result.events_table, "timeline": result.timeline_table,
           "pfc": result.pfc_table, "held": held,
           "event_counts": {k: an.events.count(k) for k in an.events.kept},
           "bucket_ns": timeline.bucket_ns, "timeline_record": timeline.record,
           "timeline_unsure": timeline.unsure,
           "pmtu_seen": an.path_mtu.seen, "pmtu_other": set(an.path_mtu.other_sizes),
           "largest_payload": an.path_mtu.largest_payload,
           "pause_frames": int(an.pfc.st.pause_frames.sum()), "resume_frames": int(an.pfc.st.resume_frames.sum())}
    if fc is not None:
        f = fc.finish()
        out["facts"] = {"classes": f.classes, "first_seen": fc.first_seen, "bad_icrc_frames": f.bad_icrc_frames,
                        "read_breaks": f.read_breaks}
    return out
