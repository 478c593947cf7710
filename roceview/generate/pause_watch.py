"""The truth of what the pauses a host's link received should have held (PFC forensics).

A `PauseWatch` sits on one host NIC's port (Network.watch_pauses / pause_lag). It is told of every
PFC frame the NIC receives, when it arrives, and keeps the pause state a compliant NIC has
(802.1Qbb: the pause time runs from the frame's reception, a later frame for the same priority
replaces it, quanta 0 resumes): the paused periods per priority, each from the XOFF that began it.
As a tap it sees every frame the NIC starts to send, and records:

* `truth.pfc_violations`: each RoCE frame started on a priority a compliant NIC would hold, more
  than `bound_ps` after the XOFF that began the paused period arrived (a NIC slow to obey:
  Port.pause_lag_ps). Times are given at the NIC (`delay_ns`) and at a mirror on this host's link
  at the switch (`ts_ns`, `pause_ts_ns`, `capture_delay_ns`: the XOFF is copied as it leaves the
  switch, the frame as it arrives there), what an analyzer of that capture measures.
  `in_captured_pause`: the capture shows the frame inside the paused period too. A frame sent just
  before the XON reached the NIC is stamped after the XON's copy (which left the switch a cable
  earlier): a violation the capture point cannot show.
* `truth.victims`: each flow from this host held by a pause (its priority paused within the span
  from its first to its last frame) whose destination is not congested: the switch's queue toward
  it never reached the XON threshold (a queue that alone could keep an ingress paused), it drew
  no CE mark, and it sends no pause itself. Head-of-line blocking: its packets waited for another receiver's
  congestion. Paused time within its active span, at the NIC.
"""
from __future__ import annotations

from roceview.generate.capture_points import ip_text as _ip
from roceview.generate.frames import PfcFrame, RocePacket
from roceview.generate.simulator import BASE_TS_NS, PS_PER_NS, pause_quanta_ps, serialisation_ps


class PauseWatch:
    def __init__(self, net, port, bound_ps: int | None):
        self.port, self.truth, self.ips = port, net.truth, net.addr.ips
        self.bound_ps = bound_ps
        self.until = [0] * 8                    # a compliant NIC's pause end per priority
        self.since: list[int | None] = [None] * 8   # arrival of the XOFF that began the period
        self.periods: dict[int, list] = {}      # priority -> [(start, end)] ps, closed periods
        self.flows: dict[tuple, list] = {}      # (src, dst, dest QP, priority) -> [first, last, packets, bytes]
        self._pending: list = []                # (violation, priority, period start): its end not known yet
        # the XOFF's copy leaves the switch one PFC frame and one cable before it reaches the NIC
        self.pfc_lead_ps = serialisation_ps(PfcFrame(b"", 0, ()).wire_bytes, port.gbps) + port.prop_ps

    def pfc(self, prio: int, quanta: int, now: int) -> None:
        """A PFC frame's slot for `prio` arrived at the NIC."""
        self._close_expired(prio, now)
        if quanta == 0:
            if self.since[prio] is not None:
                self._close(prio, now)
            self.until[prio] = now
            return
        if self.since[prio] is None:
            self.since[prio] = now
        self.until[prio] = now + pause_quanta_ps(quanta, self.port.gbps)

    def _close_expired(self, prio: int, now: int) -> None:
        if self.since[prio] is not None and self.until[prio] <= now:
            self._close(prio, self.until[prio])

    def _close(self, prio: int, end: int) -> None:
        self.periods.setdefault(prio, []).append((self.since[prio], end))
        self.since[prio] = None

    def sent(self, frame, now: int, _port=None) -> None:
        """Tap: the NIC starts to send `frame`."""
        if not isinstance(frame, RocePacket):
            return
        key = (frame.src, frame.dst, frame.dest_qp, frame.pcp)
        flow = self.flows.setdefault(key, [now, now, 0, 0])
        flow[1], flow[2], flow[3] = now, flow[2] + 1, flow[3] + frame.frame_len
        since = self.since[frame.pcp]
        if (since is None or self.until[frame.pcp] <= now or self.bound_ps is None
                or now - since <= self.bound_ps):
            return
        self.truth.count("pfc_violation_frames")
        self.truth.pfc_violations.append(self._violation(frame, now, since))
        self._pending.append((self.truth.pfc_violations[-1], frame.pcp, since))

    def _violation(self, frame: RocePacket, now: int, since: int) -> dict:
        ts_ns = BASE_TS_NS + (now + self.port.prop_ps) // 1000       # as the capture stamps them
        pause_ts_ns = BASE_TS_NS + (since - self.pfc_lead_ps) // 1000
        return {"ts_ns": ts_ns, "src": _ip(self.ips[frame.src]), "dst": _ip(self.ips[frame.dst]),
                "dest_qp": frame.dest_qp, "psn": frame.psn, "opcode": frame.opcode, "priority": frame.pcp,
                "delay_ns": (now - since) // PS_PER_NS, "pause_ts_ns": pause_ts_ns,
                "capture_delay_ns": ts_ns - pause_ts_ns}

    def finish(self, net) -> None:
        """The run ended: close the open periods, list the victims."""
        for prio in range(8):
            if self.since[prio] is not None:
                self._close(prio, min(self.until[prio], net.sim.now))
        ends = {(p, start): end for p, spans in self.periods.items() for start, end in spans}
        for violation, prio, since in self._pending:
            shown_until = BASE_TS_NS + (ends[(prio, since)] - self.pfc_lead_ps) // 1000
            violation["in_captured_pause"] = violation["ts_ns"] < shown_until
        self.truth.pause_periods[self.port.name] = {
            str(p): [[BASE_TS_NS + s // 1000, BASE_TS_NS + e // 1000] for s, e in spans]
            for p, spans in sorted(self.periods.items())}
        congested = _congested(net)
        for (src, dst, qp, prio), (first, last, packets, nbytes) in sorted(self.flows.items()):
            paused = _overlap(self.periods.get(prio, ()), first, last)
            if paused and dst not in congested:
                self.truth.victims.append({
                    "src": _ip(self.ips[src]), "dst": _ip(self.ips[dst]), "dest_qp": qp, "priority": prio,
                    "first_ns": BASE_TS_NS + first // 1000, "last_ns": BASE_TS_NS + last // 1000,
                    "active_ns": (last - first) // PS_PER_NS, "paused_ns": paused // PS_PER_NS,
                    "packets": packets, "bytes": nbytes})


def _congested(net) -> set[int]:
    """Hosts whose traffic is the congestion: the switch's queue toward them reached XON, they drew
    CE marks, or they pause the switch themselves."""
    pausers = set(net.truth.pause_sources)
    deep = {dst for dst, peak in net.switch.peak_queue.items() if peak >= net.switch.s.xon_bytes}
    return deep | {h.index for h in net.hosts if h.ce_received or h.mac.hex(":") in pausers}


def _overlap(periods, first: int, last: int) -> int:
    return sum(max(0, min(end, last) - max(start, first)) for start, end in periods)

