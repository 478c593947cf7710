"""A transmitting end of a full-duplex link: priority queues, PFC pause state, taps.

Frames already queued or pulled from a `source` are clocked out one at a time at the link
rate; a PFC frame received by this port's owner pauses a priority (802.1Qbb 36.2): the
frame in flight completes, later frames of that priority wait. MAC control frames are
never paused and go first. Queues are served round-robin among priorities (equal-weight
DWRR, as switches commonly configure lossless classes).

`pause_lag_ps` (a NIC that is slow to obey, or ignores PFC for a while: Network.pause_lag) acts on
each received PFC frame that long after it arrived; the pause still ends when it would have
(arrival + pause time). `watch`, when set (pause_watch.PauseWatch), is told of each PFC frame at
its arrival: the pause state a compliant port would have, for the truth.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

from roceview.generate.simulator import Simulator, pause_quanta_ps, serialisation_ps
from roceview.generate.frames import PfcFrame


class Port:
    def __init__(self, sim: Simulator, name: str, gbps: float, prop_ps: int):
        self.sim, self.name, self.gbps, self.prop_ps = sim, name, gbps, prop_ps
        self.queues: dict[int, deque] = {}
        self.queued_bytes: dict[int, int] = {}
        self.control: deque = deque()
        self.paused_until = [0] * 8
        self.busy_until = 0
        self.deliver: Callable = lambda frame: None   # the far end's receive()
        self.source = None            # object with pull(now, allowed) -> (frame | None, wake_ps)
        self.on_dequeue: Callable = lambda frame: None
        self.taps: list[Callable] = []  # mirror callbacks: tap(frame, ts_ps, port)
        self._rr = 0
        self._wake_at = None
        self.pause_lag_ps = 0
        self.watch = None

    # ---- queueing -------------------------------------------------------------------------
    def enqueue(self, frame, prio: int) -> None:
        self.queues.setdefault(prio, deque()).append(frame)
        self.queued_bytes[prio] = self.queued_bytes.get(prio, 0) + frame.wire_bytes
        self.kick()

    def send_control(self, frame: PfcFrame) -> None:
        self.control.append(frame)
        self.kick()

    def pause(self, prio: int, quanta: int) -> None:
        """Apply one class slot of a received PFC frame (quanta 0 resumes at once)."""
        if self.watch is not None:
            self.watch.pfc(prio, quanta, self.sim.now)
        if self.pause_lag_ps:
            self.sim.after(self.pause_lag_ps, self._apply_pause, prio, quanta, self.sim.now)
        else:
            self._apply_pause(prio, quanta, self.sim.now)

    def _apply_pause(self, prio: int, quanta: int, arrived: int) -> None:
        """The pause runs from the frame's arrival: a late NIC obeys for what is left of it."""
        self.paused_until[prio] = arrived + pause_quanta_ps(quanta, self.gbps)
        if quanta:
            self.sim.at(self.paused_until[prio], self.kick)
        else:
            self.kick()

    def is_paused(self, prio: int) -> bool:
        return self.paused_until[prio] > self.sim.now

    # ---- transmission ---------------------------------------------------------------------
    def kick(self) -> None:
        now = self.sim.now
        if self.busy_until > now:
            return
        frame, prio = self._next_frame()
        if frame is None:
            return
        ser = serialisation_ps(frame.wire_bytes, self.gbps)
        self.busy_until = now + ser
        for tap in self.taps:
            tap(frame, now, self)
        self.sim.at(now + ser + self.prop_ps, self.deliver, frame)
        self.sim.at(now + ser, self.kick)

    def _next_frame(self):
        if self.control:
            return self.control.popleft(), None
        now = self.sim.now
        allowed = [p for p, until in enumerate(self.paused_until) if until <= now]
        frame, prio = self._from_queues(allowed)
        if frame is None and self.source is not None:
            frame, wake = self.source.pull(self.sim.now, allowed)
            if frame is None and wake is not None:
                self.wake_at(wake)
        return frame, prio

    def _from_queues(self, allowed):
        ready = [p for p in sorted(self.queues) if self.queues[p] and p in allowed]
        if not ready:
            return None, None
        prio = next((p for p in ready if p > self._rr), ready[0])
        self._rr = prio
        frame = self.queues[prio].popleft()
        self.queued_bytes[prio] -= frame.wire_bytes
        self.on_dequeue(frame)
        return frame, prio

    def wake_at(self, when: int) -> None:
        if self._wake_at is not None and self.sim.now < self._wake_at <= when:
            return
        self._wake_at = when
        self.sim.at(when, self.kick)
