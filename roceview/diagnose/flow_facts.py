"""Per-flow facts folded from the FactCollector's packet classes.

The counts every rule reads for every flow (data packets, CE, ECT, RoCEv1, bad ICRC, versions)
are summed with numpy, one row per flow; the rest (priorities, PSN arcs, the last packet of each
class) is a FlowFacts built from the flow's own classes when a rule asks for that flow. A
FlowFacts per flow, built up front, was 9 containers per flow: 100 k queue pairs took 0.4 s,
most of it the garbage collector walking them.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter

import numpy as np

from roceview.analysis.opcode_classes import (ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, CNP, READ_REQUEST,
                                              READ_RESPONSE, REQUEST)
from roceview.diagnose.flow_arrays import any_of, distinct_codes

DATA_CLASSES = (REQUEST, READ_REQUEST, READ_RESPONSE)
RESPONSE_CLASSES = (READ_RESPONSE, ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE)
_PROTO = {"roce_v1": 1, "roce_v2": 2, "ib": 3}         # any other: 0
NOT_ECN_PROTOS = (_PROTO["ib"], _PROTO["roce_v1"])    # native IB uses FECN/BECN; a RoCEv1 GRH is not IP


@dataclass(slots=True)       # no __dict__ per flow (100 k queue pairs: 100 k of these)
class FlowFacts:
    """Per-flow sums from the packet classes (empty when no facts were collected)."""
    priorities: dict = field(default_factory=lambda: defaultdict(int))   # (pcp, dscp) -> data+ack packets
    cnp_priorities: dict = field(default_factory=lambda: defaultdict(int))
    data: int = 0
    data_not_ect: int = 0
    data_ce: int = 0
    data_ect: int = 0      # ECN-capable data packets: RoCEv2 only (switches do not mark a RoCEv1 GRH)
    data_v1: int = 0       # RoCEv1 data packets
    bad_icrc: int = 0
    bad_requests: list = field(default_factory=list)   # [(ts, psn)] last packet of each request class with bad ICRCs
    response_last: list = field(default_factory=list)   # [(ts, psn)] last packet of each response class
    protos: set = field(default_factory=set)
    request_arc: list = field(default_factory=list)    # [(first psn, last psn)]
    response_arc: list = field(default_factory=list)


class FlowFactsTable(Mapping):
    """flow name -> its FlowFacts (built on first ask, then kept); `names` in the order of each
    flow's first class, and per flow (same order) the arrays `data`, `data_ce`, `data_ect`,
    `data_v1`, `bad_icrc` (int64), `ecn_capable` (a class of a protocol switches ECN-mark: not
    IB, not RoCEv1), `v1` / `v2` (a RoCEv1 / RoCEv2 class)."""

    def __init__(self, classes: list, name_of):
        """name_of((src, dst, qp)) -> the flow's name, asked once per distinct key."""
        self._classes = classes
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        keys = list(map(attrgetter("src", "dst", "qp"), classes))
        row_of: dict[tuple, int] = {}
        for key in dict.fromkeys(keys):                # distinct, in order of first class
            name = name_of(key)
            i = self.index.get(name)
            if i is None:
                i = self.index[name] = len(self.names)
                self.names.append(name)
            row_of[key] = i
        self._flow = np.fromiter(map(row_of.__getitem__, keys), np.int64, len(keys))
        self._sums(classes)
        self._built: dict[str, FlowFacts] = {}
        self._order = self._bounds = None

    def _sums(self, classes: list) -> None:
        def ints(name):
            return np.fromiter(map(attrgetter(name), classes), np.int64, len(classes))

        packets, opclass, ecn = ints("packets"), ints("opclass"), ints("ecn")
        self.class_packets, self.class_cnp = packets, opclass == CNP
        proto = np.fromiter(map(_PROTO.get, map(attrgetter("proto"), classes), repeat(0)), np.int8, len(classes))
        v1, v2 = proto == _PROTO["roce_v1"], proto == _PROTO["roce_v2"]
        data = any_of(opclass, DATA_CLASSES)
        self.data = self._sum(packets, data)
        self.data_ce = self._sum(packets, data & (ecn == 3))
        self.data_ect = self._sum(packets, data & (ecn > 0) & v2)
        self.data_v1 = self._sum(packets, data & v1)
        self.bad_icrc = self._sum(ints("bad_icrc"), None)
        self.ecn_capable, self.v1, self.v2 = (self._sum(m.astype(np.int64), None) > 0
                                              for m in (~any_of(proto, NOT_ECN_PROTOS), v1, v2))

    def _sum(self, values: np.ndarray, where) -> np.ndarray:
        out = np.zeros(len(self.names), np.int64)
        if where is None:
            np.add.at(out, self._flow, values)
        else:
            np.add.at(out, self._flow[where], values[where])
        return out

    def class_priorities(self, priority_of) -> tuple[np.ndarray, np.ndarray]:
        """Per class, (its flow's row, its priority: priority_of(pcp, dscp), -1 for None), asked
        once per distinct (PCP, DSCP); the classes' packets and CNP flags: class_packets, class_cnp."""
        if not self._classes:
            return self._flow, np.zeros(0, np.int64)
        pcp, dscp = (np.fromiter(map(attrgetter(k), self._classes), np.int64, len(self._classes))
                     for k in ("pcp", "dscp"))
        lo, span = int(dscp.min()), int(dscp.max() - dscp.min()) + 1
        marks, at = distinct_codes(pcp * span + (dscp - lo), max(len(pcp), 1 << 12))
        prio = [priority_of(m // span, m % span + lo) for m in marks.tolist()]
        if any(p is not None and p < 0 for p in prio):
            raise ValueError("a priority below 0")           # -1 stands for none below
        table = np.array([-1 if p is None else p for p in prio], np.int64)
        return self._flow, table[at.reshape(-1)]

    def nonzero(self, column: str) -> dict[str, int]:
        """name -> the column's value, for the flows where it is not 0 (in flow order)."""
        values = getattr(self, column)
        return {self.names[i]: int(values[i]) for i in np.flatnonzero(values).tolist()}

    def __getitem__(self, name: str) -> FlowFacts:
        ff = self._built.get(name)
        if ff is None:
            ff = self._built[name] = self._build(self.index[name])
        return ff

    def _build(self, i: int) -> FlowFacts:
        if self._order is None:
            self._order = np.argsort(self._flow, kind="stable")      # each flow's classes, in order
            self._bounds = np.searchsorted(self._flow[self._order], np.arange(len(self.names) + 1))
        ff = FlowFacts()
        for k in self._order[self._bounds[i]:self._bounds[i + 1]].tolist():
            add_class(ff, self._classes[k])
        return ff

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name) -> bool:
        return name in self.index


def add_class(ff: FlowFacts, c) -> None:
    ff.protos.add(c.proto)
    ff.bad_icrc += c.bad_icrc
    if c.opclass == CNP:
        ff.cnp_priorities[(c.pcp, c.dscp)] += c.packets
        return
    ff.priorities[(c.pcp, c.dscp)] += c.packets
    if c.opclass in DATA_CLASSES:
        ff.data += c.packets
        ff.data_not_ect += c.packets if c.ecn == 0 else 0
        ff.data_ce += c.packets if c.ecn == 3 else 0
        ff.data_v1 += c.packets if c.proto == "roce_v1" else 0
        ff.data_ect += c.packets if c.ecn > 0 and c.proto == "roce_v2" else 0
    if c.opclass in (REQUEST, READ_REQUEST):
        ff.request_arc.append((c.first_psn, c.last_psn))
        if c.bad_icrc:
            ff.bad_requests.append((c.last_ts, c.last_psn))
    elif c.opclass in RESPONSE_CLASSES:
        ff.response_arc.append((c.first_psn, c.last_psn))
        ff.response_last.append((c.last_ts, c.last_psn))
