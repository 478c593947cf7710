"""One partition's analysis on a worker (partition.analyze_partition): the unchanged Analyzer and
FactCollector fed the local engine's chunks restricted to the partition, and what the driver
needs to merge the partitions exactly (partition_merge.py) or to see that it cannot."""
from __future__ import annotations

import pickle

import numpy as np

from roceview.analysis import Analyzer
from roceview.analysis.tables import Coded, Table
from roceview.analysis.timeline import Timeline
from roceview.packets.batch import Batch
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

    def new_classes(self, v, h, last, new, first) -> None:
        super().new_classes(v, h, last, new, first)          # sorts `new` into their numbering
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
        parts, rows = len(self.parts), self.rows
        out = super().feed(ts, flow, values, n_flows, in_order)
        if len(ts) == 0:
            return out
        if len(self.parts) == parts + 1 and self.bucket_ns == self.requested_ns and self.rows > rows:
            bucket, fl = self.parts[-1][:2]              # the chunk's distinct (bucket, flow) rows
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


def chunks(pieces: list[tuple[dict, np.ndarray]], chunk_starts: np.ndarray):
    """(chunk, its rows in frame order) from the partition's pieces (packets.wire packs, each
    with its rows' frame indexes, in frame order within a file): a piece is unpacked when its
    first chunk comes and dropped after its last, so memory holds the pieces of about one
    chunk; a chunk's rows are copied only when they come from several pieces."""
    pieces = [(packed, g) for packed, g in pieces if len(g)]
    if not pieces:
        return
    of = [np.searchsorted(chunk_starts, g, side="right") - 1 for _, g in pieces]
    ids = np.unique(np.concatenate([_runs(c) for c in of]))
    first = np.array([c[0] for c in of])
    last = np.array([c[-1] for c in of])
    open_: dict[int, Batch] = {}
    for c in ids.tolist():
        taking = np.flatnonzero((first <= c) & (last >= c)).tolist()
        slices = []
        for i in taking:
            if i not in open_:
                piece = pieces[i][0]
                open_[i] = piece if isinstance(piece, Batch) else _unpacked(*pieces[i])
            lo, hi = np.searchsorted(of[i], [c, c + 1])
            if hi > lo:
                slices.append(open_[i].select(slice(int(lo), int(hi))))
        for i in taking:
            if last[i] == c:
                del open_[i]
        if not slices:
            continue
        batch = slices[0] if len(slices) == 1 else joined(slices)
        g = batch.cols["_gidx"]
        if len(slices) > 1 and not (g[1:] > g[:-1]).all():             # overlapping files
            batch = batch.select(np.argsort(g, kind="stable"))
        batch.cols["frame"] = batch.cols["_gidx"] + 1
        yield c, batch


def joined(batches: list[Batch]) -> Batch:
    """Batch.concat of batches whose columns may differ (a partition's RoCE rows come without
    the PFC frames' own columns, its copies of the PFC frames with them): a column a batch
    lacks is zeros there, valid on none of its rows."""
    names = {k: v for b in batches for k, v in b.cols.items()}
    if all(len(b.cols) == len(names) for b in batches):
        return Batch.concat(batches)
    filled = []
    for b in batches:
        cols, valid = dict(b.cols), dict(b.valid)
        for k in names.keys() - b.cols.keys():
            cols[k] = np.zeros((b.n,) + names[k].shape[1:], names[k].dtype)
            valid[k] = np.zeros(b.n, bool)
        filled.append(Batch(b.n, {k: cols[k] for k in names}, valid))
    return Batch.concat(filled)


def _unpacked(packed: dict, gidx: np.ndarray) -> Batch:
    from roceview.packets.wire import unpack

    (b,) = unpack(packed)
    cols = {k: v for k, v in b.cols.items() if k != "_row"}
    cols["_gidx"] = gidx
    return Batch(b.n, cols, b.valid)


def to_wire(table: Table, steps: dict | None = None, derived: tuple = ()) -> dict:
    """A result table as Dask sends a dict of numpy arrays (its numpy serializer: 3x faster
    than the pickle a Table object takes, measured with 1 M-row timelines between processes),
    the rest (column order, coded names, lists) in one pickled blob. from_wire undoes it.
    steps: int columns whose values are all multiples of a step (a timeline's bucket_start, of
    its bucket_ns), sent as (value - least) // step (_stepped); derived: columns not sent (the
    receiver computes them again: a timeline's gbps, from bytes): a 1 M-row partition's timeline
    crosses as 4 MB instead of 20."""
    from roceview.packets.wire import pack_array

    arrays, names, lists, offsets = {}, {}, {}, {}
    for c in table.columns:
        v = table.data[c]
        if c in derived:
            continue
        if isinstance(v, Coded):
            arrays[c], names[c] = pack_array(v.codes), v.names
        elif c in (steps or {}) and len(v):
            arrays[c], offsets[c] = _stepped(v, steps[c])
        elif isinstance(v, np.ndarray) and v.dtype != object:
            arrays[c] = pack_array(v)        # narrowed: a timeline's counters are mostly small
        else:
            lists[c] = v
    columns = tuple(c for c in table.columns if c not in derived)
    return {"arrays": arrays, "rest": pickle.dumps((columns, names, lists, offsets), protocol=5)}


def _stepped(values: np.ndarray, step: int) -> tuple:
    """(a column as steps from its least value, narrowed: in order, as the count of rows at
    each step where those are fewer than the rows, as a timeline's 2,000 buckets of 1 M rows;
    (least, step, whether counted, the column's dtype))."""
    from roceview.packets.wire import pack_array

    least = int(values.min())
    steps = (values - least) // step
    if int(steps[-1]) < len(steps) and bool((steps[1:] >= steps[:-1]).all()):
        return pack_array(np.bincount(steps)), (least, step, True, values.dtype.str)
    return pack_array(steps), (least, step, False, values.dtype.str)


def from_wire(wire: dict) -> Table:
    """The table to_wire sent, less its derived columns."""
    from roceview.packets.wire import unpack_array

    columns, names, lists, offsets = pickle.loads(wire["rest"])
    arrays = {c: unpack_array(v) for c, v in wire["arrays"].items()}
    for c, (least, step, runs, dtype) in offsets.items():
        dtype = np.dtype(dtype)                      # the column's own (else runs give int64)
        values = np.arange(len(arrays[c]), dtype=dtype) if runs else arrays[c].astype(dtype)
        values *= dtype.type(step)                   # a new array: the wire's is left as it came
        values += dtype.type(least)
        arrays[c] = np.repeat(values, arrays[c]) if runs else values
    data = {c: Coded(arrays[c], names[c]) if c in names else lists[c] if c in lists else arrays[c] for c in columns}
    return Table(columns, data)


def run_partition(parts: list[tuple[dict, np.ndarray]], chunk_starts: np.ndarray, gates: np.ndarray, pmtu,
                  link_speed: float, bucket_ms: float, facts: bool, pfc_owner: bool = True,
                  priority_table=None) -> dict:
    run = PartitionRun(pmtu, link_speed, bucket_ms, facts, pfc_owner, priority_table)
    run.add(parts, chunk_starts, gates, None)
    return run.result()


class PartitionRun:
    """A partition's analysis fed as the files come (plan_stream): each file's pieces with the
    chunks closed so far; the rows past the last closed chunk wait for the next file."""

    def __init__(self, pmtu, link_speed: float, bucket_ms: float, facts: bool, pfc_owner: bool = True,
                 priority_table=None):
        self.an = PartitionAnalyzer(pmtu=pmtu, link_speed_gbps=link_speed, bucket_ms=bucket_ms,
                                    priority_table=priority_table)
        self.an.pfc_owner = pfc_owner       # the others' PFC frames are copies: pause state only
        self.an.timeline = self.timeline = RecordingTimeline(self.an.timeline)
        self.an.priorities = None           # priorities.csv: counted over every row by the reads (partition._Stats)
        self.fc = OrderedFacts() if facts else None
        self.held = False
        self.waiting: list[tuple] = []            # (piece: a pack or a Batch, its rows' frame indexes)
        self.starts, self.gates = np.zeros(0, np.int64), np.zeros(0, bool)

    def add(self, pieces: list[tuple], starts: np.ndarray, gates: np.ndarray, end: int | None) -> None:
        """pieces: (pack, frame indexes) in frame order; starts, gates: the chunks closed now;
        end: the frame index their last ends at (None: every chunk is closed)."""
        self.waiting += pieces
        self.starts, self.gates = np.r_[self.starts, starts], np.r_[self.gates, gates]
        now, self.waiting = (self.waiting, []) if end is None else _before(self.waiting, end)
        an, fc = self.an, self.fc
        for c, part in chunks(now, self.starts):
            an.gate, self.timeline.chunk = bool(self.gates[c]), c
            an.feed(part)
            self.held = self.held or bool(an.holding)
            if fc is not None:
                fc.chunk = c
                fc.feed(part, an.flow_ids(part))

    def nbytes(self) -> int:
        """What Dask is told the run holds (dask.sizeof): its waiting rows, and enough for the
        analysis state that moving it to another worker looks as costly as it is."""
        from roceview.packets.wire import array_bytes

        return sum(array_bytes((p.cols, p.valid) if isinstance(p, Batch) else p) + g.nbytes
                   for p, g in self.waiting) + (64 << 20)

    def result(self) -> dict:
        an, timeline, fc = self.an, self.timeline, self.fc
        result = an.finish()
        # the timeline's buckets as steps, its gbps computed again by the merge (partition_merge)
        out = {"flows": to_wire(result.flows_table), "events": to_wire(result.events_table),
               "ops": to_wire(result.ops_table), "op_stats": to_wire(result.op_stats_table),
               "read_depth": to_wire(result.read_depth_table), "ops_summary": an.ops.summary(),
               "cc": to_wire(result.cc_table), "cnps": sum(an.cc.cnp.received.values()),
               "cm_messages": an.connections.messages, "cm_last_ts": an.connections.last_ts,
               "timeline": to_wire(result.timeline_table, {"bucket_start": timeline.bucket_ns}, ("gbps",)),
               "pfc": to_wire(result.pfc_table), "held": self.held,
               "paused_flows": to_wire(result.paused_flows_table),
               "event_counts": {k: an.events.count(k) for k in an.events.kept},
               "bucket_ns": timeline.bucket_ns, "timeline_record": timeline.record,
               "timeline_unsure": timeline.unsure,
               "pmtu_seen": an.path_mtu.seen, "pmtu_other": set(an.path_mtu.other_sizes),
               "largest_payload": an.path_mtu.largest_payload,
               "pause_frames": int(an.pfc.st.pause_frames.sum()) if an.pfc_owner else 0,
               "resume_frames": int(an.pfc.st.resume_frames.sum()) if an.pfc_owner else 0}
        if fc is not None:
            f = fc.finish()
            out["facts"] = {"classes": f.classes, "first_seen": fc.first_seen, "bad_icrc_frames": f.bad_icrc_frames,
                            "read_breaks": f.read_breaks}
        return out


def _before(pieces: list[tuple], end: int) -> tuple[list[tuple], list[tuple]]:
    """(the pieces' rows before frame index `end`, the rest), a piece that straddles it split
    (unpacked): a file's pieces are in frame order, so the rows before are a prefix."""
    now, later = [], []
    for piece, g in pieces:
        if not len(g) or g[-1] < end:
            now.append((piece, g))
        elif g[0] >= end:
            later.append((piece, g))
        else:
            batch = piece if isinstance(piece, Batch) else _unpacked(piece, g)
            cut = int(np.searchsorted(g, end))
            now.append((batch.select(slice(0, cut)), g[:cut]))
            later.append((batch.select(slice(cut, None)), g[cut:]))
    return now, later


try:                                                     # the workers' memory accounting
    from dask.sizeof import sizeof as _sizeof

    _sizeof.register(PartitionRun)(lambda run: run.nbytes())
except ImportError:                                      # pragma: no cover - dask is an extra
    pass
