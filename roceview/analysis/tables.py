"""Result tables as plain numpy columns, with the CSV text forms and lazy pandas conversion.

The CLI writes CSV/JSON straight from these columns (pandas is imported only when a DataFrame is
asked for: importing it costs ~0.4 s, more than analyzing a million packets). Column kinds:
  ts     int64 ns since the Unix epoch -> text `seconds.nnnnnnnnn` (exact, from integers);
         pandas: datetime64[ns, UTC]
  nts    the same, NONE_TS = empty (pandas: NaT)
  bool   numpy bool -> `true` / `false` (JSON true / false)
  qp     int64, -1 = empty -> text `0x%06x`; pandas: UInt32 (nullable)
  int    int64 (-1 = empty only where `nullable`)
  float  float64, NaN = empty -> fixed decimals
  str    Python strings (a list), or a `Coded` column: codes into its distinct strings
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from roceview.packets.names import qp_text as format_qp  # noqa: F401  (the tables' name for it)

FLOW_COLUMNS = ("flow", "src_ip", "dst_ip", "dest_qp", "peer_qp", "transport", "first_ts", "last_ts",
                "packets", "bytes", "data_packets", "payload_bytes", "acks", "naks_seq", "naks_rnr",
                "naks_other", "gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets",
                "retransmitted_bytes", "ecn_not_ect", "ecn_ce", "cnp_packets", "rtt_p50_us",
                "rtt_p99_us", "goodput_gbps", "connection",
                # DCQCN reaction per sender (cc_match.FLOW_CC_COLUMNS), appended: the columns above keep their place
                "cnps_received", "cnps_judged", "cnps_ignored", "cnps_excess", "cnp_reaction_us_p50",
                "rate_cut_pct_p50", "recovery_us_p50", "ce_without_cnp")
PFC_COLUMNS = ("src_mac", "priority", "pause_frames", "resume_frames", "pause_quanta", "paused_us",
               "longest_pause_us", "first_ts", "last_ts")
FINDINGS_COLUMNS = ("severity", "kind", "summary", "flows", "start_ts", "end_ts", "evidence", "advice", "frames",
                    "frame_count", "explains")
EVENT_COLUMNS = ("ts", "flow", "kind", "psn", "detail", "frame", "related_frame", "psn_count",
                 "first_missing_psn", "aeth_syndrome", "rnr_timer", "pfc_priority", "pfc_quanta",
                 "resend_delay_ns", "copy_delay_ns", "early_ns", "sent_beyond", "pause_delay_ns")
TIMELINE_COLUMNS = ("bucket_start", "flow", "bytes", "gbps", "ecn_ce", "cnp_packets",
                    "retransmitted_packets")
# one row per RDMA message (ops.py), the per-QP statistics of them (ops_stats.py)
OPS_COLUMNS = ("flow", "src_ip", "dst_ip", "dest_qp", "op", "first_psn", "packets", "bytes", "first_frame",
               "last_frame", "start_ts", "end_ts", "completion_frame", "completion_ts", "latency_us",
               "retransmitted", "outstanding")
OP_STATS_COLUMNS = ("flow", "op", "operations", "completed", "retransmitted_ops", "bytes", "latency_p50_us",
                    "latency_p99_us", "latency_max_us", "size_le_64", "size_le_256", "size_le_1k", "size_le_4k",
                    "size_le_16k", "size_le_64k", "size_le_256k", "size_le_1m", "size_gt_1m")
READ_DEPTH_COLUMNS = ("flow", "depth", "time_ns", "reads")
# per (pausing MAC, priority, flow): the flow's frames to that MAC on that priority (pause_watch.py)
PAUSED_FLOW_COLUMNS = ("src_mac", "priority", "flow", "packets", "bytes", "first_ts", "last_ts", "paused_packets",
                       "paused_bytes")
NONE_TS = -(1 << 63)        # an `nts` cell without a value

KINDS = {
    "first_ts": "ts", "last_ts": "ts", "ts": "ts", "bucket_start": "ts", "start_ts": "ts", "end_ts": "ts",
    "dest_qp": "qp", "peer_qp": "qp",
    "rtt_p50_us": "float", "rtt_p99_us": "float", "goodput_gbps": "float", "paused_us": "float",
    "longest_pause_us": "float", "gbps": "float",
    "flow": "str", "connection": "str", "src_ip": "str", "dst_ip": "str", "transport": "str", "src_mac": "str",
    "priority": "str", "severity": "str", "kind": "str", "summary": "str", "flows": "str",
    "evidence": "str", "advice": "str", "detail": "str", "frames": "str", "explains": "str",
    "psn": "nint", "related_frame": "nint", "psn_count": "nint", "first_missing_psn": "nint",
    "aeth_syndrome": "nint", "rnr_timer": "nint", "pfc_quanta": "nint", "resend_delay_ns": "nint", "copy_delay_ns": "nint", "early_ns": "nint", "sent_beyond": "nint", "pause_delay_ns": "nint",
    "pfc_priority": "str",
    "op": "str", "completion_ts": "nts", "completion_frame": "nint", "latency_us": "float",
    "retransmitted": "bool", "latency_p50_us": "float", "latency_p99_us": "float", "latency_max_us": "float",
    "dst_mac": "str", "pcp": "nint", "dscp": "nint", "roce_share": "float", "ce_share": "float",   # priorities.csv
    # cc.csv and qps.csv's DCQCN columns (cc_match.py)
    "cnp_ts": "ts", "cnp_frame": "int", "rate_before_gbps": "float", "rate_after_gbps": "float", "cut_pct": "float",
    "reaction_us": "float", "reaction_us_min": "float", "reaction_us_max": "float", "recovery_us": "float", "spacing_us": "float", "ignored": "str",
    "cnps_received": "int", "cnps_judged": "int", "cnps_ignored": "int", "cnps_excess": "int", "ce_without_cnp": "int",
    "cnp_reaction_us_p50": "float", "rate_cut_pct_p50": "float", "recovery_us_p50": "float",
}
DECIMALS = {"rtt_p50_us": 3, "rtt_p99_us": 3, "goodput_gbps": 6, "paused_us": 6,
            "longest_pause_us": 6, "gbps": 6, "latency_us": 3, "latency_p50_us": 3, "latency_p99_us": 3,
            "latency_max_us": 3}


def format_ts(ns) -> str:
    """Epoch seconds with exactly 9 decimals from integer nanoseconds (never via float)."""
    ns = int(ns)
    sign = "-" if ns < 0 else ""
    sec, frac = divmod(abs(ns), 1_000_000_000)
    return f"{sign}{sec}.{frac:09d}"


def slow_text(values, kind: str, decimals: int = 6) -> list[str]:
    """The text forms, one Python call per cell: their definition. (The CSV/JSON writers build
    the same text vectorised: roceview/render/cells.py; tests check both agree.)"""
    if kind == "ts":
        return [format_ts(x) for x in np.asarray(values).tolist()]
    if kind == "nts":
        return ["" if x == NONE_TS else format_ts(x) for x in np.asarray(values).tolist()]
    if kind == "bool":
        return ["true" if x else "false" for x in np.asarray(values).tolist()]
    if kind == "qp":
        return [format_qp(x) for x in np.asarray(values).tolist()]
    if kind == "float":
        return ["" if x != x else f"{x:.{decimals}f}" for x in np.asarray(values, dtype=np.float64).tolist()]
    if kind == "nint":
        return ["" if x < 0 else str(x) for x in np.asarray(values).tolist()]
    if kind == "str":
        return ["" if x is None else str(x) for x in values]
    return [str(x) for x in np.asarray(values).tolist()]


class Coded(Sequence):
    """A str column kept as int64 codes into a list of strings: the timeline names each of a
    few hundred flows in tens of thousands of rows. Reads as a sequence of str; the CSV, JSON
    and incast code use the codes without building the strings (render/cells.distinct_strings)."""

    __slots__ = ("codes", "names")

    def __init__(self, codes: np.ndarray, names: list):
        self.codes, self.names = np.ascontiguousarray(codes, dtype=np.int64), list(names)
        if len(self.codes) and not (0 <= int(self.codes.min()) and int(self.codes.max()) < len(self.names)):
            raise ValueError("Coded: codes outside the names")

    @classmethod
    def of(cls, values) -> "Coded":
        """A column as Coded: itself, or a sequence of hashable values coded in order of their
        first row (TypeError for an unhashable value)."""
        if isinstance(values, Coded):
            return values
        distinct = list(dict.fromkeys(values))
        index = {v: i for i, v in enumerate(distinct)}
        return cls(np.fromiter(map(index.__getitem__, values), np.int64, len(values)), distinct)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Coded(self.codes[i], self.names)
        return self.names[self.codes[i]]

    def __iter__(self):
        return map(self.names.__getitem__, self.codes.tolist())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Coded({list(self)!r})"

    def take(self, rows) -> "Coded":
        return Coded(self.codes[rows], self.names)


@dataclass
class Table:
    """Columns of equal length in a fixed order (`columns`)."""
    columns: tuple[str, ...]
    data: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.data[self.columns[0]]) if self.columns and self.columns[0] in self.data else 0

    @classmethod
    def empty(cls, columns) -> "Table":
        data = {c: (np.zeros(0, dtype=np.float64 if KINDS.get(c) == "float" else bool if KINDS.get(c) == "bool"
                             else np.int64)
                    if KINDS.get(c, "int") not in ("str",) else []) for c in columns}
        return cls(tuple(columns), data)

    def take(self, rows: np.ndarray) -> "Table":
        out = {}
        for c in self.columns:
            v = self.data[c]
            out[c] = v[rows] if isinstance(v, np.ndarray) else v.take(rows) if isinstance(v, Coded) \
                else [v[i] for i in rows]
        return Table(self.columns, out)

    def text_column(self, name: str) -> list[str]:
        """The CSV text of one column (unquoted)."""
        return slow_text(self.data[name], KINDS.get(name, "int"), DECIMALS.get(name, 6))

    def text_rows(self) -> list[list[str]]:
        cols = [self.text_column(c) for c in self.columns]
        return [list(r) for r in zip(*cols)] if cols else []

    def records(self) -> list[dict]:
        """JSON-ready rows: the same text forms as the CSV for timestamps and QPs, numbers as
        numbers, empty values as null."""
        out_cols = []
        for c in self.columns:
            kind = KINDS.get(c, "int")
            if kind in ("ts", "qp", "nts"):
                out_cols.append([x or None for x in self.text_column(c)])
            elif kind == "bool":
                out_cols.append(np.asarray(self.data[c], dtype=bool).tolist())
            elif kind == "float":
                out_cols.append([None if x != x else x for x in np.asarray(self.data[c], dtype=float).tolist()])
            elif kind == "nint":
                out_cols.append([None if x < 0 else x for x in np.asarray(self.data[c]).tolist()])
            elif kind == "str":
                out_cols.append(list(self.data[c]))
            else:
                out_cols.append(np.asarray(self.data[c]).tolist())
        return [dict(zip(self.columns, r)) for r in zip(*out_cols)]

    def to_pandas(self):
        import pandas as pd

        out = {}
        for c in self.columns:
            v = self.data[c]
            kind = KINDS.get(c, "int")
            if kind == "ts":
                out[c] = pd.to_datetime(np.asarray(v, dtype=np.int64), unit="ns", utc=True)
            elif kind == "nts":
                arr = np.asarray(v, dtype=np.int64)
                out[c] = pd.to_datetime(np.where(arr == NONE_TS, np.iinfo(np.int64).min, arr), unit="ns", utc=True)
            elif kind == "bool":
                out[c] = np.asarray(v, dtype=bool)
            elif kind in ("qp", "nint"):
                arr = np.asarray(v, dtype=np.int64)
                out[c] = pd.array(np.where(arr < 0, 0, arr), dtype="UInt32" if kind == "qp" else "Int64")
                out[c][arr < 0] = pd.NA
            elif kind == "str":
                out[c] = pd.array(list(v), dtype="string")
            else:
                out[c] = np.asarray(v)
        return pd.DataFrame(out, columns=list(self.columns))
