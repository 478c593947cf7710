"""What every rule reads: the result tables as plain Python/numpy, indexed by flow, plus facts.

Flow ids are the analysis's `SRC>DST:0xQPN`; the reverse flow of a QP pair is found from
`peer_qp`. Per-flow facts (priority, ECN, MACs, PSN ranges) are folded from the FactCollector's
classes by rebuilding the same flow id.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import repeat
from math import log2

import numpy as np

from dissectors import cm
from roceview.packets.names import flow_name, format_address, mac_text  # noqa: F401  (mac_text: this module's own name too)
from roceview.diagnose.flow_arrays import FlowArrays, run_starts
from roceview.diagnose.flow_facts import FlowFactsTable
from roceview.diagnose.host_nics import host_macs
from roceview.units import duration

PSN_MOD = 1 << 24
EVENT_STRUCTURED = ("frame", "related_frame", "psn_count", "first_missing_psn", "aeth_syndrome", "rnr_timer",
                    "pfc_priority", "pfc_quanta", "resend_delay_ns", "copy_delay_ns", "early_ns", "sent_beyond",
                    "pause_delay_ns")


@dataclass
class Events:
    ts: np.ndarray
    psn: np.ndarray
    detail: list                   # words, for evidence text only: rules read `cols`
    cols: dict = field(default_factory=dict)    # structured events columns (psn_count, ...), same rows

    def col(self, name: str) -> np.ndarray:
        """A structured events column (EVENT_STRUCTURED), -1 (or "") where the kind has none."""
        return self.cols.get(name, np.zeros(0, np.int64))

    def select(self, m: np.ndarray) -> "Events":
        return Events(self.ts[m], self.psn[m], [d for d, k in zip(self.detail, m) if k],
                      {k: np.asarray(v)[m] for k, v in self.cols.items()})


class Context:
    def __init__(self, result, config, facts=None):
        self.config = config
        self.summary = result.summary
        self.facts = facts
        self._flows(result.flows_table)
        self._events(result.events_table)
        self.pfc = _rows(result.pfc_table)
        self.paused_flows = getattr(result, "paused_flows_table", None)  # hol_victim's flows (a Table or None)
        self.timeline = result.timeline_table.data
        self.start_ns, self.end_ns = self._capture_span()
        self.flow_facts = FlowFactsTable(facts.classes if facts is not None else [], _flow_names())
        self.negotiated = negotiated(getattr(result, "connections_table", None))

    # ---- tables ------------------------------------------------------------------------------
    def _flows(self, table) -> None:
        self.flow = FlowRows(table)
        self.flow_names = self.flow.names

    def _events(self, table) -> None:
        """The events in groups of one (kind, flow), each in time order; an Events is made when
        a rule asks for it (most are never asked for: 100 k events in 20 k groups), a kind's flow
        -> group index when one of its flows is asked for, its sorted flows when asked for."""
        d = table.data
        self._kinds: dict[str, tuple[int, int]] = {}        # kind -> its groups [first, last)
        self._index: dict[str, dict[str, int]] = {}         # kind -> flow -> group
        self._made: dict[tuple[str, str], Events] = {}
        self._ts = self._starts = self._ends = self._frame = np.zeros(0, np.int64)
        if len(d["kind"]) == 0:
            return
        kinds, kind_rank = _codes(d["kind"])
        self._flow_text, flow_rank = _codes(d["flow"])
        order = np.lexsort((np.asarray(d["ts"]), flow_rank, kind_rank))
        kind_rank, flow_rank = kind_rank[order], flow_rank[order]
        self._ts, self._psn = np.asarray(d["ts"])[order], np.asarray(d["psn"])[order]
        self._frame = np.asarray(d["frame"], dtype=np.int64)[order]
        self._detail, self._order = np.asarray(d["detail"], dtype=object), order
        self._cols = {k: np.asarray(d[k], dtype=object if k == "pfc_priority" else None)
                      for k in EVENT_STRUCTURED if k in d}           # in table order: read via _order
        self._starts = run_starts(kind_rank, flow_rank)
        self._ends = np.append(self._starts[1:], len(order))
        self._group_flow = flow_rank[self._starts]
        group_kind = kind_rank[self._starts]
        first = run_starts(group_kind)
        for g, e in zip(first.tolist(), np.append(first[1:], len(group_kind)).tolist()):
            self._kinds[kinds[group_kind[g]]] = (g, e)

    def kind_groups(self, kind: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(flows, starts, ends, ts) of the events of `kind`: flow i's timestamps are
        ts[starts[i]:ends[i]] (flows in no particular order)."""
        g, e = self._kinds.get(kind, (0, 0))
        return self._flows_of(kind), self._starts[g:e], self._ends[g:e], self._ts

    def _capture_span(self) -> tuple[int, int]:
        s = self.summary
        if not s.get("first_ts"):
            return 0, 0
        first = _parse_ts(s["first_ts"])
        return first, first + int(s.get("duration_ns") or 0)

    # ---- lookups -----------------------------------------------------------------------------
    def ev(self, kind: str, flow: str) -> Events:
        ev = self._made.get((kind, flow))
        if ev is None:
            group = self._group_index(kind).get(flow)
            if group is None:
                return _EMPTY
            s, e = int(self._starts[group]), int(self._ends[group])
            rows = self._order[s:e]
            ev = self._made[(kind, flow)] = Events(self._ts[s:e], self._psn[s:e],
                                                   self._detail[rows].tolist(),
                                                   {k: v[rows] for k, v in self._cols.items()})
        return ev

    def _group_index(self, kind: str) -> dict[str, int]:
        index = self._index.get(kind)
        if index is None:
            g = self._kinds.get(kind, (0, 0))[0]
            index = self._index[kind] = {f: g + i for i, f in enumerate(self._flows_of(kind))}
        return index

    def event_frames(self, kind: str, flows: list[str] | None, window: tuple[int, int]) -> np.ndarray:
        """Frame numbers of the events of `kind` of `flows` (None: every flow) in the window
        [start, end] (both 0: the whole capture)."""
        g, e = self._kinds.get(kind, (0, 0))
        if flows is None:
            groups = range(g, e)
        else:
            index = self._group_index(kind)
            groups = [index[f] for f in flows if f in index]
        start, end = window
        parts = []
        for group in groups:
            s, t = int(self._starts[group]), int(self._ends[group])
            if end > 0:
                s, t = (s + int(np.searchsorted(self._ts[s:t], x, side)) for x, side in ((start, "left"), (end, "right")))
            parts.append(self._frame[s:t])
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def flows_with(self, kind: str) -> list[str]:
        return sorted(self._flows_of(kind))

    def _flows_of(self, kind: str) -> list[str]:
        """The flows with events of `kind`, in group order."""
        g, e = self._kinds.get(kind, (0, 0))
        return [self._flow_text[f] for f in self._group_flow[g:e].tolist()] if e > g else []

    def peer(self, name: str) -> str | None:
        f = self.flow.get(name)
        if f is None or f["peer_qp"] < 0:
            return None
        peer = flow_name(f["dst_ip"], f["src_ip"], f["peer_qp"])
        return peer if peer in self.flow else None

    def pair(self, name: str) -> list[str]:
        """The flow and, when the capture holds it, its peer: a finding about both directions of a QP."""
        peer = self.peer(name)
        return [name, peer] if peer else [name]

    def reverse_flows(self, name: str) -> list[str]:
        """Flows from this flow's destination back to its source (any QP)."""
        f = self.flow[name]
        return self.flows_between(f["dst_ip"], f["src_ip"])

    # Indexes, built on first use: rules ask per receiver or per flow, and a scan of every flow
    # for each question was quadratic (1 M packets over 50 k QPs: 6 s, most of it such scans).
    def flows_between(self, src: str, dst: str) -> list[str]:
        return self._by_pair.get((src, dst), [])

    def cnps_from(self, src: str, dst: str | None = None) -> int:
        """CNPs the host `src` sent (to `dst` only, when given)."""
        return self._cnps_by_pair.get((src, dst), 0) if dst is not None else self._cnps_by_src.get(src, 0)

    @cached_property
    def arrays(self) -> FlowArrays:
        """The flows table's columns as numpy arrays (hosts coded), for rules over every flow."""
        return FlowArrays(self.flow, self.flow_facts)

    @cached_property
    def _by_pair(self) -> dict[tuple[str, str], list[str]]:
        a, names = self.arrays, self.flow_names
        return {(a.hosts[s], a.hosts[d]): [names[i] for i in rows.tolist()]
                for (s, d), rows in a.by_pair().items()}

    @cached_property
    def _cnps_by_pair(self) -> dict[tuple[str, str], int]:
        a = self.arrays
        return {(a.hosts[s], a.hosts[d]): int(a.cnp_packets[rows].sum()) for (s, d), rows in a.by_pair().items()}

    @cached_property
    def _cnps_by_src(self) -> dict[str, int]:
        a = self.arrays
        return {a.hosts[s]: int(a.cnp_packets[rows].sum()) for s, rows in a.groups(a.src).items()}

    def is_reliable(self, name: str) -> bool:
        return self.flow[name]["transport"] in ("RC", "XRC", "RD")

    def duration_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 1)

    # ---- facts -------------------------------------------------------------------------------
    def once(self, name: str, build):
        """build(self), computed once per Context and kept under `name` (a rule's records, say)."""
        if name not in self.__dict__:
            self.__dict__[name] = build(self)
        return self.__dict__[name]

    def host_macs(self) -> dict[int, set]:
        """MAC -> {its address} of each MAC that is a RoCE host's NIC: the one MAC that sends for
        that address and for no other, and forwards nothing (its frames' TTL is its host's own; see
        host_nics). Read-only, built once."""
        return self._host_macs

    @cached_property
    def _host_macs(self) -> dict[int, set]:
        return host_macs(self.facts.classes if self.facts else [], address_text)

    def read_breaks(self) -> dict[str, list]:
        out: dict[str, list] = defaultdict(list)
        for ts, src, dst, qp, psn, expected in (self.facts.read_breaks if self.facts else []):
            out[flow_name(address_text(src), address_text(dst), qp)].append((ts, psn, expected))
        return out


class FlowRows(Mapping):
    """flow name -> its row of the flows table, read as a dict of Python values (timestamps int
    ns, QPs int with -1 = none; as `_rows`). Rows are made when asked for, from the table's
    columns: a dict per flow was ~1 kB each (100 k queue pairs: 100 MB)."""

    def __init__(self, table):
        self._cols = {c: table.data[c] if isinstance(table.data[c], np.ndarray) else list(table.data[c])
                      for c in table.columns}
        self.names = list(self._cols["flow"])
        self._index = {name: i for i, name in enumerate(self.names)}
        if len(self._index) < len(self.names):
            self._listed()

    def _listed(self) -> None:
        """Two flows spelt alike (format_address writes IPv6 ::fefe:x:y as lid:0xy whatever x
        is): one row per name, the last one, where the name first came (what iterating this
        mapping gives), so the column-wide rules see each name once, as the name lookups do."""
        rows = np.fromiter(self._index.values(), np.int64, len(self._index))
        self._cols = {c: v[rows] if isinstance(v, np.ndarray) else [v[i] for i in rows.tolist()]
                      for c, v in self._cols.items()}
        self.names = list(self._index)
        self._index = {name: i for i, name in enumerate(self.names)}

    def __getitem__(self, name: str) -> "FlowRow":
        return FlowRow(self._cols, self._index[name])

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, name) -> bool:
        return name in self._index

    def column(self, column: str):
        """A whole column, in flow order (ndarray, or list for str columns)."""
        return self._cols[column]

    def row_of(self, name: str) -> int:
        return self._index[name]

    def rows(self, names) -> np.ndarray:
        """The row of each name, -1 for a name not in the table."""
        names = list(names)
        return np.fromiter(map(self._index.get, names, repeat(-1)), np.int64, len(names))


class FlowRow(Mapping):
    """One flows-table row: column -> Python value (ndarray.item: the value tolist gives)."""

    __slots__ = ("_cols", "_i")

    def __init__(self, cols: dict, i: int):
        self._cols, self._i = cols, i

    def __getitem__(self, column: str):
        values = self._cols[column]
        return values.item(self._i) if isinstance(values, np.ndarray) else values[self._i]

    def __iter__(self):
        return iter(self._cols)

    def __len__(self) -> int:
        return len(self._cols)


def _rows(table) -> list[dict]:
    """Table rows as dicts of Python values (timestamps int ns, QPs int with -1 = none)."""
    d = table.data
    cols = {c: (d[c].tolist() if isinstance(d[c], np.ndarray) else list(d[c])) for c in table.columns}
    return [dict(zip(cols, values)) for values in zip(*cols.values())]


_EMPTY = Events(np.zeros(0, np.int64), np.zeros(0, np.int64), [])


def in_arcs(psn: int, arcs, slack: int = 64) -> bool:
    """PSN within [first - slack, last + slack] of one of the arcs (24-bit serial arithmetic)."""
    for first, last in arcs:
        lo = (first - slack) % PSN_MOD
        if (psn - lo) % PSN_MOD <= (last - first) % PSN_MOD + 2 * slack:
            return True
    return False


def _flow_names():
    """name_of((src, dst, qp)) -> the flow id as the analysis spells it; the "src>dst:0x" part
    kept per host pair (100 k queue pairs over a few hosts: 100 k names)."""
    prefixes: dict[tuple, str] = {}

    def name_of(key: tuple) -> str:
        prefix = prefixes.get(key[:2])
        if prefix is None:
            prefix = prefixes[key[:2]] = f"{address_text(key[0])}>{address_text(key[1])}:0x"
        return prefix + format(key[2], "06x")

    return name_of


def _codes(values) -> tuple[list, np.ndarray]:
    """The distinct values in order of first appearance, and each value's place among them."""
    code = {v: i for i, v in enumerate(dict.fromkeys(values))}
    return list(code), np.fromiter(map(code.__getitem__, values), np.int64, len(values))


@lru_cache(maxsize=4096)
def address_text(words: tuple) -> str:
    """Text of an address: a capture has a few hosts and one class per flow and opcode class,
    so the same few addresses come again and again (ipaddress costs ~9 us a call)."""
    return format_address(np.asarray(words, dtype="<u8"))



def _parse_ts(text: str) -> int:
    sec, _, frac = text.partition(".")
    sign = -1 if sec.startswith("-") else 1
    return sign * (abs(int(sec)) * 1_000_000_000 + int((frac + "000000000")[:9]))


def requester_side(ctx: Context, name: str) -> list[str]:
    """The flows that answer `name`: its peer QP's flow, else every flow in the other direction."""
    peer = ctx.peer(name)
    return [peer] if peer else ctx.reverse_flows(name)


@dataclass(frozen=True)
class Negotiated:
    """What RDMA CM negotiated for one requester (a flow to the peer's QP): its Local ACK
    Timeout in ns (0: unknown, or 0 = no timer), its RNR retry count (-1: unknown, 7: for ever)."""
    ack_timeout_ns: int
    rnr_retry: int
    connection: str

    def ack_timeout_text(self) -> str:
        """'4.096 us x 2^14 = 67.11 ms': the exponent as the CM message carries it, and its time."""
        return f"4.096 us x 2^{round(log2(self.ack_timeout_ns / 4096))} = {duration(self.ack_timeout_ns)}"


def negotiated(table) -> dict[str, Negotiated]:
    """Requester flow -> what CM negotiated for it, from the connections table (connections.csv).
    The server's QP (its flow to the client's QP) takes the REQ's Local ACK Timeout and RNR Retry
    Count (IBTA 12.7.34, 12.6.5; Linux ib_cm: the passive side's path packet life time is the
    REQ's timeout - 1, its QP timeout that + 1), the client's the REP's RNR Retry Count (12.6.8)
    and 2 x PacketLifeTime + the REP's Target ACK Delay (Linux cm_ack_timeout). The wire does not
    carry the packet life time (the REQ's timeout folds in the client's own ACK delay), so the
    client's timeout is taken at its lower bound, cm_ack_timeout(Target ACK Delay, 0): a rule that
    calls a resend "too soon" must not overshoot; unknown without the REP. {} without a table (no
    CM in the capture)."""
    need = ("connection", "client_ip", "server_ip", "client_qp", "server_qp", "local_ack_timeout_us",
            "rnr_retry_count", "client_rnr_retry_count")
    if table is None or not len(table) or any(c not in table.data for c in need):
        return {}
    d, out = table.data, {}
    delays = d.get("target_ack_delay", np.full(len(table), -1))
    for i in range(len(table)):
        server_t, tad = float(d["local_ack_timeout_us"][i]), int(delays[i])
        client_t = cm.timeout_us(cm.ack_timeout(tad, 0)) if tad >= 0 else float("nan")
        for src, dst, qp, timeout_us, rnr in (
                (d["client_ip"][i], d["server_ip"][i], d["server_qp"][i], client_t, d["client_rnr_retry_count"][i]),
                (d["server_ip"][i], d["client_ip"][i], d["client_qp"][i], server_t, d["rnr_retry_count"][i])):
            if int(qp) >= 0 and src and dst:
                ns = int(round(timeout_us * 1000)) if timeout_us == timeout_us and timeout_us > 0 else 0
                out[flow_name(src, dst, int(qp))] = Negotiated(ns, int(rnr), d["connection"][i])
    return out
