"""Transforms of a capture whose right answer is known from the untransformed one, for the
metamorphic tests (tests/diagnose/test_metamorphic.py): pcap records in, pcap records out.

Frames are parsed only as far as a transform needs (Ethernet, one VLAN tag, IPv4, UDP 4791,
BTH); anything else passes through untouched. A transform that edits a RoCEv2 header field the
ICRC covers (the UDP source port) recomputes the ICRC (IBTA A17.4.1), or the edit would read as a
corrupted frame instead of the change it stands for.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roceview.generate.frames import PfcFrame, icrc, pfc_frame

NS_MAGIC, US_MAGIC = 0xA1B23C4D, 0xA1B2C3D4


@dataclass
class Record:
    ts: int                  # ns
    frame: bytes


def read_pcap(path) -> tuple[int, list[Record]]:
    """(link type, records) of a classic pcap (µs or ns timestamps)."""
    data = Path(path).read_bytes()
    magic, _, _, _, _, _, link = struct.unpack("<IHHiIII", data[:24])
    scale = 1 if magic == NS_MAGIC else 1000
    out, pos = [], 24
    while pos + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack("<IIII", data[pos:pos + 16])
        out.append(Record(sec * 1_000_000_000 + frac * scale, data[pos + 16:pos + 16 + caplen]))
        pos += 16 + caplen
    return link, out


def write_pcap(path, link: int, records: list[Record]) -> Path:
    """A nanosecond pcap of the records in time order (stable: equal times keep their order)."""
    parts = [struct.pack("<IHHiIII", NS_MAGIC, 2, 4, 0, 0, 262144, link)]
    for r in sorted(records, key=lambda r: r.ts):
        parts.append(struct.pack("<IIII", r.ts // 1_000_000_000, r.ts % 1_000_000_000, len(r.frame), len(r.frame)))
        parts.append(r.frame)
    Path(path).write_bytes(b"".join(parts))
    return Path(path)


@dataclass
class RoceV2:
    """Where a RoCEv2-over-IPv4 frame's headers start, and its flow's key."""
    ip: int
    udp: int
    bth: int
    end: int                 # end of the UDP payload (ICRC included)
    pcp: int                 # -1: untagged
    src: bytes
    dst: bytes
    dest_qp: int
    psn: int
    opcode: int


def roce_v2(frame: bytes) -> RoceV2 | None:
    pos, pcp = 12, -1
    etype = struct.unpack("!H", frame[pos:pos + 2])[0]
    if etype == 0x8100:
        pcp = frame[14] >> 5
        pos += 4
        etype = struct.unpack("!H", frame[pos:pos + 2])[0]
    ip = pos + 2
    if etype != 0x0800 or len(frame) < ip + 40 or frame[ip + 9] != 17:
        return None
    udp = ip + (frame[ip] & 0x0F) * 4
    if struct.unpack("!H", frame[udp + 2:udp + 4])[0] != 4791:
        return None
    bth = udp + 8
    end = ip + struct.unpack("!H", frame[ip + 2:ip + 4])[0]
    psn = int.from_bytes(frame[bth + 9:bth + 12], "big")
    qp = int.from_bytes(frame[bth + 5:bth + 8], "big")
    return RoceV2(ip, udp, bth, end, pcp, frame[ip + 12:ip + 16], frame[ip + 16:ip + 20], qp, psn, frame[bth])


def _icrc(frame: bytes, r: RoceV2) -> bytes:
    return icrc(frame[r.ip:r.udp], frame[r.udp:r.udp + 8], frame[r.bth:r.end - 4])


# ---- the transforms --------------------------------------------------------------------------
def second_capture_point(records: list[Record], offset_ns: int) -> list[Record]:
    """Every frame seen again at another capture point, offset_ns later (earlier if < 0)."""
    return records + [Record(r.ts + offset_ns, r.frame) for r in records]


def swap_adjacent(records: list[Record], every: int = 7) -> list[Record]:
    """Every `every`-th pair of consecutive RC/UC request packets of one flow (PSNs n and n+1,
    nothing lost) arrives in the other order: n+1 first, n right after it."""
    out = list(records)
    last: dict[tuple, int] = {}
    seen: dict[tuple, int] = {}       # per flow: never its first two packets (no gap shows then)
    for i, r in enumerate(out):
        h = roce_v2(r.frame)
        if h is None or not (h.opcode < 0x0D or 0x13 <= h.opcode < 0x40):
            continue          # requests only: READ responses, ACKs and CNPs (0x81) keep their order
        key = (h.src, h.dst, h.dest_qp)
        j = last.get(key)
        last[key] = i
        if j is None or (roce_v2(out[j].frame).psn + 1) & 0xFFFFFF != h.psn:
            continue
        seen[key] = seen.get(key, 0) + 1
        if seen[key] % every == 0:
            out[j], out[i] = Record(out[j].ts, r.frame), Record(r.ts, out[j].frame)
    return out


def shift_direction(records: list[Record], src: bytes, shift_ns: int) -> list[Record]:
    """The frames sent by the host `src` (IPv4 source) stamped shift_ns later: a TAP whose two
    directions' clocks disagree."""
    out = []
    for r in records:
        h = roce_v2(r.frame)
        out.append(Record(r.ts + shift_ns, r.frame) if h is not None and h.src == src else r)
    return out


def pfc_frames(records: list[Record], prio: int, count: int = 20, mac: bytes = bytes.fromhex("0e5c0000ffee")) -> list[Record]:
    """`count` XOFF (then XON 1 µs later) PFC frames on priority `prio`, spread over the capture."""
    if not records:
        return records
    start, end = records[0].ts, records[-1].ts
    out = list(records)
    for k in range(count):
        t = start + (end - start) * k // max(count, 1)
        for quanta, dt in ((0xFFFF, 0), (0, 1000)):
            slots = [0] * 8
            slots[prio] = quanta
            out.append(Record(t + dt, pfc_frame(PfcFrame(mac, 1 << prio, tuple(slots)))))
    return out


def drop_random(records: list[Record], share: float, seed: int = 0) -> list[Record]:
    """Each RoCE frame missed by the capture with probability `share` (a mirror dropping copies)."""
    rng = np.random.default_rng(seed)
    keep = rng.random(len(records)) >= share
    return [r for r, k in zip(records, keep.tolist()) if k or roce_v2(r.frame) is None]


def new_source_ports(records: list[Record], seed: int = 0) -> list[Record]:
    """Halfway through the capture every RoCEv2 flow moves to another UDP source port (a path
    change: the requester rehashes onto another ECMP path); the ICRC is recomputed."""
    if not records:
        return records
    middle = records[len(records) // 2].ts
    out = []
    for r in records:
        h = roce_v2(r.frame)
        if h is None or r.ts < middle:
            out.append(r)
            continue
        port = struct.unpack("!H", r.frame[h.udp:h.udp + 2])[0]
        frame = r.frame[:h.udp] + struct.pack("!H", 49152 + (port * 7 + seed) % 16384) + r.frame[h.udp + 2:]
        frame = frame[:h.end - 4] + _icrc(frame, h) + frame[h.end:]
        out.append(Record(r.ts, frame))
    return out


def priorities(records: list[Record]) -> set[int]:
    """The PCPs (or DSCP >> 3 when untagged) RoCE frames travel on."""
    out = set()
    for r in records:
        h = roce_v2(r.frame)
        if h is not None:
            out.add(h.pcp if h.pcp >= 0 else r.frame[h.ip + 1] >> 5)
    return out
