"""Ground truth kept by the simulator beside the frames: what really happened, so tests
(and the analysis tests) can compare a capture's analysis against known numbers."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Drop:
    where: str          # "switch" (network loss), "switch-buffer" (lossy-class overflow), "mirror"
    ts_ns: int
    src_ip: str
    dst_ip: str
    dest_qp: int
    psn: int | None     # None for PFC frames
    opcode: int | None


@dataclass
class Truth:
    scenario: str = ""
    seed: int = 0
    mirror: str = ""
    drops: list[Drop] = field(default_factory=list)
    corrupted: list[Drop] = field(default_factory=list)   # copies damaged by the capture path
    counters: Counter = field(default_factory=Counter)
    # per requester QP (hex qpn): packets sent with a PSN already sent before
    retransmitted: Counter = field(default_factory=Counter)
    pause_sources: dict = field(default_factory=dict)   # source MAC -> "switch" | "host"
    qps: list[dict] = field(default_factory=list)       # one dict per QP: addresses, QPNs, first PSN
    # requester QPs that went to the Error state: qpn, the work completion status, PSN, time
    qp_errors: list[dict] = field(default_factory=list)
    # ECMP path changes of a requester QP: qpn, first PSN on the new UDP source port, time, the old
    # and new port and the extra latency of each port's path
    path_changes: list[dict] = field(default_factory=list)
    # packets that arrived after a packet of their QP sent later (overtaken on a longer path)
    reordered: list[dict] = field(default_factory=list)
    # NAK PSN sequence errors the requester acted on: qpn, PSN, time, spurious (the PSN was never
    # lost, only overtaken), packets resent by the go-back-N it caused
    seq_naks: list[dict] = field(default_factory=list)
    # READs re-issued from their first missing response: qpn, PSN, time, detected (how the requester
    # saw the loss: "out_of_sequence_response", "implied_nak" or "timeout"), by_psn / by_opcode (the
    # response or ACK that showed it), the re-read's va and dma_length, packets resent from there
    rereads: list[dict] = field(default_factory=list)
    # capture-path scenarios (capture_points.py): the capture points, each one's offset or clock
    # skew per direction, and per flow what one point shows (packets, data packets, NAKs, resent, RTT)
    capture_points: dict = field(default_factory=dict)
    # every operation (work request, CM MAD) as the capture shows it: ops_truth.py
    ops: list[dict] = field(default_factory=list)
    # every CNP a reaction point received: qpn, time at the NIC, whether and when it cut the rate,
    # the rate before and after (qp.py cnp_truth; dcqcn.py)
    cnps: list[dict] = field(default_factory=list)
    # PFC forensics (pause_watch.py): frames a NIC sent on a priority it should have held paused,
    # beyond the response bound; flows held by pauses meant for another receiver's congestion; the
    # paused periods of each watched host link at its NIC (port name -> priority -> [[start, end] ns])
    pfc_violations: list[dict] = field(default_factory=list)
    victims: list[dict] = field(default_factory=list)
    pause_periods: dict = field(default_factory=dict)
    # when each of some events first happened (ns, at the device): "ce_marked" (the switch's first
    # CE mark), "pfc_xoff_sent" (the first XOFF anyone sent), "pfc_xoff_sent_switch" / "_host"
    firsts: dict = field(default_factory=dict)
    expected_kinds: tuple = ()
    forbidden_kinds: tuple = ()

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def first(self, name: str, ts_ns: int) -> None:
        """Note when `name` first happened (later calls keep the first)."""
        self.firsts.setdefault(name, ts_ns)

    def drops_at(self, where: str) -> list[Drop]:
        return [d for d in self.drops if d.where == where]

    def as_dict(self) -> dict:
        return {
            "scenario": self.scenario, "seed": self.seed, "mirror": self.mirror,
            "drops": [vars(d) for d in self.drops], "corrupted": [vars(d) for d in self.corrupted],
            "counters": dict(self.counters),
            "retransmitted": dict(self.retransmitted), "pause_sources": dict(self.pause_sources),
            "qps": list(self.qps), "qp_errors": list(self.qp_errors), "path_changes": list(self.path_changes),
            "reordered": list(self.reordered), "seq_naks": list(self.seq_naks),
            "rereads": list(self.rereads), "capture_points": dict(self.capture_points), "ops": list(self.ops), "cnps": list(self.cnps),
            "pfc_violations": list(self.pfc_violations), "victims": list(self.victims),
            "pause_periods": dict(self.pause_periods), "firsts": dict(self.firsts),
            "expected_kinds": list(self.expected_kinds),
            "forbidden_kinds": list(self.forbidden_kinds),
        }
