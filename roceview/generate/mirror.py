"""The capture point: a switch port mirror (SPAN) of both directions of some links.

"sender" side mirrors the senders' links (before the switch's queues and loss point),
"receiver" side the receiver's link (after them). Every frame crosses exactly one
mirrored link, so nothing is captured twice. The mirror has its own output port: copies of
both directions share `gbps`, and what does not fit in `buffer_bytes` is dropped by the
mirror alone (oversubscribed SPAN), which the endpoints never notice.
"""
from __future__ import annotations

import numpy as np

from roceview.generate.engine import serialisation_ps
from roceview.generate.frames import Addressing, PfcFrame, pfc_frame, roce_frame


class Mirror:
    def __init__(self, addr: Addressing, rng: np.random.Generator, drop_record,
                 gbps: float | None = None, buffer_bytes: int = 0):
        self.addr, self.drop_record = addr, drop_record
        self.gbps, self.buffer_bytes = gbps, buffer_bytes
        self.records: list[tuple[int, int, bytes]] = []
        self._free_at = 0
        self._payload = rng.integers(0, 256, 8192, dtype=np.uint8).tobytes()

    def attach(self, port, at_far_end: bool) -> None:
        """Mirror frames leaving `port`; `at_far_end`: the copy is taken after the cable."""
        offset = port.prop_ps if at_far_end else 0
        port.taps.append(lambda frame, now, _port: self.copy(frame, now + offset))

    def copy(self, frame, ts_ps: int) -> None:
        if self.gbps and self._overflow(frame, ts_ps):
            return self.drop_record("mirror", frame, ts_ps)
        self.records.append((ts_ps, len(self.records), self._bytes(frame)))

    def _overflow(self, frame, ts_ps: int) -> bool:
        backlog_bytes = max(0, self._free_at - ts_ps) * self.gbps / 8000
        if backlog_bytes + frame.wire_bytes > self.buffer_bytes:
            return True
        self._free_at = max(self._free_at, ts_ps) + serialisation_ps(frame.wire_bytes, self.gbps)
        return False

    def _bytes(self, frame) -> bytes:
        if isinstance(frame, PfcFrame):
            return pfc_frame(frame)
        start = (frame.psn * 61) % 4096
        return roce_frame(frame, self.addr, self._payload[start:start + frame.payload_len])

    def frames(self, base_ns: int):
        """(concatenated uint8 frames, lengths, ts_ns) in capture order."""
        recs = sorted(self.records)
        data = b"".join(r[2] for r in recs)
        lengths = np.fromiter((len(r[2]) for r in recs), dtype=np.int64, count=len(recs))
        ts = np.fromiter((base_ns + r[0] // 1000 for r in recs), dtype=np.int64, count=len(recs))
        return np.frombuffer(data, dtype=np.uint8), lengths, ts
