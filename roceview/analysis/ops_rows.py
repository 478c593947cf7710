"""Final operations: their ops.csv values, the statistics, and the row store under its budget.

The table lists the first MAX_ROWS operations of the capture (by first frame); every operation
counts in the per-QP statistics (ops_stats.py) and in the summary's `operations`. The kept rows
are those whose creation number (operations numbered in order of first frame, capture-wide) is
below the budget: the same rows whatever the chunking, and a partition of the Dask engine keeps
every row of the capture's first MAX_ROWS that is its own.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_set import OpSet
from roceview.analysis.segments import PSN_MOD
from roceview.analysis.tables import NONE_TS, OPS_COLUMNS, Coded, Table

MAX_ROWS = 25_000        # ops.csv rows kept (ops past it are counted in the summary: ops_not_listed)
_ROW_FIELDS = ("number", "flow", "kind", "first_psn", "packets", "bytes", "first_idx", "last_idx", "first_ts", "last_ts",
               "compl_idx", "compl_ts", "retrans", "outstanding")


def values(ops: OpSet, fallback_mtu: np.ndarray | None = None) -> dict:
    """The row values of operations (final or, for a snapshot, as they stand)."""
    c = ops.cols
    kind, start = c["kind"].astype(np.int64), c["start"]
    top = np.where(c["ended"], c["end"], np.maximum(c["hi_u"], start))
    n_psn = np.maximum(top - start + 1, 1)
    mtu = c["mtu_pay"]
    if fallback_mtu is not None:
        mtu = np.where(mtu > 0, mtu, fallback_mtu)
    last = np.where(c["last_pay"] >= 0, c["last_pay"], mtu)
    nbytes = np.where(n_psn > 1, (n_psn - 1) * mtu + last, np.maximum(last, 0))
    written = (kind == oc.OP_CODE["WRITE"]) | (kind == oc.OP_CODE["WRITE_IMM"])
    nbytes = np.where(written & (c["dmalen"] >= 0), c["dmalen"], nbytes)
    nbytes = np.where(kind == oc.OP_CODE["READ"], np.maximum(c["dmalen"], 0), nbytes)
    fixed = np.isin(kind, [oc.OP_CODE[k] for k in ("CMP_SWAP", "FETCH_ADD", "ATOMIC_WRITE")])
    nbytes = np.where(fixed, oc.ATOMIC_BYTES, np.where(kind == oc.OP_CODE["FLUSH"], 0, nbytes))
    done = c["compl_idx"] >= 0
    # a READ ends with its last response, the one that completes it
    read = kind == oc.OP_CODE["READ"]
    last_idx = np.where(read & done, c["compl_idx"], c["last_idx"])
    last_ts = np.where(read & done, c["compl_ts"], c["last_ts"])
    return {"number": c["number"], "flow": c["sid"] >> 1, "kind": kind, "first_psn": start & (PSN_MOD - 1), "packets": c["packets"],
            "bytes": nbytes, "first_idx": c["first_idx"], "last_idx": last_idx, "first_ts": c["first_ts"],
            "last_ts": last_ts, "compl_idx": np.where(done, c["compl_idx"], -1),
            "compl_ts": np.where(done, c["compl_ts"], NONE_TS), "retrans": c["retrans"].copy(),
            "outstanding": c["outstanding"]}


class RowStore:
    """The kept rows, as numpy parts appended when operations become final."""

    def __init__(self, max_rows: int = MAX_ROWS):
        self.max_rows = max_rows
        self.parts: list[dict] = []

    def add(self, v: dict) -> None:
        keep = v["number"] < self.max_rows
        if keep.any():
            self.parts.append({k: v[k][keep] for k in _ROW_FIELDS})

    def forget(self, flows: np.ndarray) -> None:
        for p in self.parts:
            forget_part(p, flows)

    def rows(self, extra: list | None = None) -> dict:
        parts = self.parts + [{k: p[k] for k in _ROW_FIELDS} for p in extra or () if len(p["flow"])]
        if not parts:
            return {k: np.zeros(0, dtype=bool if k == "retrans" else np.int64) for k in _ROW_FIELDS}
        out = {k: np.concatenate([p[k] for p in parts]) for k in _ROW_FIELDS}
        order = np.argsort(out["first_idx"], kind="stable")
        return {k: v[order] for k, v in out.items()}


def forget_part(p: dict, flows: np.ndarray) -> None:
    """A withdrawn pairing: the completions of these flows' operations go."""
    gone = np.isin(p["flow"], flows)
    p["compl_idx"][gone], p["compl_ts"][gone] = -1, NONE_TS


def table(rows: dict, names: list[str], src: list[str], dst: list[str], qps: np.ndarray) -> Table:
    flow = rows["flow"]
    done = rows["compl_idx"] >= 0
    latency = np.where(done, rows["compl_ts"] - rows["first_ts"], 0) / 1000.0
    data = {"flow": Coded(flow, names), "src_ip": Coded(flow, src), "dst_ip": Coded(flow, dst),
            "dest_qp": qps.take(flow).astype(np.int64) if len(flow) else np.zeros(0, np.int64),
            "op": Coded(rows["kind"], oc.OP_NAMES), "first_psn": rows["first_psn"],
            "packets": rows["packets"], "bytes": rows["bytes"], "first_frame": rows["first_idx"] + 1,
            "last_frame": rows["last_idx"] + 1, "start_ts": rows["first_ts"], "end_ts": rows["last_ts"],
            "completion_frame": np.where(done, rows["compl_idx"] + 1, -1), "completion_ts": rows["compl_ts"],
            "latency_us": np.where(done, latency, np.nan), "retransmitted": rows["retrans"],
            "outstanding": rows["outstanding"]}
    return Table(OPS_COLUMNS, data)

