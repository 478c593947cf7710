"""Wire format: the simulator's packets as real Ethernet frames (struct, no scapy).

RoCEv2 frame = Ethernet [802.1Q tag] / IPv4 / UDP dport 4791 / BTH / [RETH] [AETH] [ImmDt]
[AtomicETH] [AtomicAckETH] /
payload / pad / ICRC (IBTA Annex A17.4). RoCEv1 frame = Ethernet [802.1Q tag] / EtherType
0x8915 / GRH (IPv4-mapped GIDs) / BTH ... / ICRC (Annex A16). PFC frame = 802.1Qbb MAC
control (clause 36). LLDP frame = 802.1AB LLDPDU carrying the 802.1Qaz DCBX PFC configuration.
The FCS is not stored, as in ordinary captures.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from roceview.generate import ibta as ib

ETH_P_8021Q = 0x8100
ETH_P_IPV4 = 0x0800
ETH_P_ROCEV1 = 0x8915             # IBTA A16.3: RoCE (v1) EtherType
GRH_NXTHDR_IBA = 0x1B             # IBTA 8.3.1: next header = IBA transport
ETH_P_MAC_CONTROL = 0x8808
PFC_OPCODE = 0x0101               # 802.1Qbb 36.1.1 "Priority-based flow control"
PFC_DST_MAC = bytes.fromhex("0180c2000001")
ETH_P_LLDP = 0x88CC
LLDP_DST_MAC = bytes.fromhex("0180c200000e")   # nearest bridge group address (802.1AB 7.1)
OUI_IEEE_8021 = bytes.fromhex("0080c2")
LLDP_PFC_CONFIG = 0x0B            # 802.1Qaz D.2.10: PFC configuration TLV subtype
MIN_FRAME = 60                    # without FCS
WIRE_OVERHEAD = 4 + 8 + 12        # FCS + preamble/SFD + inter-frame gap: bytes on the wire
_FF8 = b"\xff" * 8                # the LRH stand-in of the ICRC pseudo-header (A17.4.1)


@dataclass(slots=True)
class RocePacket:
    """One RoCEv2 packet as the simulator moves it; `wire()` makes the bytes."""
    src: int                 # host index (addresses come from the Addressing table)
    dst: int
    sport: int               # UDP source port: per QP (entropy for ECMP)
    pcp: int
    dscp: int
    ecn: int
    opcode: int
    dest_qp: int
    psn: int
    ackreq: bool = False
    becn: bool = False
    se: bool = False
    reth: tuple | None = None       # (virtual address, R_Key, DMA length), IBTA 9.3.3
    aeth: tuple | None = None       # (syndrome, MSN), IBTA 9.3.5
    imm: int | None = None          # ImmDt, IBTA 9.3.4
    payload_len: int = 0
    ip_id: int = 0
    ingress: int = -1               # switch annotation: ingress port (PFC accounting)
    wire_bytes: int = 0             # bytes on the wire incl. FCS, preamble, IFG (derived)
    v1: bool = False                # RoCEv1 (EtherType 0x8915 + GRH) instead of RoCEv2
    deth: tuple | None = None       # (Q_Key, source QP), IBTA 9.3.2 (UD: the CM's QP1 MADs)
    data: bytes | None = None       # the payload itself when it means something (a MAD)
    atomic: tuple | None = None     # (virtual address, R_Key, swap/add, compare): AtomicETH, IBTA 9.3.3.3
    atomic_ack: int | None = None   # original remote data: AtomicAckETH, IBTA 9.3.3.4

    def __post_init__(self):
        self.wire_bytes = self.frame_len + WIRE_OVERHEAD

    @property
    def ext_len(self) -> int:
        n = 16 if self.reth else 0
        n += 8 if self.deth else 0
        n += 4 if self.aeth else 0
        n += 4 if self.imm is not None else 0
        n += 28 if self.atomic else 0
        n += 8 if self.atomic_ack is not None else 0
        return n + (16 if self.opcode == ib.CNP else 0)

    @property
    def frame_len(self) -> int:
        pad = -self.payload_len % 4
        l3 = 40 if self.v1 else 20 + 8   # GRH, or IPv4 + UDP
        n = 14 + 4 + l3 + 12 + self.ext_len + self.payload_len + pad + 4
        return max(n, MIN_FRAME)

    @property
    def is_data(self) -> bool:
        return self.opcode not in (ib.ACKNOWLEDGE, ib.ATOMIC_ACKNOWLEDGE, ib.CNP)


@dataclass(slots=True)
class PfcFrame:
    """802.1Qbb PFC frame: class-enable vector and eight pause times in quanta (512 bit times)."""
    src_mac: bytes
    enable_vector: int
    quanta: tuple

    @property
    def frame_len(self) -> int:
        return MIN_FRAME

    @property
    def wire_bytes(self) -> int:
        return MIN_FRAME + WIRE_OVERHEAD


@dataclass(slots=True)
class LldpFrame:
    """802.1AB LLDPDU from a port: chassis MAC, port name, TTL, and the DCBX PFC configuration
    (802.1Qaz D.2.10): which priorities have PFC enabled, what PFC frames never say."""
    src_mac: bytes
    chassis_mac: bytes
    port_name: str
    pfc_enable: int                # bit p: PFC enabled on priority p
    pfc_cap: int = 8               # traffic classes that can have PFC at once
    ttl_s: int = 120               # 4 x msgTxInterval 30 s (802.1AB 9.2.5)

    @property
    def frame_len(self) -> int:
        return len(lldp_frame(self))

    @property
    def wire_bytes(self) -> int:
        return self.frame_len + WIRE_OVERHEAD


@dataclass(frozen=True)
class Addressing:
    macs: tuple              # host index -> 6-byte MAC
    ips: tuple               # host index -> 4-byte IPv4 address
    vlan: int = 100
    ttl: int = 64


def ipv4_checksum(header: bytes) -> int:
    words = struct.unpack(f"!{len(header) // 2}H", header)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def icrc(ip_hdr: bytes, udp_hdr: bytes, bth_rest: bytes) -> bytes:
    """Invariant CRC (IBTA A17.4.1): variant fields of IP, UDP and BTH replaced by ones."""
    ip_masked = ip_hdr[:1] + b"\xff" + ip_hdr[2:8] + b"\xff" + ip_hdr[9:10] + b"\xff\xff" + ip_hdr[12:]
    udp_masked = udp_hdr[:6] + b"\xff\xff"
    bth_masked = bth_rest[:4] + b"\xff" + bth_rest[5:]
    crc = zlib.crc32(bth_masked, zlib.crc32(udp_masked, zlib.crc32(ip_masked, zlib.crc32(_FF8))))
    return struct.pack("<I", crc)  # stored as the little-endian CRC register, like the NICs


def icrc_v1(grh: bytes, bth_rest: bytes) -> bytes:
    """RoCEv1 ICRC (IBTA A16.4, 7.8.1): the GRH's traffic class, flow label and hop limit
    replaced by ones, BTH resv8a by ones, after the same 8 bytes of ones for the LRH."""
    grh_masked = bytes([grh[0] | 0x0F]) + b"\xff\xff\xff" + grh[4:7] + b"\xff" + grh[8:]
    bth_masked = bth_rest[:4] + b"\xff" + bth_rest[5:]
    crc = zlib.crc32(bth_masked, zlib.crc32(grh_masked, zlib.crc32(_FF8)))
    return struct.pack("<I", crc)


def _bth(p: RocePacket, pad: int) -> bytes:
    """Base Transport Header, IBTA 9.2 Figure 94."""
    flags = (p.se << 7) | (pad << 4)  # MigReq 0, TVer 0
    b4 = p.becn << 6                  # FECN bit 7, BECN bit 6 (A17.9.1)
    return struct.pack("!BBHII", p.opcode, flags, ib.PKEY_DEFAULT, (b4 << 24) | p.dest_qp,
                       (p.ackreq << 31) | (p.psn & ib.PSN_MASK))


def _extensions(p: RocePacket) -> bytes:
    out = struct.pack("!II", p.deth[0], p.deth[1] & 0xFFFFFF) if p.deth else b""
    if p.reth:
        out += struct.pack("!QII", *p.reth)
    if p.aeth:
        out += struct.pack("!I", (p.aeth[0] << 24) | (p.aeth[1] & 0xFFFFFF))
    if p.imm is not None:
        out += struct.pack("!I", p.imm)
    if p.atomic:
        out += struct.pack("!QIQQ", *p.atomic)
    if p.atomic_ack is not None:
        out += struct.pack("!Q", p.atomic_ack)
    if p.opcode == ib.CNP:
        out += bytes(16)  # A17.9.2: 16 reserved bytes after the BTH
    return out


def _pad_min(frame: bytes) -> bytes:
    return frame + bytes(MIN_FRAME - len(frame)) if len(frame) < MIN_FRAME else frame


def _roce_v1_frame(p: RocePacket, addr: Addressing, transport: bytes) -> bytes:
    """GRH (IBTA 8.3): version 6, traffic class = the QP's ToS (as ConnectX sets it), flow
    label 0, hop limit 1 (RoCEv1 is not routed), IPv4-mapped GIDs ::ffff:a.b.c.d."""
    tclass = (p.dscp << 2) | p.ecn
    gid = [bytes(10) + b"\xff\xff" + addr.ips[h] for h in (p.src, p.dst)]
    grh = struct.pack("!IHBB16s16s", (6 << 28) | (tclass << 20), len(transport) + 4, GRH_NXTHDR_IBA,
                      1, gid[0], gid[1])
    tag = struct.pack("!HHH", ETH_P_8021Q, (p.pcp << 13) | addr.vlan, ETH_P_ROCEV1)
    return _pad_min(addr.macs[p.dst] + addr.macs[p.src] + tag + grh + transport + icrc_v1(grh, transport))


def roce_frame(p: RocePacket, addr: Addressing, payload: bytes) -> bytes:
    pad = -p.payload_len % 4
    transport = _bth(p, pad) + _extensions(p) + payload + bytes(pad)
    if p.v1:
        return _roce_v1_frame(p, addr, transport)
    udp_len = 8 + len(transport) + 4
    udp = struct.pack("!HHHH", p.sport, ib.ROCEV2_UDP_PORT, udp_len, 0)  # UDP checksum 0: A17.3.2
    tos = (p.dscp << 2) | p.ecn
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + udp_len, p.ip_id, 0x4000, addr.ttl, 17, 0,
                     addr.ips[p.src], addr.ips[p.dst])
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    tag = struct.pack("!HHH", ETH_P_8021Q, (p.pcp << 13) | addr.vlan, ETH_P_IPV4)
    frame = addr.macs[p.dst] + addr.macs[p.src] + tag + ip + udp + transport
    return _pad_min(frame + icrc(ip, udp, transport))


def pfc_frame(f: PfcFrame) -> bytes:
    """802.1Qbb 36.1.3: DA 01-80-C2-00-00-01, type 0x8808, opcode 0x0101, vector, 8 x time."""
    body = struct.pack("!HH8H", PFC_OPCODE, f.enable_vector, *f.quanta)
    return _pad_min(PFC_DST_MAC + f.src_mac + struct.pack("!H", ETH_P_MAC_CONTROL) + body)


def _tlv(tlv_type: int, value: bytes) -> bytes:
    """802.1AB 8.4: 7-bit type, 9-bit length, value."""
    return struct.pack("!H", tlv_type << 9 | len(value)) + value


def lldp_frame(f: LldpFrame) -> bytes:
    """802.1AB 8.5: Chassis ID (subtype 4, MAC), Port ID (subtype 5, interface name), TTL,
    the PFC configuration TLV (type 127, OUI 00-80-C2, subtype 0x0B: willing 0, MBC 0,
    PFC cap, enable bitmap), End of LLDPDU; untagged to 01-80-C2-00-00-0E."""
    pfc = OUI_IEEE_8021 + bytes([LLDP_PFC_CONFIG, f.pfc_cap & 0x0F, f.pfc_enable])
    body = (_tlv(1, b"\x04" + f.chassis_mac) + _tlv(2, b"\x05" + f.port_name.encode())
            + _tlv(3, struct.pack("!H", f.ttl_s)) + _tlv(127, pfc) + _tlv(0, b""))
    return _pad_min(LLDP_DST_MAC + f.src_mac + struct.pack("!H", ETH_P_LLDP) + body)
