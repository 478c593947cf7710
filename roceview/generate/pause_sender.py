"""Sending PFC pauses (IEEE 802.1Qbb): XOFF with the maximum pause time, refreshed before it
lapses while the buffer stays above its threshold, then XON (quanta 0) to resume at once.
Used by the switch (per ingress port and priority) and by a host NIC whose receive
pipeline cannot drain (slow receiver, or a stuck NIC: PFC storm). With `lapse_ps` the
refresh comes only that long after the previous pause ran out (a NIC that re-sends XOFF on a
timer equal to the pause time plus a little): a pause train that lapses between XOFFs."""
from __future__ import annotations

from roceview.generate.simulator import BASE_TS_NS, pause_quanta_ps
from roceview.generate.frames import PfcFrame

XOFF_QUANTA = 0xFFFF


class PauseSender:
    def __init__(self, sim, port, src_mac: bytes, prio: int, truth, source_kind: str,
                 refresh_fraction: float = 0.5, lapse_ps: int | None = None):
        self.sim, self.port, self.src_mac, self.prio = sim, port, src_mac, prio
        self.truth, self.source_kind = truth, source_kind
        pause_ps = pause_quanta_ps(XOFF_QUANTA, port.gbps)
        self.refresh_ps = int(pause_ps * refresh_fraction) if lapse_ps is None else pause_ps + lapse_ps
        self.active = False
        self._gen = 0

    def _frame(self, quanta: int) -> PfcFrame:
        slots = [0] * 8
        slots[self.prio] = quanta
        return PfcFrame(self.src_mac, 1 << self.prio, tuple(slots))

    def xoff(self) -> None:
        if self.active:
            return
        self.active = True
        self._gen += 1
        self._send_xoff(self._gen)

    def _send_xoff(self, gen: int) -> None:
        if gen != self._gen or not self.active:
            return
        self.port.send_control(self._frame(XOFF_QUANTA))
        self.truth.count("pfc_xoff_sent")
        self.truth.count(f"pfc_xoff_sent_prio{self.prio}")
        now_ns = BASE_TS_NS + self.sim.now // 1000
        self.truth.first("pfc_xoff_sent", now_ns)
        self.truth.first(f"pfc_xoff_sent_{self.source_kind}", now_ns)
        self.truth.pause_sources[self.src_mac.hex(":")] = self.source_kind
        self.sim.after(self.refresh_ps, self._send_xoff, gen)

    def xon(self) -> None:
        if not self.active:
            return
        self.active = False
        self._gen += 1
        self.port.send_control(self._frame(0))
        self.truth.count("pfc_xon_sent")
        self.truth.count(f"pfc_xon_sent_prio{self.prio}")
