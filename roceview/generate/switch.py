"""One shared-buffer Ethernet switch: output queues per port and priority, ECN marking,
PFC per ingress port, and the network's loss point.

* ECN (RFC 3168, DCQCN's RED profile): an ECT packet is CE-marked on enqueue with
  probability 0 below Kmin, rising linearly to Pmax at Kmax, 1 above Kmax.
* PFC (802.1Qbb): bytes buffered per (ingress port, priority) of a lossless class; above
  `xoff_bytes` the switch pauses that ingress port's priority, below `xon_bytes` resumes it.
* Lossy classes tail-drop above `lossy_limit_bytes` per output queue.
* `loss_prob` drops data packets toward `loss_to` inside the switch during a loss episode
  (`loss_window_pkts`: counted in data packets toward `loss_to`)
  (a failing line card / buffer fault): between a sender-side and a receiver-side mirror.
* `drop_kth`: (opcode, k) pairs: the switch drops the k-th packet of that BTH opcode it forwards
  (a READ RESPONSE MIDDLE, say), each (QP, PSN) counted once so that a resend or a replayed
  READ's response is neither counted nor dropped again: one loss placed exactly, no rng drawn.
* `path_delay_ps` (set by Network.reroute): the fabric behind the switch as equal-cost paths of
  different latency (spine hops, cable); a RoCE frame takes the path its UDP source port hashes
  onto (RoCEv2 carries per-flow entropy there for ECMP, Annex A17). A flow moved to a shorter
  path can overtake its own packets still on the longer one; each packet that leaves the paths
  after one of its flow that entered them later is recorded in `truth.reordered`.
"""
from __future__ import annotations

from dataclasses import dataclass

from roceview.generate.frames import LldpFrame, PfcFrame, RocePacket
from roceview.generate.pause_sender import PauseSender
from roceview.generate.port import Port
from roceview.generate.simulator import BASE_TS_NS


@dataclass
class SwitchSettings:
    ecn_marking: bool = True
    kmin_bytes: int = 20_000
    kmax_bytes: int = 80_000
    pmax: float = 0.2
    pfc_prios: tuple = (3,)
    xoff_bytes: int = 96_000
    xon_bytes: int = 48_000
    lossy_limit_bytes: int = 2_000_000
    loss_prob: float = 0.0
    loss_window_pkts: tuple = (0, 0)   # active from the a-th to the b-th data packet toward loss_to
    loss_to: int | None = None
    drop_kth: tuple = ()               # ((opcode, k), ...): drop the k-th (1-based) of that opcode


class Switch:
    def __init__(self, sim, settings: SwitchSettings, rng, truth, drop_record):
        self.sim, self.s, self.rng, self.truth = sim, settings, rng, truth
        self.drop_record = drop_record          # callable(where, frame)
        self.ports: dict[int, Port] = {}
        self.ingress_bytes: dict[tuple, int] = {}
        self.pausers: dict[tuple, PauseSender] = {}
        self._loss_seen = 0
        self._lost: set[tuple] = set()
        self._kth_seen: dict[int, set] = {}        # opcode -> (dest QP, PSN) counted for drop_kth
        self.path_delay_ps: dict[int, int] = {}   # UDP source port -> extra latency of its path
        self._entered: dict[tuple, int] = {}      # per flow: frames that entered the paths
        self._left: dict[tuple, tuple] = {}       # per flow: (entry index, PSN) of the latest-sent out
        self.peak_queue: dict[int, int] = {}      # egress port -> deepest lossless queue seen (bytes)

    def add_port(self, host_index: int, mac: bytes, gbps: float, prop_ps: int) -> Port:
        port = Port(self.sim, f"switch->{host_index}", gbps, prop_ps)
        port.on_dequeue = self._dequeued
        self.ports[host_index] = port
        for prio in self.s.pfc_prios:
            self.pausers[(host_index, prio)] = PauseSender(self.sim, port, mac, prio, self.truth, "switch")
        return port

    def receive(self, frame, ingress: int) -> None:
        if isinstance(frame, PfcFrame):
            port = self.ports[ingress]
            for prio in range(8):
                if frame.enable_vector >> prio & 1:
                    port.pause(prio, frame.quanta[prio])
            return
        if isinstance(frame, LldpFrame):
            return    # LLDP is link-local (802.1AB 7.1): a bridge never forwards it
        self._forward(frame, ingress)

    def _forward(self, pkt: RocePacket, ingress: int) -> None:
        if self._network_loss(pkt) or self._kth_loss(pkt):
            return self.drop_record("switch", pkt)
        if self.path_delay_ps:
            return self._enter_path(pkt, ingress)
        self._enqueue(pkt, ingress)

    def _enter_path(self, pkt: RocePacket, ingress: int) -> None:
        flow = (pkt.src, pkt.dst, pkt.dest_qp)
        index = self._entered.get(flow, 0)
        self._entered[flow] = index + 1
        delay = self.path_delay_ps.get(pkt.sport, 0)
        self.sim.after(delay, self._leave_path, pkt, ingress, flow, index)

    def _leave_path(self, pkt: RocePacket, ingress: int, flow: tuple, index: int) -> None:
        latest = self._left.get(flow)
        if latest is not None and index < latest[0]:   # a packet sent after it got here first
            self.truth.count("reordered_packets")
            self.truth.reordered.append({"dest_qp": pkt.dest_qp, "psn": pkt.psn, "opcode": pkt.opcode,
                                         "ts_ns": BASE_TS_NS + self.sim.now // 1000,
                                         "overtaken_by_psn": latest[1]})
        else:
            self._left[flow] = (index, pkt.psn)
        self._enqueue(pkt, ingress)

    def _enqueue(self, pkt: RocePacket, ingress: int) -> None:
        egress = self.ports[pkt.dst]
        prio = pkt.pcp
        lossless = prio in self.s.pfc_prios
        depth = egress.queued_bytes.get(prio, 0)
        if not lossless and depth + pkt.wire_bytes > self.s.lossy_limit_bytes:
            return self.drop_record("switch-buffer", pkt)
        self._mark(pkt, depth)
        pkt.ingress = ingress if lossless else -1
        if lossless:
            self._account(ingress, prio, pkt.wire_bytes)
            if depth > self.peak_queue.get(pkt.dst, 0):   # which receivers were congested (truth)
                self.peak_queue[pkt.dst] = depth
        egress.enqueue(pkt, prio)

    def _network_loss(self, pkt: RocePacket) -> bool:
        s = self.s
        if s.loss_prob <= 0 or not pkt.is_data or pkt.dst != s.loss_to:
            return False
        self._loss_seen += 1
        if not s.loss_window_pkts[0] <= self._loss_seen <= s.loss_window_pkts[1]:
            return False
        key = (pkt.dest_qp, pkt.psn)
        if key in self._lost or self.rng.random() >= s.loss_prob:
            return False
        self._lost.add(key)   # a resent packet is not lost again: one loss per PSN keeps the
        return True           # fault a NAK-recovered one (a second loss needs the ACK timer)

    def _kth_loss(self, pkt: RocePacket) -> bool:
        if not self.s.drop_kth or pkt.opcode not in {op for op, _ in self.s.drop_kth}:
            return False
        seen = self._kth_seen.setdefault(pkt.opcode, set())
        key = (pkt.dest_qp, pkt.psn)
        if key in seen:
            return False
        seen.add(key)
        return (pkt.opcode, len(seen)) in self.s.drop_kth

    def _mark(self, pkt: RocePacket, depth: int) -> None:
        s = self.s
        if not s.ecn_marking or pkt.ecn not in (1, 2) or pkt.v1 or depth < s.kmin_bytes:
            # RoCEv1 has no IP header: a switch cannot CE-mark it
            return
        p = 1.0 if depth >= s.kmax_bytes else s.pmax * (depth - s.kmin_bytes) / (s.kmax_bytes - s.kmin_bytes)
        if self.rng.random() < p:
            pkt.ecn = 3
            self.truth.count("ce_marked")
            self.truth.first("ce_marked", BASE_TS_NS + self.sim.now // 1000)

    def _account(self, ingress: int, prio: int, nbytes: int) -> None:
        key = (ingress, prio)
        total = self.ingress_bytes.get(key, 0) + nbytes
        self.ingress_bytes[key] = total
        if total > self.s.xoff_bytes:
            self.pausers[key].xoff()
        elif total < self.s.xon_bytes and nbytes < 0:
            self.pausers[key].xon()

    def _dequeued(self, frame) -> None:
        if isinstance(frame, RocePacket) and frame.ingress >= 0:
            self._account(frame.ingress, frame.pcp, -frame.wire_bytes)
