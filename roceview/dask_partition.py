"""`analyze --engine dask`, partitioned: the tasks the workers run (dask_run.py drives them).

1. decode: a file's packets (the analysis projection), kept on the worker; only its timestamps
   travel to the driver, which replays the local engine's merge on them (dask_run.Plan) to
   learn every row's frame number and the chunk the local engine analyses it in.
2. split: the file's rows cut into partitions by the unordered pair of endpoints (RoCE v1 GIDs
   or v2 addresses, as path MTUs are kept: pmtu._path_keys), so both directions of a
   connection, their QP pairing, CM handshake and path MTU stay in one partition; PFC and
   PAUSE frames in one partition of their own. Rows that only count (other protocols) are
   summed here. Each row keeps its frame (`_gidx`) and its chunk of the whole capture (`_chunk`).
3. analyse: a partition's rows in frame order, fed chunk by chunk as the local engine's chunks
   restricted to the partition, to the unchanged Analyzer and FactCollector: a flow's rows in
   a chunk are the same rows as locally, so its per-flow state evolves the same. The one
   decision that reads every flow (whether a chunk may still pair QPs: Analyzer.pairing_open)
   is computed by the driver from the split's flow summaries and handed in per chunk.
"""
from __future__ import annotations

import numpy as np

from roceview.batch import PROTO_CODE, PROTO_NAMES, Batch

_ROCE = np.zeros(len(PROTO_NAMES), dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True
_PFC = np.zeros(len(PROTO_NAMES), dtype=bool)
_PFC[[PROTO_CODE["pfc"], PROTO_CODE["pause"]]] = True
_IDX_BITS = 40                        # (PSN space, frame) packed in one int64: frames < 2^40


def decode(path: str, roce_ports: tuple, chunk_packets: int, projection: str | None) -> dict:
    """A whole file decoded (one Batch) and the warnings its reading gave (dask_engine.decode_file
    without the packing for a trip: these rows stay on the worker)."""
    from roceview.capture.readers import read_records
    from roceview.decode import decode_chunk, port_table

    warnings: list[str] = []
    ports = port_table(roce_ports)
    chunks = [decode_chunk(chunk, ports, 1, projection)
              for chunk in read_records(path, chunk_packets, warnings.append, release_lag=0)]
    return {"batch": Batch.concat(chunks), "warnings": warnings}


def timestamps(decoded: dict) -> dict:
    """What the driver needs to replay the merge: the timestamps, and the warnings."""
    return {"ts": decoded["batch"].cols.get("ts_ns", np.zeros(0, np.int64)), "warnings": decoded["warnings"]}


def _words(batch: Batch, name: str) -> np.ndarray:
    return np.ascontiguousarray(batch.cols[name], dtype=np.uint8).view("<u8").reshape(batch.n, 2)


def split(decoded: dict, k: int, gidx, chunk_starts: np.ndarray, span_rows: int | None, n_files: int,
          partitions: int) -> dict:
    """File k's rows cut into `partitions` RoCE partitions and one PFC partition, with what the
    driver sums from every row. gidx: the frame index (from 0) of each row, or of the first when
    the file's rows follow each other in the merged capture."""
    from roceview.analysis.pmtu import _path_keys

    batch = Batch(decoded["batch"].n, dict(decoded["batch"].cols), decoded["batch"].valid)
    n = batch.n
    g = np.arange(gidx, gidx + n, dtype=np.int64) if np.isscalar(gidx) else np.asarray(gidx, np.int64)
    batch.cols["_gidx"] = g
    batch.cols["frame"] = g + 1
    chunk = np.searchsorted(chunk_starts, g, side="right") - 1
    proto = batch.cols["_proto"]
    roce = _ROCE[proto]
    out = {"stats": _stats(batch, proto), "spans": _spans(batch, k, span_rows, n_files),
           "flows": _flows(batch, roce, chunk)}
    del batch.cols["frame"]                  # the partition numbers its rows from _gidx
    rows = np.flatnonzero(roce)
    part = partition_of(_path_keys(_words(batch, "_src_addr")[rows], _words(batch, "_dst_addr")[rows]), partitions)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(partitions + 1, dtype=np.uint64))
    parts = [batch.select(rows[order[bounds[p]:bounds[p + 1]]]) for p in range(partitions)]
    parts.append(batch.select(np.flatnonzero(_PFC[proto])))
    out["parts"] = parts
    return out


def partition_of(path_keys: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of each path key: its top bits after one more multiply (the keys' low bits
    are poorly mixed for IPv4 addresses, whose first word is zero)."""
    with np.errstate(over="ignore"):
        mixed = (path_keys * np.uint64(0xD6E8FEB86659FD93)) >> np.uint64(32)
    return mixed % np.uint64(partitions)


def _stats(batch: Batch, proto: np.ndarray) -> dict:
    """Counted over every row, as the Analyzer and FactCollector count them (protocols, time
    span, truncated frames, LLDP PFC configuration)."""
    ts = batch.cols["ts_ns"]
    stats = {"protocols": np.bincount(proto, minlength=len(PROTO_NAMES))[:len(PROTO_NAMES)],
             "first_ts": int(ts.min()) if batch.n else None, "last_ts": int(ts.max()) if batch.n else None,
             "truncated": 0, "truncated_first": [], "lldp": []}
    if "truncated" in batch.cols and batch.n:
        cut = batch.cols["truncated"]
        if "truncated" in batch.valid or cut.dtype != bool:
            cut = cut & batch.mask("truncated")
        stats["truncated"] = int(np.count_nonzero(cut))
        stats["truncated_first"] = batch.cols["frame"][np.flatnonzero(cut)[:5]].tolist()
    if "lldp_pfc_enable" in batch.cols and batch.n:
        r = np.flatnonzero(batch.mask("lldp_pfc_enable") & (proto == PROTO_CODE["lldp"]))
        stats["lldp"] = list(zip(batch.cols["frame"][r].tolist(), batch.cols["_src_mac"][r].tolist(),
                                 batch.cols["lldp_pfc_enable"][r].tolist()))
    return stats


def _spans(batch: Batch, k: int, rows: int | None, n_files: int):
    """merge.FileSpans of file k observed in the parts the local engine cuts it into."""
    if rows is None:
        return None
    from roceview.merge import FileSpans

    spans = FileSpans(n_files)
    for lo in range(0, batch.n, rows):
        spans.observe(k, batch.select(slice(lo, lo + rows)))
    return spans.first[k], spans.last[k], spans._folded() if spans.parts else None


def _flows(batch: Batch, roce: np.ndarray, chunk: np.ndarray) -> dict:
    """Per flow of the file (the rows the Analyzer analyses: RoCE with an opcode and a dest QP):
    its key, its first frame, and in the first chunk it is in, its first row in (PSN space,
    frame) order (chunk_counts.transport's first_idx); per chunk its last analysed frame."""
    from roceview.analysis import opcodes as op
    from roceview.analysis.flows import new_registry

    name = "opcode" if "opcode" in batch.cols else "_opcode"
    sel = roce & batch.mask(name) & batch.mask("dest_qp") if name in batch.cols else np.zeros(batch.n, bool)
    rows = np.flatnonzero(sel)
    src, dst = _words(batch, "_src_addr")[rows], _words(batch, "_dst_addr")[rows]
    qp = batch.cols["dest_qp"][rows].astype(np.uint32) if len(rows) else np.zeros(0, np.uint32)
    reg = new_registry()
    fid, _ = reg.lookup(src, dst, qp) if len(rows) else (np.zeros(0, np.int64), 0)
    g, chunk = batch.cols["_gidx"][rows], chunk[rows]
    flags = op.FLAGS.take(batch.cols[name][rows].astype(np.uint8)) if len(rows) else np.zeros(0, np.int64)
    in_psn = (flags & (op.F_REQUEST_SPACE | op.F_RESPONSE_SPACE)) != 0
    if "psn" in batch.cols:
        in_psn &= batch.mask("psn")[rows]
    else:
        in_psn[:] = False
    space = np.where(in_psn, ((flags & op.F_RESPONSE_SPACE) != 0).astype(np.int64), 2)
    n_flows = reg.n
    first = np.flatnonzero(fid > np.maximum.accumulate(np.r_[-1, fid[:-1]]))   # ids by first appearance
    first_chunk = chunk[first]
    in_first = np.flatnonzero(chunk == first_chunk[fid])
    key = np.full(n_flows, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(key, fid[in_first], (space[in_first] << _IDX_BITS) | g[in_first])
    last = np.flatnonzero(np.r_[chunk[1:] != chunk[:-1], True]) if len(rows) else np.zeros(0, np.int64)
    return {"src": np.asarray(reg.src).copy(), "dst": np.asarray(reg.dst).copy(), "qp": np.asarray(reg.qp).copy(),
            "first_frame": g[first], "first_chunk": first_chunk, "first_key": key,
            "chunk_last": (chunk[last], g[last])}


def analyse(parts: list[Batch], chunk_starts: np.ndarray, gates: np.ndarray, pmtu, link_speed: float,
            bucket_ms: float, facts: bool) -> dict:
    """A partition's rows (its part of every file) analysed in the local engine's chunks."""
    from roceview.dask_partition_run import run_partition

    return run_partition(parts, chunk_starts, gates, pmtu, link_speed, bucket_ms, facts)
