"""A host's RDMA NIC: one port to the switch, its queue pairs, the DCQCN notification
point, and an optional receive pipeline that drains slower than the link (PCIe / host
memory bound) and back-pressures with PFC, or stalls outright (PFC storm)."""
from __future__ import annotations

from collections import deque

from roceview.generate import ibta as ib
from roceview.generate.dcqcn import NotificationPoint
from roceview.generate.simulator import BASE_TS_NS, serialisation_ps
from roceview.generate.frames import LldpFrame, PfcFrame, RocePacket
from roceview.generate.pause_sender import PauseSender
from roceview.generate.port import Port


class Host:
    def __init__(self, sim, index: int, mac: bytes, truth, gbps: float, prop_ps: int, mtu: int,
                 np: NotificationPoint, cnp_pcp: int = 3, cnp_dscp: int = 26):
        self.sim, self.index, self.mac, self.truth, self.mtu = sim, index, mac, truth, mtu
        self.port = Port(sim, f"host{index}", gbps, prop_ps)
        self.port.source = self
        self.np, self.cnp_pcp, self.cnp_dscp = np, cnp_pcp, cnp_dscp
        self.qps: dict[int, object] = {}
        self.rx: ReceivePipeline | None = None
        self._ip_id = index * 7919
        self.v1 = False               # sends RoCEv1 (its GID type), else RoCEv2
        self.cm = None                # RDMA CM agent on QP1, when connections are set up by CM
        self._rr = 0
        self.ce_received = 0          # CE-marked data packets it received (a congested receiver)

    def next_ip_id(self) -> int:
        self._ip_id = (self._ip_id + 1) & 0xFFFF
        return self._ip_id

    def pull(self, now: int, allowed):
        """The NIC's send scheduler: round-robin over QPs with something to send."""
        qps = list(self.qps.values())
        wake = None
        for k in range(len(qps)):
            qp = qps[(self._rr + k) % len(qps)]
            pkt, w = qp.requester.next_packet(now, allowed)
            if pkt is not None:
                self._rr = (self._rr + k + 1) % len(qps)
                return pkt, None
            if w is not None:
                wake = w if wake is None else min(wake, w)
        return None, wake

    def receive(self, frame) -> None:
        if isinstance(frame, PfcFrame):
            self._apply_pfc(frame)
        elif isinstance(frame, LldpFrame):
            return    # the NIC's LLDP agent reads it; the model needs no DCBX negotiation
        elif self.rx is not None:
            self.rx.arrive(frame)
        else:
            self.deliver(frame)

    def _apply_pfc(self, frame: PfcFrame) -> None:
        for prio in range(8):
            if frame.enable_vector >> prio & 1:   # slots of disabled classes are ignored
                self.port.pause(prio, frame.quanta[prio])

    def deliver(self, pkt: RocePacket) -> None:
        if pkt.dest_qp == 1 and self.cm is not None:
            return self.cm.receive(pkt)
        qp = self.qps.get(pkt.dest_qp)
        if qp is None:
            return
        if pkt.ecn == 3 and pkt.is_data:
            self.truth.count("ce_received")
            self.ce_received += 1
            if not self.v1 and self.np.should_send(qp.qpn, self.sim.now):   # CNPs are RoCEv2's (A17.9)
                self._send_cnp(qp)
        qp.receive(pkt)

    def _send_cnp(self, qp) -> None:
        """A17.9.2: CNP to the sender's QP, BECN set, 16 reserved bytes, PSN 0."""
        cnp = RocePacket(src=self.index, dst=qp.peer, sport=qp.sport, pcp=self.cnp_pcp,
                         dscp=self.cnp_dscp, ecn=qp.ecn, opcode=ib.CNP, dest_qp=qp.peer_qpn,
                         psn=0, becn=True, ip_id=self.next_ip_id())
        self.truth.count("cnps_sent")
        self.truth.first("cnp_sent", BASE_TS_NS + self.sim.now // 1000)
        self.port.enqueue(cnp, self.cnp_pcp)


class ReceivePipeline:
    """NIC receive buffer drained toward host memory at `drain_gbps`; PFC XOFF above
    `xoff_bytes`, XON below `xon_bytes`. `stall(start, end)` stops draining altogether
    and keeps the priority paused (the classic stuck-NIC PFC storm)."""

    def __init__(self, host: Host, drain_gbps: float, xoff_bytes: int, xon_bytes: int, prio: int = 3,
                 lapse_ps: int | None = None):
        self.host, self.sim = host, host.sim
        self.drain_gbps, self.xoff_bytes, self.xon_bytes = drain_gbps, xoff_bytes, xon_bytes
        self.buffer: deque = deque()
        self.bytes = 0
        self.draining = False
        self.stalled = False
        self.pause = PauseSender(host.sim, host.port, host.mac, prio, host.truth, "host",
                                 lapse_ps=lapse_ps)

    def arrive(self, pkt) -> None:
        self.buffer.append(pkt)
        self.bytes += pkt.wire_bytes
        if self.bytes > self.xoff_bytes:
            self.pause.xoff()
        self._drain()

    def _drain(self) -> None:
        if self.draining or self.stalled or not self.buffer:
            return
        self.draining = True
        self.sim.after(serialisation_ps(self.buffer[0].wire_bytes, self.drain_gbps), self._drained)

    def _drained(self) -> None:
        self.draining = False
        pkt = self.buffer.popleft()
        self.bytes -= pkt.wire_bytes
        if self.bytes < self.xon_bytes and not self.stalled:
            self.pause.xon()
        self.host.deliver(pkt)
        self._drain()

    def stall(self, start_ps: int, end_ps: int) -> None:
        self.sim.at(start_ps, self._set_stalled, True)
        self.sim.at(end_ps, self._set_stalled, False)

    def _set_stalled(self, stalled: bool) -> None:
        self.stalled = stalled
        if stalled:
            self.pause.xoff()
        else:
            self._drain()
            if self.bytes < self.xon_bytes:
                self.pause.xon()
