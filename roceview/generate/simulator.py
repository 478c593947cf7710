"""Discrete-event core: a heap of (time, sequence, callback). Time is integer picoseconds
so that serialisation times at 100 Gb/s (80 ps per byte) stay exact and runs are
bit-for-bit deterministic."""
from __future__ import annotations

import heapq
from typing import Callable

PS_PER_NS = 1_000
PS_PER_US = 1_000_000
PS_PER_MS = 1_000_000_000
BASE_TS_NS = 1_700_000_000 * 10**9   # 2023-11-14T22:13:20Z: a fixed epoch keeps output reproducible


class Simulator:
    def __init__(self, until_ps: int):
        self.now = 0
        self.until = until_ps
        self._heap: list = []
        self._seq = 0

    def at(self, when: int, fn: Callable, *args) -> None:
        """Run fn(*args) at time `when` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn, args))

    def after(self, delay: int, fn: Callable, *args) -> None:
        self.at(self.now + delay, fn, *args)

    def run(self) -> None:
        heap = self._heap
        while heap and heap[0][0] <= self.until:
            self.now, _, fn, args = heapq.heappop(heap)
            fn(*args)


def serialisation_ps(wire_bytes: int, gbps: float) -> int:
    """Time to clock `wire_bytes` onto a link of `gbps` Gb/s, in ps."""
    return int(round(wire_bytes * 8 * 1000 / gbps))


def pause_quanta_ps(quanta: int, gbps: float) -> int:
    """802.1Qbb pause time: one quantum = 512 bit times at the link speed."""
    return int(round(quanta * 512 * 1000 / gbps))
