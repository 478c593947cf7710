"""`analyze --engine dask`, partitioned: the tasks the workers run (run.py drives them).

1. read: a file decoded (the analysis projection) and its rows cut at once into partitions by
   the unordered pair of endpoints (RoCE v1 GIDs or v2 addresses, as path MTUs are kept:
   pmtu.path_keys), so both directions of a connection, their QP pairing, CM handshake and
   path MTU stay in one partition; PFC and PAUSE frames in one partition of their own, which
   logs and counts them, and copied to every other (each needs the pauses its own flows' frames
   are sent under: pause_watch.py); rows of other protocols only counted. The parts stay on the worker; to the driver go the
   timestamps (it replays the local engine's merge on them, plan.Plan, to learn every
   row's frame and the chunk the local engine analyses it in) and small per-file summaries.
2. analyze_partition: a partition's rows in frame order, fed chunk by chunk as the local engine's chunks
   restricted to the partition, to the unchanged Analyzer and FactCollector: a flow's rows in
   a chunk are the same rows as locally, so its per-flow state evolves the same. The one
   decision that reads every flow (whether a chunk may still pair QPs: Analyzer.pairing_open)
   is computed by the driver from the files' flow summaries and handed in per chunk.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from roceview.analysis.pmtu import path_keys
from roceview.packets.batch import PROTO_CODE, PROTO_NAMES, Batch
from roceview.packets.wire import Packed, pack, pack_split, unpack, unpack_column

_ROCE = np.zeros(len(PROTO_NAMES), dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True
_PFC = np.zeros(len(PROTO_NAMES), dtype=bool)
_PFC[[PROTO_CODE["pfc"], PROTO_CODE["pause"]]] = True
# Read by neither the Analyzer nor the FactCollector (nor the read's own summaries): not
# carried (_ts_digits: the time column's decimals, for dissect and the TUI). icrc, ethertype,
# mirror_session, cap_len: 9 of a RoCE row's 48 bytes on the wire
# (every output of `analyze` on the 23 generated scenarios and 25 real captures unchanged with
# them taken from every batch the two are fed; tests/engines/test_dask_unused_columns.py checks it).
UNUSED = ("frame", "interface", "icrc", "ethertype", "mirror_session", "cap_len", "_ts_digits")
# MACs sent as codes into their few distinct values (packets.wire; hashing them cost about
# what sending 14 bytes a row more did); addresses and lengths are narrowed instead.
MACS = ("_src_mac", "_dst_mac")
# Read only from PFC, PAUSE and LLDP frames (Analyzer._pfc_rows, FactCollector._lldp), which
# are not in the RoCE partitions: 30 of their ~190 bytes a row, not carried there.
PFC_ONLY = ("pfc_enable", "pause_quanta", "lldp_pfc_enable") + tuple(f"pfc_quanta{p}" for p in range(8))


def read(path: str, roce_ports: tuple, chunk_packets: int, projection: str | None, partitions: int) -> dict:
    """File `path` decoded and cut: {"parts": the rows of each partition (with `_row`, the row's
    number in the file), "meta": what the driver needs (read by `meta`)}."""
    _keep_freed_memory()
    with _one_decode_thread():
        return _read(path, roce_ports, chunk_packets, projection, partitions)


def _read(path: str, roce_ports: tuple, chunk_packets: int, projection: str | None, partitions: int) -> dict:
    from roceview.capture.readers import read_records
    from roceview.packets.decode import decode_chunk, port_table
    from roceview.packets.merge import FileSpans

    warnings: list[str] = []
    ports, spans, flows = port_table(roce_ports), FileSpans(1), _FlowFirsts()
    pieces = [Packed() for _ in range(partitions + 1)]
    analyzed, stats, row0, order_in = [], _Stats(), 0, _InOrder()
    for chunk in read_records(path, chunk_packets, warnings.append, release_lag=0):
        batch = decode_chunk(chunk, ports, 1, projection)
        spans.observe(0, batch)                  # the local engine's parts while the file is open alone
        for name in UNUSED:
            batch.cols.pop(name, None)
            batch.valid.pop(name, None)
        batch.cols["_row"] = np.arange(row0, row0 + batch.n, dtype=np.uint32)
        proto = batch.cols["_proto"]
        roce = _ROCE[proto]
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        sel = roce & batch.mask(name) & batch.mask("dest_qp") if name in batch.cols else np.zeros(batch.n, bool)
        stats.feed(batch, proto)
        flows.feed(batch, name, np.flatnonzero(sel))
        rows = np.flatnonzero(roce)
        part = partition_of(path_keys(_words(batch, "_src_addr", rows), _words(batch, "_dst_addr", rows)), partitions)
        roce_cols = Batch(batch.n, {k: v for k, v in batch.cols.items() if k not in PFC_ONLY},
                          {k: v for k, v in batch.valid.items() if k not in PFC_ONLY})
        mine = [None if len(r) == batch.n else r for r in _split(rows, part, partitions)]   # None: every row
        for p, packed in enumerate(pack_split(roce_cols, mine, MACS)):
            if packed["lengths"][0]:
                pieces[p].append(packed)
        pfc = np.flatnonzero(_PFC[proto])
        if len(pfc):
            packed = pack([batch.select(pfc)], coded=MACS)
            for p in range(partitions + 1):                  # (the same pack: sent to each partition)
                pieces[p].append(packed)
        order_in.feed(batch.cols["ts_ns"], row0, sel)
        analyzed.append(sel)
        row0 += batch.n
    meta = {"n": row0, "chunks": order_in.chunks, "first_ts": order_in.first, "backwards": order_in.out(),
            "warnings": warnings,
            "stats": stats.out(), "flows": flows.out(),
            "spans": (int(spans.first[0]), int(spans.last[0]), spans.folded() if spans.parts else None)}
    bits = np.packbits(np.concatenate(analyzed)) if analyzed else np.zeros(0, np.uint8)
    return {"parts": pieces, "meta": meta, "analyzed": bits}


def _split(rows: np.ndarray, part: np.ndarray, partitions: int) -> list[np.ndarray]:
    """Each partition's rows, in order: a compare a partition where they are few (a worker
    each: ~0.07 ms a 65,536-row chunk for two, where the stable sort took ~1 ms on keys in
    random order), one stable sort where they are many."""
    if partitions <= 8:
        return [rows[np.flatnonzero(part == p)] for p in range(partitions)]     # (a mask: 5x slower)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(partitions + 1, dtype=np.uint64)).tolist()
    return [rows[order[bounds[p]:bounds[p + 1]]] for p in range(partitions)]


class _InOrder:
    """A file's timestamps summed up for the driver's plan (plan.Plan): per chunk read its
    rows, time range and last row the Analyzer analyses (-1: none), and the rows stamped before
    the row before them (FactCollector._timestamps): the plan of files that follow each other
    in time needs no more."""

    def __init__(self):
        self.chunks: list[tuple[int, int, int, int]] = []
        self.count, self.max_ns, self.rows, self.first, self.last = 0, 0, [], None, None

    def feed(self, ts: np.ndarray, row0: int, analyzed: np.ndarray) -> None:
        if not len(ts):
            return
        at = len(analyzed) - 1 - int(np.argmax(analyzed[::-1])) if analyzed.any() else -1
        self.chunks.append((len(ts), int(ts.min()), int(ts.max()), row0 + at if at >= 0 else -1))
        from roceview.diagnose.facts import steps_back

        back, drop = steps_back(ts, self.last)
        self.first = int(ts[0]) if self.first is None else self.first
        self.last = int(ts[-1])
        if not len(back):
            return
        self.count += len(back)
        self.max_ns = max(self.max_ns, drop)
        if len(self.rows) < 5:
            self.rows += (back[:5] + row0).tolist()

    def out(self) -> tuple[int, int, list[int]]:
        """(rows stamped back, the largest step back in ns, the first five of those rows)."""
        return self.count, self.max_ns, self.rows[:5]


_DECODING = threading.Lock()
_decoding: list = [0, None]             # read tasks decoding in this process, decode.THREADS before them


@contextmanager
def _one_decode_thread():
    """One core per task (decode.THREADS = 1 while a read task decodes): Dask runs one task per
    worker thread and sizes its workers' threads to the cores; a decode split over a second
    thread took a core another task was given (two workers on two cores each read files 2x
    slower, no faster in all than one). Dask's own OMP_NUM_THREADS=1 on its workers says the
    same to native code. Put back once no read task decodes: a cluster of threads
    (LocalCluster(processes=False)) runs its tasks in the caller's process, whose own decodes
    (the local engine, later) would have stayed on one thread."""
    from roceview.packets import decode

    with _DECODING:
        if not _decoding[0]:
            _decoding[1] = decode.THREADS
        _decoding[0] += 1
        decode.THREADS = 1
    try:
        yield
    finally:
        with _DECODING:
            _decoding[0] -= 1
            if not _decoding[0]:
                decode.THREADS = _decoding[1]


def _keep_freed_memory() -> None:
    """Dask starts its workers with MALLOC_TRIM_THRESHOLD_=65536 (distributed.nanny.pre-spawn-
    environ), so glibc hands every freed chunk buffer back to the kernel and faults it in again:
    the tasks ran 2-4x slower than the same code in a plain process. The worker's glibc keeps
    freed blocks instead, as the CLI's own process does (capture.memory.keep_freed_memory)."""
    from roceview.capture.memory import keep_freed_memory

    keep_freed_memory()


def meta(read_result: dict) -> dict:
    return read_result["meta"]


def analyzed_bits(read_result: dict) -> np.ndarray:
    """A bit per row of the file: whether the Analyzer analyses it. Only a plan of files
    overlapping in time needs them (plan.last_analyzed): they stay on the worker."""
    return read_result["analyzed"]


def times(path: str, chunk_packets: int, n: int | None = None) -> np.ndarray:
    """The file's timestamps, row by row, walked again (no decode, ~20 ns a record) where a
    plan of files overlapping in time needs them, rather than kept (8 bytes a row) for all;
    its first `n`, the rows its read decoded: a capture still being written has more now."""
    from roceview.capture.readers import read_records
    from roceview.errors import BadInput

    ts = [chunk.ts for chunk in read_records(path, chunk_packets, lambda message: None, release_lag=0)]
    ts = np.concatenate(ts) if ts else np.zeros(0, np.int64)
    if n is not None and len(ts) < n:
        raise BadInput(f"{path}: changed while it was analysed ({n} records read, {len(ts)} now)")
    return ts if n is None else ts[:n]


def part(read_result: dict, p: int) -> list[dict]:
    """Partition p's rows of the file, in pieces (one per chunk read), each packed for the trip
    to its partition's worker (packets.wire: validity as bits, columns without a value as
    nothing, MACs as codes, addresses and lengths narrowed: ~55 bytes a RoCE row, was 100)."""
    return read_result["parts"][p]


def arrived(pieces: list[dict]) -> list[dict]:
    """A file's part, run on its partition's worker: the part comes over as soon as the file
    is read, while the other files are read, not all at once when the analysis starts."""
    return pieces


def spans(parts: list[Batch], rows, n: int):
    """A file's merge.FileSpans (as file 0) observed in parts of `rows` rows, or of the lengths
    in the list `rows` (the local engine reads a file opened beside others in smaller chunks, as
    plan.Plan.span_rows), from its RoCE rows: only they carry PSNs."""
    from roceview.packets.merge import FileSpans

    from roceview.engines.dask.partition_run import joined

    batch = joined([b for p in parts for packed in p if "pfc_enable" not in packed["cols"] for b in unpack(packed)])
    batch = batch.select(np.argsort(batch.cols["_row"], kind="stable")) if batch.n else batch
    cuts = np.cumsum([0] + list(rows)) if isinstance(rows, (list, tuple)) else np.arange(0, n + rows, rows)
    at = np.searchsorted(batch.cols["_row"], cuts) if batch.n else []
    fs = FileSpans(1)
    for lo, hi in zip(at[:-1], at[1:]):
        fs.observe(0, batch.select(slice(int(lo), int(hi))))
    return int(fs.first[0]), int(fs.last[0]), fs.folded() if fs.parts else None


def _words(batch: Batch, name: str, rows: np.ndarray) -> np.ndarray:
    """An address column as (n, 2) uint64 words at `rows` (a view when they are every row)."""
    words = np.ascontiguousarray(batch.cols[name], dtype=np.uint8).view("<u8").reshape(batch.n, 2)
    return words if len(rows) == batch.n else words[rows]


def partition_of(keys: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of each path key: its top bits after one more multiply (the keys' low bits
    are poorly mixed for IPv4 addresses, whose first word is zero)."""
    with np.errstate(over="ignore"):
        mixed = (keys * np.uint64(0xD6E8FEB86659FD93)) >> np.uint64(32)
    return mixed % np.uint64(partitions)


class _Stats:
    """Counted over every row, as the Analyzer and FactCollector count them (protocols, time
    span, truncated frames, LLDP PFC configuration, priorities.csv's counters); rows by their
    number in the file."""

    def __init__(self):
        from roceview.analysis.priorities import PriorityCounts

        self.priorities = PriorityCounts()
        self.protocols = np.zeros(len(PROTO_NAMES), np.int64)
        self.first_ts = self.last_ts = None
        self.truncated, self.truncated_first, self.lldp = 0, [], []

    def feed(self, batch: Batch, proto: np.ndarray) -> None:
        if not batch.n:
            return
        self.protocols += np.bincount(proto, minlength=len(PROTO_NAMES))[:len(PROTO_NAMES)]
        self.priorities.feed(batch)
        ts = batch.cols["ts_ns"]
        lo, hi = int(ts.min()), int(ts.max())
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)
        if "truncated" in batch.cols:
            cut = batch.cols["truncated"]
            if "truncated" in batch.valid or cut.dtype != bool:
                cut = cut & batch.mask("truncated")
            self.truncated += int(np.count_nonzero(cut))
            if len(self.truncated_first) < 5:
                self.truncated_first += batch.cols["_row"][np.flatnonzero(cut)[:5]].tolist()
        if "lldp_pfc_enable" in batch.cols:
            r = np.flatnonzero(batch.mask("lldp_pfc_enable") & (proto == PROTO_CODE["lldp"]))
            self.lldp += zip(batch.cols["_row"][r].tolist(), batch.cols["_src_mac"][r].tolist(),
                             batch.cols["lldp_pfc_enable"][r].tolist())

    def out(self) -> dict:
        return {"protocols": self.protocols, "first_ts": self.first_ts, "last_ts": self.last_ts,
                "truncated": self.truncated, "truncated_first": self.truncated_first[:5], "lldp": self.lldp,
                "priorities": self.priorities.state()}


class _FlowFirsts:
    """Per flow of the file (the rows the Analyzer analyses: RoCE with an opcode and a dest QP):
    its key, its first row and its first row in each PSN space (request, response, none). The
    driver finds from them, once it knows the frames and chunks, chunk_counts.transport's
    first_idx: a new flow's first row in (PSN space, frame) order within its first chunk."""

    def __init__(self):
        from roceview.analysis.flows import new_registry

        self.registry = new_registry()
        self.first = np.zeros((4, 0), np.int64)
        self.has = np.zeros(0, bool)                 # (flow, space) pairs with their first row found

    def feed(self, batch: Batch, name: str, rows: np.ndarray) -> None:
        from roceview.analysis import opcode_classes as op

        if not len(rows):
            return
        src, dst = _words(batch, "_src_addr", rows), _words(batch, "_dst_addr", rows)
        fid, before = self.registry.lookup(src, dst, batch.cols["dest_qp"][rows].astype(np.uint32))
        n = self.registry.n
        if n > self.first.shape[1]:
            grown = np.full((4, n), -1, np.int64)
            grown[:, :self.first.shape[1]] = self.first
            self.first, self.has = grown, np.r_[self.has, np.zeros(3 * n - len(self.has), bool)]
        at = batch.cols["_row"][rows]
        if n > before:                               # new flows: their first rows
            new = np.flatnonzero(fid >= before)
            flows, first = np.unique(fid[new], return_index=True)
            self.first[0][flows] = at[new[first]]
        flags = op.FLAGS.take(batch.cols[name][rows].astype(np.uint8))
        in_psn = (flags & (op.F_REQUEST_SPACE | op.F_RESPONSE_SPACE)) != 0
        in_psn &= batch.mask("psn")[rows] if "psn" in batch.cols else False
        key = fid * 3 + np.where(in_psn, ((flags & op.F_RESPONSE_SPACE) != 0).astype(np.int64), 2)
        todo = np.flatnonzero(~self.has.take(key))   # (flow, space) pairs not seen yet: few after the start
        if len(todo):
            pairs, first = np.unique(key[todo], return_index=True)
            self.has[pairs] = True
            self.first[1 + pairs % 3, pairs // 3] = at[todo[first]]

    def out(self) -> dict:
        reg = self.registry
        return {"src": np.asarray(reg.src).copy(), "dst": np.asarray(reg.dst).copy(),
                "qp": np.asarray(reg.qp).copy(), "first": self.first[:, :reg.n]}


def analyze_partition(parts: list[Packed], gidx: list, chunk_starts: np.ndarray, gates: np.ndarray, pmtu,
            link_speed: float, bucket_ms: float, facts: bool, pfc_owner: bool = True, priority_table=None) -> dict:
    """A partition's rows (its part of every file) analyzed in the local engine's chunks; gidx:
    per file the frame index (from 0) of each row, or of its first when they follow each other;
    pfc_owner: the partition that logs and counts the PFC frames (the others get copies).
    The pieces stay packed until their chunk is fed (partition_run.chunks): unpacked, a
    partition's rows took twice the memory they take packed. priority_table: the frames'
    priorities (the Analyzer's; None: the default)."""
    from roceview.engines.dask.partition_run import run_partition

    _keep_freed_memory()
    return run_partition(_pieces(parts, gidx), chunk_starts, gates, pmtu, link_speed, bucket_ms, facts, pfc_owner,
                         priority_table)


def step(run, file_parts: Packed, offset: int, starts: np.ndarray, gates: np.ndarray, end: int | None,
         pmtu, link_speed: float, bucket_ms: float, facts: bool, pfc_owner: bool = True, priority_table=None):
    """The partition's run (partition_run.PartitionRun; None: a new one) fed its part of
    the next file (whose first row is frame index `offset`) and the chunks closed with it
    (plan_stream.StreamPlan.add); the same run is returned, kept on this worker for the next."""
    from roceview.engines.dask.partition_run import PartitionRun

    _keep_freed_memory()
    run = PartitionRun(pmtu, link_speed, bucket_ms, facts, pfc_owner, priority_table) if run is None else run
    run.add(_pieces([file_parts], [offset]), starts, gates, end)
    return run


def finished(run, starts: np.ndarray, gates: np.ndarray) -> dict:
    """The partition's result (as analyze_partition's), once the last chunks are closed."""
    run.add([], starts, gates, None)
    return run.result()


def _pieces(parts: list[Packed], gidx: list) -> list[tuple[dict, np.ndarray]]:
    """Each piece of the files' parts with its rows' frame indexes."""
    pieces = []
    for file_parts, g in zip(parts, gidx):
        for packed in file_parts:
            rows = unpack_column(packed, "_row").astype(np.int64)
            pieces.append((packed, rows + g if np.isscalar(g) else np.asarray(g)[rows]))
    return pieces


try:                                                     # the workers' memory accounting
    from dask.sizeof import sizeof as _sizeof

    _sizeof.register(Packed)(lambda part: part.nbytes() + 1024 * len(part))    # + the dicts
except ImportError:                                      # pragma: no cover - dask is an extra
    pass
