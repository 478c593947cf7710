"""Capture points other than one mirror with one clock, for the capture-path scenarios
(scenarios_capture.py). The mirror (mirror.py) hands every copy it takes to its `points`, which
say when, and as what bytes, the capture file records it: the simulator's events stay those of
the scenario whose traffic is captured, only the capture changes.

* `TwoPoints`: a second mirror, on the other leaf, writes into the same capture file. Each RoCE
  frame is recorded twice, byte-identical at the RoCE level (IP ID, UDP source port, ICRC) but
  for the IPv4 TTL: the copy taken further downstream has crossed one more routed hop (TTL - 1,
  header checksum recomputed; the ICRC masks both, IBTA A17.4.1). The receiver leaf's copy of a
  sender -> receiver frame comes `offsets_ns[0]` after the sender leaf's, of a receiver -> sender
  frame `offsets_ns[1]` after it (negative: earlier, that leaf passes it first). Unequal offsets
  are a path of (offsets_ns[0] - offsets_ns[1]) / 2 each way seen by clocks (offsets_ns[0] +
  offsets_ns[1]) / 2 apart, or an asymmetric path: the capture alone cannot tell which; the
  scenario gives `path_ns` (the fabric it simulates) for the record. PFC and LLDP frames are
  link-local: one copy.
* `SkewedTap`: a TAP on one link whose two directions are stamped by two capture ports whose
  clocks disagree: the direction carrying the receiver side's frames is stamped `skew_ns` off
  true time, the other one true. Each frame is recorded once.

Both count, per flow, what one capture point shows (`FlowCounts`: the numbers an analyzer should
report once it tells the points apart) and write them with the points' layout to
`truth.capture_points` when the run ends.
"""
from __future__ import annotations

import struct

from roceview.generate import ibta as ib
from roceview.generate.frames import RocePacket, ipv4_checksum
from roceview.generate.simulator import PS_PER_NS

NAK_CLASS = 3                  # AETH syndrome bits 6:5 = 11: NAK (IBTA 9.3.5 Table 42)
RESPONSE_OPCODES = {ib.ACKNOWLEDGE, *ib.READ_RESPONSE_OPCODES}


def ip_text(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)


def ttl_minus_one(frame: bytes) -> bytes:
    """The frame one routed hop further: IPv4 TTL - 1, the header checksum recomputed. A frame
    that is not IPv4 (RoCEv1, PFC, LLDP: never routed) comes back as it was."""
    ip = 18 if frame[12:14] == b"\x81\x00" else 14
    if frame[ip - 2:ip] != b"\x08\x00":
        return frame
    end = ip + (frame[ip] & 0x0F) * 4
    header = bytearray(frame[ip:end])
    header[8] -= 1
    header[10:12] = b"\0\0"
    header[10:12] = struct.pack("!H", ipv4_checksum(bytes(header)))
    return frame[:ip] + bytes(header) + frame[end:]


def nearest_rank(values: list[int], pct: float) -> int:
    """The nearest-rank percentile (an actual sample, as the analyzer's RTT percentiles)."""
    ordered = sorted(values)
    return ordered[max(-(-len(ordered) * pct // 100), 1) - 1]


class FlowCounts:
    """What one capture point shows per flow (`SRC>DST:0xQPN`, the analyzer's flow name):
    packets, data packets, NAKs, resent packets (a data packet whose PSN the flow carried before)
    and RTT samples, the analyzer's rule (roceview/analysis/rtt.py): a request with AckReq to the
    first ACK, NAK or READ response that covers it (a NAK only the PSNs before its own), none from
    a PSN sent again before that (Karn). RTT is kept in true time and as stamped (nanoseconds, as
    the capture file has them)."""

    def __init__(self, net):
        self.ips, self.truth = net.addr.ips, net.truth
        self.flows: dict[str, dict] = {}
        self._psns: dict[str, set] = {}
        self._pending: dict[str, list] = {}     # request flow -> [PSN, true ns, stamped ns, clean]
        self._rtt: dict[str, list] = {}         # request flow -> [(true ns, stamped ns)]
        self._responder_qpn: dict[int, int] | None = None   # requester QPN -> its peer's

    def _name(self, src: int, dst: int, qp: int) -> str:
        return f"{ip_text(self.ips[src])}>{ip_text(self.ips[dst])}:0x{qp:06x}"

    def see(self, pkt: RocePacket, true_ps: int, stamped_ps: int) -> None:
        name = self._name(pkt.src, pkt.dst, pkt.dest_qp)
        flow = self.flows.setdefault(name, {"packets": 0, "data_packets": 0, "naks": 0, "resent": 0})
        flow["packets"] += 1
        true_ns, stamped_ns = true_ps // PS_PER_NS, stamped_ps // PS_PER_NS
        if pkt.opcode == ib.ACKNOWLEDGE and pkt.aeth[0] >> 5 == NAK_CLASS:
            flow["naks"] += 1
        if pkt.opcode in RESPONSE_OPCODES:
            self._answer(pkt, true_ns, stamped_ns)
        if not pkt.is_data:
            return
        flow["data_packets"] += 1
        seen = self._psns.setdefault(name, set())
        pending = self._pending.setdefault(name, [])
        if pkt.psn in seen:
            flow["resent"] += 1
            for entry in pending:
                if entry[0] == pkt.psn:
                    entry[3] = False
            return
        seen.add(pkt.psn)
        if pkt.ackreq and pkt.opcode <= ib.RDMA_READ_REQUEST:
            pending.append([pkt.psn, true_ns, stamped_ns, True])

    def _answer(self, pkt: RocePacket, true_ns: int, stamped_ns: int) -> None:
        if self._responder_qpn is None:     # every QP is connected before the run starts
            self._responder_qpn = {q["requester_qpn"]: q["responder_qpn"] for q in self.truth.qps}
        responder_qpn = self._responder_qpn.get(pkt.dest_qp)
        if responder_qpn is None:
            return
        name = self._name(pkt.dst, pkt.src, responder_qpn)
        # a NAK's PSN is the one it asks for again: it covers only the requests before it
        last = pkt.psn - 1 if pkt.opcode == ib.ACKNOWLEDGE and pkt.aeth[0] >> 5 == NAK_CLASS else pkt.psn
        keep = []
        for entry in self._pending.get(name, ()):
            if (last - entry[0]) & ib.PSN_MASK >= 1 << 23:
                keep.append(entry)          # after the response's PSN: not covered yet
            elif entry[3]:
                self._rtt.setdefault(name, []).append((true_ns - entry[1], stamped_ns - entry[2]))
        self._pending[name] = keep

    def record(self) -> dict:
        """Per flow counts, and where a flow has RTT samples their count and true / stamped p50;
        all flows' samples pooled under "rtt"."""
        flows = {name: dict(counts) for name, counts in sorted(self.flows.items())}
        pooled = []
        for name, samples in self._rtt.items():
            pooled += samples
            flows[name].update(_rtt(samples))
        return {"flows": flows, "rtt": _rtt(pooled)}


def _rtt(samples: list[tuple[int, int]]) -> dict:
    if not samples:
        return {"rtt_samples": 0}
    return {"rtt_samples": len(samples), "rtt_p50_ns": nearest_rank([s[0] for s in samples], 50),
            "rtt_p50_ns_as_stamped": nearest_rank([s[1] for s in samples], 50)}


class _Points:
    """The layout both kinds share: the network, the mirrored side (from truth.mirror, set before
    the scenario is built), which ports are the hosts' (frames on them leave a host), and the
    sender and receiver host whose direction names the record uses."""

    def __init__(self, net, senders, receivers):
        if len(senders) != 1 or len(receivers) != 1:
            raise ValueError("capture points are modelled between one sender and one receiver host")
        self.truth = net.truth
        self.counts = FlowCounts(net)
        self.host_ports = {h.port for h in net.hosts}
        self.at_sender = net.truth.mirror == "sender"
        ips = [ip_text(net.addr.ips[h]) for h in (senders[0], receivers[0])]
        self.forward_name, self.backward_name = f"{ips[0]}>{ips[1]}", f"{ips[1]}>{ips[0]}"
        self.frames = self.link_local = 0

    def forward(self, port) -> bool:
        """The frame travels from the sender side to the receiver side."""
        return (port in self.host_ports) == self.at_sender

    def finish(self) -> None:
        """Called by the mirror when the run is over: the record goes to the truth."""
        self.truth.capture_points = {**self.layout(), "frames_per_point": self.frames,
                                     "link_local_frames": self.link_local, **self.counts.record()}


class TwoPoints(_Points):
    def __init__(self, net, senders, receivers, offsets_ns: tuple[int, int], path_ns: int):
        super().__init__(net, senders, receivers)
        self.offsets_ns, self.path_ns = offsets_ns, path_ns

    def stamp(self, frame, port, ts_ps: int, data: bytes) -> list[tuple[int, bytes]]:
        self.frames += 1
        if not isinstance(frame, RocePacket):    # link-local: the other leaf never sees it
            self.link_local += 1
            return [(ts_ps, data)]
        self.counts.see(frame, ts_ps, ts_ps)
        forward = self.forward(port)
        offset = self.offsets_ns[0 if forward else 1] * PS_PER_NS   # receiver leaf - sender leaf
        sender_leaf, receiver_leaf = (ts_ps, ts_ps + offset) if self.at_sender else (ts_ps - offset, ts_ps)
        if forward:
            return [(sender_leaf, data), (receiver_leaf, ttl_minus_one(data))]
        return [(receiver_leaf, data), (sender_leaf, ttl_minus_one(data))]

    def layout(self) -> dict:
        return {"points": ["sender-leaf mirror", "receiver-leaf mirror"], "copies_per_frame": 2,
                # the mirror the simulator feeds: flows and rtt are its (both points see the same frames)
                "near_point": "sender-leaf mirror" if self.at_sender else "receiver-leaf mirror",
                "offsets_ns": {self.forward_name: self.offsets_ns[0], self.backward_name: self.offsets_ns[1]},
                "offsets_are": "receiver-leaf copy minus sender-leaf copy, per direction",
                "path_ns": self.path_ns, "clock_offset_ns": sum(self.offsets_ns) // 2,
                "clock_offset_is": "receiver leaf's clock minus sender leaf's",
                "ttl": "the downstream copy's IPv4 TTL is one less (header checksum recomputed)"}


class SkewedTap(_Points):
    def __init__(self, net, senders, receivers, skew_ns: int):
        super().__init__(net, senders, receivers)
        self.skew_ns = skew_ns

    def stamp(self, frame, port, ts_ps: int, data: bytes) -> list[tuple[int, bytes]]:
        self.frames += 1
        at = ts_ps if self.forward(port) else ts_ps + self.skew_ns * PS_PER_NS
        if isinstance(frame, RocePacket):
            self.counts.see(frame, ts_ps, at)
        else:
            self.link_local += 1
        return [(at, data)]

    def layout(self) -> dict:
        return {"points": ["TAP on the " + ("sender's" if self.at_sender else "receiver's") + " link"],
                "copies_per_frame": 1,
                "clock_skew_ns": {self.forward_name: 0, self.backward_name: self.skew_ns},
                "clock_skew_is": "stamped minus true time of the frames in that direction"}
