"""CM MADs of every kind (REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR, SIDR_REQ, SIDR_REP)
crafted with the scapy layers derived from dissectors/cm.py, over RoCEv2 (IPv4 and IPv6),
RoCEv1 and native InfiniBand (LRH, LRH+GRH in ERF), written into a pcapng at test time.

Every field that is not reserved gets a distinct non-zero value (so a field read at the wrong
offset shows), reserved bits stay zero (IBTA: sent as 0); bytes fields get a pattern. Each
frame's `fields` are the values written, by (message short name, field name)."""
from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from dissectors import cm
from dissectors import scapy_layers as S

GSI_QKEY = 0x80010000
TS0 = 1_700_000_100_000_000_000
TRANSPORTS = ("rocev2-ipv4", "rocev2-ipv6", "rocev1", "ib-lrh", "ib-grh")


@dataclass
class CMFrame:
    data: bytes
    transport: str
    message: str                     # REQ, REP, ...
    fields: dict = field(default_factory=dict)    # field name -> value written (ints, bytes, text)
    ip_cm: dict | None = None        # the REQ's IP CM private data fields, when it has them
    mad: bytes = b""                 # the 256-byte MAD as written (byte-by-byte checks)


def _value(header, f, k: int):
    """A distinct non-zero value for field f (k: the frame's number): reserved bits zero."""
    if f.name.startswith("reserved") or "_reserved" in f.name:
        return b"\0" * (f.bits // 8) if f.kind == "bytes" else 0
    seed = (zlib.crc32(f"{header.name}.{f.name}".encode()) & 0xFFFF) + 977 * k
    if f.kind == "bytes":
        return bytes((seed + 31 * i) % 251 + 1 for i in range(f.bits // 8))
    if f.kind == "ipv6":
        return str(ipaddress.IPv6Address((0xFE80 << 112) | (seed << 16) | k + 1))
    top = (1 << f.bits) - 1
    return (seed * 2654435761) % top + 1 if top > 1 else 1


def _message(message: str, k: int, overrides: dict) -> tuple[object, dict]:
    header = cm.MESSAGES[cm.ATTR[message]].header
    values = {f.name: _value(header, f, k) for f in header.fields}
    values.update(overrides)
    return S.CM_CLASSES[message](**values), values


def _transport(kind: str, upper, k: int) -> tuple[bytes, int]:
    """(frame bytes, pcapng interface: 0 Ethernet, 1 ERF)."""
    bth = S.BTH(opcode=0x64, destqp=cm.GSI_QP, psn=k, pkey=0xFFFF)
    deth = S.DETH(qkey=GSI_QKEY, srcqp=cm.GSI_QP)
    body = bth / deth / upper
    if kind == "rocev2-ipv4":
        pkt = Ether(src="02:00:00:00:07:01", dst="02:00:00:00:07:02") / IP(src="10.7.0.1", dst="10.7.0.2") / \
            UDP(sport=49152, dport=4791) / body
    elif kind == "rocev2-ipv6":
        pkt = Ether(src="02:00:00:00:07:01", dst="02:00:00:00:07:02") / IPv6(src="fd00::7:1", dst="fd00::7:2") / \
            UDP(sport=49152, dport=4791) / body
    elif kind == "rocev1":
        grh = S.GRH(sgid="fe80::7:11", dgid="fe80::7:12")
        pkt = Ether(src="02:00:00:00:07:11", dst="02:00:00:00:07:12") / grh / body
    elif kind == "ib-lrh":
        pkt = S.LRH(slid=0x0107, dlid=0x0108, sl=0, vl=0) / body
    else:
        pkt = S.LRH(slid=0x0107, dlid=0x0108, lnh=3) / S.GRH(sgid="fe80::7:21", dgid="fe80::7:22") / body
    data = bytes(S.with_icrc(pkt))
    if kind.startswith("ib"):
        return data + b"\x12\x34", 1                         # VCRC, not checked
    return data, 0


def _erf(packet: bytes, ts_ns: int) -> bytes:
    secs, frac = divmod(ts_ns, 1_000_000_000)
    ts = (secs << 32) | ((frac << 32) // 1_000_000_000)
    return struct.pack("<Q", ts) + struct.pack(">BBHHH", 21, 0x04, 16 + len(packet), 0, len(packet)) + packet


def _req_variants(k: int) -> list[tuple[dict, dict | None]]:
    """REQs: an RDMA CM one (IP CM service id, IPv4 private data), one with IPv6 private data,
    one whose service id is no IP CM id (private data shown as is)."""
    out = []
    for ipv, sid in ((4, 0x0000000001061144), (6, 0x000000000106504A), (None, 0x1234567890ABCDEF)):
        if ipv is None:
            out.append(({"serviceid": sid}, None))
            continue
        ip_cm = {"majv": 0, "minv": 0, "ipv": ipv, "sport": 0xC000 + k,
                 "sip6": "::10.7.0.1" if ipv == 4 else "fd00::7:1",
                 "dip6": "::10.7.0.2" if ipv == 4 else "fd00::7:2", "private": bytes(range(1, 57))}
        out.append(({"serviceid": sid, "private": bytes(S.IP_CM(**ip_cm))}, ip_cm))
    return out


def build() -> list[CMFrame]:
    out = []
    for transport in TRANSPORTS:
        for attr in sorted(cm.MESSAGES):
            short = cm.MESSAGES[attr].short
            variants = _req_variants(len(out)) if short == "REQ" else [({}, None)]
            for overrides, ip_cm in variants:
                k = len(out)
                upper, values = _message(short, k, overrides)
                mad = S.MAD(attributeid=attr, transactionid=0x1000 + k, attributemodifier=k)
                data, _ = _transport(transport, mad / upper, k)
                out.append(CMFrame(data, transport, short, values, ip_cm, bytes(mad / upper)))
    return out


def write(path: Path, frames: list[CMFrame]) -> Path:
    """A pcapng: Ethernet frames on interface 0, native IB (ERF records) on interface 1."""
    from roceview.capture.writer import write_pcapng

    records, ifaces, stamps = [], [], []
    for i, f in enumerate(frames):
        ts = TS0 + 1000 * i
        ib = f.transport.startswith("ib")
        records.append(_erf(f.data, ts) if ib else f.data)
        ifaces.append(1 if ib else 0)
        stamps.append(ts)
    write_pcapng(path, records, stamps, interfaces=[(1, 9), (197, 9)], if_ids=ifaces)
    return path


__all__ = ["CMFrame", "TRANSPORTS", "build", "write"]
