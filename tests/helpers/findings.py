"""Hand-built captures for the issue-15 diagnoser tests: six hosts, RoCEv2 or RoCEv1 frames with
real ICRCs (or a deliberately broken one), PFC and 802.3x PAUSE frames."""
from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

from roceview.generate import ibta as ib
from roceview.generate.frames import Addressing, PfcFrame, RocePacket, pfc_frame, roce_frame

MACS = tuple(bytes.fromhex(f"0ec0de0000{0x10 + i:02x}") for i in range(6))
IPS = tuple(bytes([10, 0, 0, i + 1]) for i in range(6))
ADDR = Addressing(macs=MACS, ips=IPS)
SWITCH_MAC = bytes.fromhex("0e5c0000ff10")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "diagnose"))
from test_boundaries import Cap as BoundaryCap  # noqa: E402  (the diagnoser's boundary cases' builder)
SYN_ACK, SYN_NAK_SEQ = 0x1F, 0x60


def qp(src: int, dst: int) -> int:
    """The dest QP of flow src -> dst (each host pair one QP pair)."""
    return 0x100 | (dst << 4) | src


def _icrc_v1(grh: bytes, transport: bytes) -> bytes:
    """IBTA A16: the ICRC over 8 bytes of ones (the LRH), the GRH with TClass, Flow Label and Hop
    Limit set to ones, and the BTH with its reserved byte 4 set to ones."""
    masked = bytes([grh[0] | 0x0F, 0xFF, 0xFF, 0xFF]) + grh[4:7] + b"\xff" + grh[8:]
    bth = transport[:4] + b"\xff" + transport[5:]
    return struct.pack("<I", zlib.crc32(bth, zlib.crc32(masked, zlib.crc32(b"\xff" * 8))))


def _v1(frame: bytes, p: RocePacket, tclass: int) -> bytes:
    """The RoCEv2 frame re-encapsulated as RoCEv1: Ethertype 0x8915, a GRH with IPv4-mapped GIDs."""
    transport = frame[18 + 20 + 8:18 + 20 + 8 + 12 + p.ext_len + p.payload_len + (-p.payload_len % 4)]
    gid = lambda host: bytes(10) + b"\xff\xff" + IPS[host]   # noqa: E731
    grh = struct.pack("!IHBB", (6 << 28) | (tclass << 20), len(transport) + 4, 0x1B, 64) + gid(p.src) + gid(p.dst)
    tag = struct.pack("!HHH", 0x8100, (p.pcp << 13) | ADDR.vlan, 0x8915)
    out = MACS[p.dst] + MACS[p.src] + tag + grh + transport + _icrc_v1(grh, transport)
    return out + bytes(max(0, 64 - len(out)))


class Cap(BoundaryCap):
    """test_diagnose_boundaries' capture builder with six hosts, RoCEv1 and broken ICRCs."""

    def roce(self, src, dst, opcode, psn, payload=0, ecn=2, pcp=3, dscp=26, v1=False, bad_icrc=False,
             step=100, **kw) -> "Cap":
        p = RocePacket(src=src, dst=dst, sport=49152 + src, pcp=pcp, dscp=dscp, ecn=ecn, opcode=opcode,
                       dest_qp=qp(src, dst), psn=psn & 0xFFFFFF, payload_len=payload, **kw)
        frame = roce_frame(p, ADDR, bytes(payload))
        if v1:
            frame = _v1(frame, p, (dscp << 2) | ecn)
        if bad_icrc:
            end = len(frame) if v1 else 18 + 20 + 8 + 12 + p.ext_len + payload + (-payload % 4) + 4
            frame = frame[:end - 4] + bytes(b ^ 0xFF for b in frame[end - 4:end]) + frame[end:]
        return self._add(frame, step)

    def req(self, src, dst, psn, payload=1024, **kw) -> "Cap":
        return self.roce(src, dst, ib.RDMA_WRITE_ONLY, psn, payload, reth=(0x1000, 0x1234, payload), ackreq=True, **kw)

    def ack(self, src, dst, psn, syndrome=SYN_ACK, **kw) -> "Cap":
        return self.roce(src, dst, ib.ACKNOWLEDGE, psn, aeth=(syndrome, 1), **kw)

    def cnp(self, src, dst, **kw) -> "Cap":
        return self.roce(src, dst, ib.CNP, 0, becn=True, **kw)

    def pfc(self, quanta3=0xFFFF, mac=SWITCH_MAC, prio=3) -> "Cap":
        slots = [0] * 8
        slots[prio] = quanta3
        return self._add(pfc_frame(PfcFrame(mac, 1 << prio, tuple(slots))))

    def pause(self, quanta, mac=SWITCH_MAC) -> "Cap":
        frame = bytes.fromhex("0180c2000001") + mac + struct.pack("!HHH", 0x8808, 0x0001, quanta)
        return self._add(frame + bytes(60 - len(frame)))

    def _add(self, frame: bytes, step: int = 100) -> "Cap":
        super()._add(frame)
        self.t += step - 100
        return self


def listing(found) -> list[tuple[str, str]]:
    return [(f["severity"], f["kind"]) for f in found]


def one(found, kind) -> dict:
    hits = [f for f in found if f["kind"] == kind]
    assert len(hits) == 1, listing(found)
    return hits[0]
