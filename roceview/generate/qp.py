"""An RC queue pair: one requester, one responder, the addressing both use, and the
application that posts work requests to it."""
from __future__ import annotations

from dataclasses import dataclass

from roceview.generate import ibta as ib
from roceview.generate.dcqcn import ReactionPoint
from roceview.generate.frames import RocePacket
from roceview.generate.requester import Requester
from roceview.generate.responder import Responder
from roceview.generate.simulator import BASE_TS_NS


@dataclass
class QpSettings:
    pcp: int = 3
    dscp: int = 26
    ecn: int = 2               # ECT(0); 0 = ECN disabled on the NIC
    window: int = 64           # outstanding PSNs the NIC allows (its WQE/doorbell pipeline)
    timeout_exp: int = 14      # QP attribute `timeout`: 4.096 us * 2^14 = 67 ms
    retry_cnt: int = 7
    rnr_retry: int = 7         # RNR NAKs resent after, 0-6; 7 = for ever (ibv_modify_qp)
    ack_delay_ns: int = 1000   # responder ACK coalescing window
    rnr_timer_code: int = 12   # min RNR timer 0.64 ms (IBTA Table 45)
    max_rd_atomic: int | None = None   # initiator depth: READs / atomics in flight (None: unlimited)
    rp_reaction_ns: int = 0    # DCQCN reaction point: CNP -> rate cut (dcqcn.py)
    rp_reacts: bool = True     # False: the reaction point ignores CNPs


class QueuePair:
    def __init__(self, host, qpn: int, peer: int, peer_qpn: int, sport: int,
                 sq_psn: int, rq_psn: int, settings: QpSettings, mtu: int | None = None):
        self.host, self.sim, self.truth = host, host.sim, host.truth
        self.qpn, self.peer, self.peer_qpn, self.sport = qpn, peer, peer_qpn, sport
        self.sq_psn, self.rq_psn = sq_psn, rq_psn   # first PSN of own requests / of the peer's
        self.pcp, self.dscp, self.ecn = settings.pcp, settings.dscp, settings.ecn
        self.mtu = mtu or host.mtu     # path MTU
        self.rp = ReactionPoint(line_gbps=host.port.gbps, reaction_ps=settings.rp_reaction_ns * 1000,
                                reacts=settings.rp_reacts)
        self.requester = Requester(self, settings.window, settings.timeout_exp, settings.retry_cnt,
                                   rnr_retry=settings.rnr_retry, max_rd_atomic=settings.max_rd_atomic)
        self.responder = Responder(self, settings.ack_delay_ns * 1000, settings.rnr_timer_code)
        self.peer_qp: QueuePair | None = None     # the other end, once the pair is made (network.py)

    def span(self, length: int) -> int:
        """PSNs a READ of `length` bytes consumes: ceil(length / PMTU), at least 1 (9.7.1)."""
        return max(1, -(-length // self.mtu))

    @staticmethod
    def _unwrap(psn: int, base: int, ref: int) -> int:
        delta = (psn - base - ref) & ib.PSN_MASK
        return ref + (delta - (1 << 24) if delta >= 1 << 23 else delta)

    def unwrap_sq(self, psn: int, ref: int) -> int:
        return self._unwrap(psn, self.sq_psn, ref)

    def unwrap_rq(self, psn: int, ref: int) -> int:
        return self._unwrap(psn, self.rq_psn, ref)

    def packet(self, opcode: int, seq: int, peer_space: bool = False, **fields) -> RocePacket:
        base = self.rq_psn if peer_space else self.sq_psn
        return RocePacket(src=self.host.index, dst=self.peer, sport=self.sport, pcp=self.pcp,
                          dscp=self.dscp, ecn=self.ecn, opcode=opcode, dest_qp=self.peer_qpn,
                          psn=(base + seq) & ib.PSN_MASK, ip_id=self.host.next_ip_id(),
                          v1=self.host.v1, **fields)

    def send_response(self, pkt: RocePacket) -> None:
        self.host.port.enqueue(pkt, self.pcp)

    def receive(self, pkt: RocePacket) -> None:
        if pkt.opcode == ib.CNP:
            self.truth.count("cnps_received")
            outcome = self.rp.on_cnp(self.sim.now)
            if outcome["cut_ps"] is not None:        # at most one cut per rate_reduce_period
                self.truth.count("dcqcn_rate_cuts")
            self.truth.cnps.append(cnp_truth(self.qpn, self.sim.now, outcome))
        elif pkt.opcode in (ib.ACKNOWLEDGE, ib.ATOMIC_ACKNOWLEDGE) or pkt.opcode in ib.READ_RESPONSE_OPCODES:
            self.requester.on_response(pkt)
        else:
            self.responder.on_request(pkt)


def cnp_truth(qpn: int, now: int, outcome: dict) -> dict:
    """A CNP the reaction point received (at the NIC, not the capture point): when, whether and
    when it cut the rate, the rate before and after (Gb/s)."""
    cut = outcome["cut_ps"]
    return {"qpn": qpn, "ts_ns": BASE_TS_NS + now // 1000, "cut": cut is not None,
            "cut_ts_ns": None if cut is None else BASE_TS_NS + cut // 1000,
            "rate_before_gbps": round(outcome["rate_before_gbps"], 6),
            "rate_after_gbps": round(outcome["rate_after_gbps"], 6)}


@dataclass
class Workload:
    """What the application posts: `messages` (op, length) in order, at most `qd`
    outstanding, `gap_ns` think time after each completion, from `start_ns`; with `at_ns`
    message i is posted no earlier than at_ns[i] after the start (an application that works
    in steps)."""
    messages: list
    qd: int = 8
    gap_ns: int = 0
    start_ns: int = 0
    at_ns: tuple | None = None
    rkey: int = 0x1234
    bad_rkey_at: int | None = None   # index of a message sent with a stale R_Key


class Application:
    def __init__(self, qp: QueuePair, workload: Workload, start: bool = True):
        self.qp, self.w = qp, workload
        self.next = 0
        self.t0 = 0                    # when posting began (at_ns counts from it)
        qp.requester.on_complete = self._completed
        if start:
            self.start()

    def start(self) -> None:
        """Begin posting `start_ns` from now (at once, or when the connection is established)."""
        self.t0 = self.qp.sim.now + self.w.start_ns * 1000
        self.qp.sim.at(self.t0, self._fill)
        for t in sorted(set(self.w.at_ns or ())):
            self.qp.sim.at(self.t0 + t * 1000, self._fill)

    def _due(self, i: int) -> bool:
        return self.w.at_ns is None or self.t0 + self.w.at_ns[i] * 1000 <= self.qp.sim.now

    def _fill(self) -> None:
        req = self.qp.requester
        while (self.next < len(self.w.messages) and len(req.wrs) - req.done < self.w.qd
               and self._due(self.next)):
            self._post(self.next)
            self.next += 1

    def _post(self, i: int) -> None:
        op, length = self.w.messages[i]
        rkey = self.w.rkey + (1 if i == self.w.bad_rkey_at else 0)
        va = 0x7F0000000000 + (i % 64) * 0x100000
        self.qp.requester.post(op, length, va, rkey, imm=i)

    def _completed(self, wr) -> None:
        self.qp.sim.after(self.w.gap_ns * 1000, self._fill)
