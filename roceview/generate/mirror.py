"""The capture point: a switch port mirror (SPAN) of both directions of some links.

"sender" side mirrors the senders' links (before the switch's queues and loss point),
"receiver" side the receiver's link (after them). Every frame crosses exactly one
mirrored link, so the taps capture nothing twice. The mirror has its own output port: copies of
both directions share `gbps`, and what does not fit in `buffer_bytes` is dropped by the
mirror alone (oversubscribed SPAN), which the endpoints never notice.

Two faults of the capture path only, which the endpoints never see either:
* `copies` = 2: two mirror sessions (or ingress + egress mirroring) replicate every frame to
  the same capture port, which clocks the replicas out back to back: each frame is captured
  twice, byte-identical, one serialisation time (< 1 us) apart.
* `corrupt_prob`: the mirror / capture NIC flips one payload bit of a data packet's copy; the
  ICRC of that copy no longer matches while the endpoints received (and ACKed) a good frame.

`zero_ids` renders frames as senders that leave the IPv4 identification 0 send them (DF set;
some NICs for their CNPs, some soft-RoCE set-ups for everything): "cnp" the CNPs, "all" every
RoCE frame, "" (the default) as the hosts numbered them. Without an identification a CNP's
copies are byte-identical to a second CNP to the same QP (PSN 0): the analysis counts such a
copy as a CNP of its own (analysis/copies.py).

Each mirrored link can have its own `Addressing` (`attach(..., addr=)`): on a routed ToR
(NetworkSettings.routed) a frame carries the MACs of the link it crosses, host NIC and switch
port, not the two hosts' (and one TTL less once routed): each copy is rendered as it was on the
link it was taken from.

`points` (capture_points.py), when a scenario sets it, says when and as what bytes each copy is
recorded: a second mirror on another leaf, or a TAP whose directions' clocks disagree.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from roceview.generate import ibta as ib
from roceview.generate.simulator import serialisation_ps
from roceview.generate.frames import Addressing, LldpFrame, PfcFrame, RocePacket, lldp_frame, pfc_frame, roce_frame

REPLICA_GBPS = 100.0     # the capture port's rate when `gbps` is not modelled


class Mirror:
    def __init__(self, addr: Addressing, rng: np.random.Generator, drop_record,
                 gbps: float | None = None, buffer_bytes: int = 0, copies: int = 1,
                 corrupt_prob: float = 0.0, corrupt_record=None):
        self.addr, self.rng, self.drop_record = addr, rng, drop_record
        self.gbps, self.buffer_bytes = gbps, buffer_bytes
        self.copies, self.corrupt_prob, self.corrupt_record = copies, corrupt_prob, corrupt_record
        self.records: list[tuple[int, int, bytes]] = []
        self.sources: list = []          # the frame object of each record (the operations' truth)
        self.points = None      # capture_points.TwoPoints / SkewedTap; None: recorded here and now
        self.zero_ids = ""      # "cnp" / "all": frames rendered with IPv4 identification 0
        self._free_at = 0
        self._payload = rng.integers(0, 256, 8192, dtype=np.uint8).tobytes()

    def attach(self, port, at_far_end: bool, addr: Addressing | None = None) -> None:
        """Mirror frames leaving `port`; `at_far_end`: the copy is taken after the cable; `addr`:
        the link's addressing (None: the network's)."""
        offset = port.prop_ps if at_far_end else 0
        port.taps.append(lambda frame, now, _port: self.copy(frame, now + offset, port, addr))

    def copy(self, frame, ts_ps: int, port=None, addr: Addressing | None = None) -> None:
        """Copy `frame`, leaving `port`, taken at ts_ps, rendered with `addr` (None: the network's)."""
        data = None
        for k in range(self.copies):   # replicas leave the capture port back to back
            at = ts_ps + k * serialisation_ps(frame.wire_bytes, self.gbps or REPLICA_GBPS)
            if self.gbps and self._overflow(frame, at):
                self.drop_record("mirror", frame, at)
                continue
            data = data or self._bytes(frame, addr or self.addr)
            self._keep(frame, port, at, self._corrupted(frame, data, at))

    def _keep(self, frame, port, ts_ps: int, data: bytes) -> None:
        stamped = [(ts_ps, data)] if self.points is None else self.points.stamp(frame, port, ts_ps, data)
        for at, copy in stamped:
            self.records.append((at, len(self.records), copy))
            self.sources.append(frame)

    def _corrupted(self, frame, data: bytes, ts_ps: int) -> bytes:
        """One bit of the payload flipped in this copy only (the rng is drawn only when the
        fault is on, so other scenarios' streams stay as they were)."""
        if self.corrupt_prob <= 0 or not isinstance(frame, RocePacket) or frame.payload_len < 1:
            return data
        if self.rng.random() >= self.corrupt_prob:
            return data
        at = len(data) - 4 - (-frame.payload_len % 4) - 1 - int(self.rng.integers(0, frame.payload_len))
        self.corrupt_record(frame, ts_ps)
        return data[:at] + bytes([data[at] ^ 1 << int(self.rng.integers(0, 8))]) + data[at + 1:]

    def _overflow(self, frame, ts_ps: int) -> bool:
        backlog_bytes = max(0, self._free_at - ts_ps) * self.gbps / 8000
        if backlog_bytes + frame.wire_bytes > self.buffer_bytes:
            return True
        self._free_at = max(self._free_at, ts_ps) + serialisation_ps(frame.wire_bytes, self.gbps)
        return False

    def _bytes(self, frame, addr: Addressing) -> bytes:
        if isinstance(frame, PfcFrame):
            return pfc_frame(frame)
        if isinstance(frame, LldpFrame):
            return lldp_frame(frame)
        if self.zero_ids == "all" or (self.zero_ids == "cnp" and frame.opcode == ib.CNP):
            frame = dataclasses.replace(frame, ip_id=0)
        if frame.data is not None:
            return roce_frame(frame, addr, frame.data)
        start = (frame.psn * 61) % 4096
        return roce_frame(frame, addr, self._payload[start:start + frame.payload_len])

    def captured(self, base_ns: int) -> dict:
        """id(frame object) -> (frame number, 1-based, ts_ns) of its first capture, in the order
        `frames` writes them (call after the run)."""
        out: dict[int, tuple[int, int]] = {}
        for number, (at, seq, _) in enumerate(sorted(self.records), start=1):
            out.setdefault(id(self.sources[seq]), (number, base_ns + at // 1000))
        return out

    def frames(self, base_ns: int):
        """(concatenated uint8 frames, lengths, ts_ns) in capture order, at the end of the run."""
        if self.points is not None:
            self.points.finish()
        recs = sorted(self.records)
        data = b"".join(r[2] for r in recs)
        lengths = np.fromiter((len(r[2]) for r in recs), dtype=np.int64, count=len(recs))
        ts = np.fromiter((base_ns + r[0] // 1000 for r in recs), dtype=np.int64, count=len(recs))
        return np.frombuffer(data, dtype=np.uint8), lengths, ts
