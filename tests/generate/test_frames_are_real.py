"""Frames written by `roceview.generate` are real RoCEv2 / 802.1Qbb frames: compared byte for
byte with scapy's builders, ICRC recomputed from the spec, IPv4 checksums valid."""
from __future__ import annotations

import struct
import zlib

import pytest
from scapy.contrib.roce import AETH, BTH, cnp
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from roceview.generate import ibta as ib
from roceview.generate.frames import (Addressing, LldpFrame, PfcFrame, RocePacket, ipv4_checksum, lldp_frame,
                                      pfc_frame, roce_frame)

ADDR = Addressing(macs=(bytes.fromhex("0ec0de000010"), bytes.fromhex("0ec0de000011")),
                  ips=(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))


def spec_icrc_ok(frame: bytes) -> bool:
    """IBTA A17.4.1 from scratch: 8 x 0xFF, IP with TOS/TTL/checksum = ones, UDP checksum =
    ones, BTH byte 4 = ones, up to the ICRC; CRC-32 stored little-endian. RoCEv1 (EtherType
    0x8915, A16.4): the GRH with traffic class, flow label and hop limit = ones instead."""
    off = 18 if frame[12:14] == b"\x81\x00" else 14
    if frame[off - 2:off] == b"\x89\x15":
        grh = bytearray(frame[off:off + 40])
        end = off + 40 + struct.unpack("!H", grh[4:6])[0]
        grh[0] |= 0x0F
        grh[1:4], grh[7] = b"\xff\xff\xff", 0xFF
        rest = bytearray(frame[off + 40:end - 4])
        rest[4] = 0xFF
        return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(grh) + bytes(rest))) == frame[end - 4:end]
    ihl = (frame[off] & 0x0F) * 4
    total = struct.unpack("!H", frame[off + 2:off + 4])[0]
    ip = bytearray(frame[off:off + ihl])
    ip[1], ip[8], ip[10:12] = 0xFF, 0xFF, b"\xff\xff"
    udp = bytearray(frame[off + ihl:off + ihl + 8])
    udp[6:8] = b"\xff\xff"
    rest = bytearray(frame[off + ihl + 8:off + total - 4])
    rest[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))
    return struct.pack("<I", crc) == frame[off + total - 4:off + total]


def packet(**kw) -> RocePacket:
    base = dict(src=0, dst=1, sport=50000, pcp=3, dscp=26, ecn=2, opcode=ib.SEND_ONLY,
                dest_qp=0x1234, psn=0xFFFFFE, ip_id=7)
    base.update(kw)
    return RocePacket(**base)


def scapy_frame(p: RocePacket, payload: bytes, ext: bytes = b"") -> bytes:
    bth = BTH(opcode=p.opcode, solicited=int(p.se), padcount=-p.payload_len % 4, dqpn=p.dest_qp,
              ackreq=int(p.ackreq), psn=p.psn, becn=int(p.becn))
    return bytes(Ether(src=ADDR.macs[p.src], dst=ADDR.macs[p.dst]) / Dot1Q(prio=p.pcp, vlan=100)
                 / IP(src="10.0.0.1", dst="10.0.0.2", tos=(p.dscp << 2) | p.ecn, id=p.ip_id,
                      flags="DF", ttl=64)
                 / UDP(sport=p.sport, dport=4791, chksum=0) / bth
                 / Raw(ext + payload + bytes(-p.payload_len % 4)))


def test_send_only_matches_scapy_byte_for_byte_including_icrc():
    p = packet(payload_len=100, ackreq=True)
    payload = bytes(range(100))
    assert roce_frame(p, ADDR, payload) == scapy_frame(p, payload)


def test_write_first_carries_reth_and_pad_bytes_count_in_padcnt():
    p = packet(opcode=ib.RDMA_WRITE_FIRST, payload_len=1023, reth=(0x7F0000001000, 0xABCD, 5000))
    payload = bytes(1023)
    ext = struct.pack("!QII", *p.reth)
    frame = roce_frame(p, ADDR, payload)
    assert frame == scapy_frame(p, payload, ext)
    assert frame[18 + 20 + 8 + 1] >> 4 & 3 == 1   # PadCnt: 1023 + 1 = 1024


def test_ack_with_aeth_decodes_in_scapy():
    p = packet(opcode=ib.ACKNOWLEDGE, aeth=(ib.AETH_NAK | ib.NAK_PSN_SEQUENCE_ERROR, 42))
    parsed = Ether(roce_frame(p, ADDR, b""))
    assert parsed[AETH].syndrome == 0x60 and parsed[AETH].msn == 42
    assert spec_icrc_ok(roce_frame(p, ADDR, b""))


def test_cnp_matches_scapy_cnp_helper():
    """A17.9.2: opcode 0x81, BECN set, dest QP = the sender's QP, 16 reserved bytes."""
    p = packet(opcode=ib.CNP, becn=True, psn=0, dest_qp=0xBEEF)
    ours = roce_frame(p, ADDR, b"")
    theirs = bytes(Ether(src=ADDR.macs[0], dst=ADDR.macs[1]) / Dot1Q(prio=3, vlan=100)
                   / IP(src="10.0.0.1", dst="10.0.0.2", tos=0x6A, id=7, flags="DF", ttl=64)
                   / UDP(sport=50000, dport=4791, chksum=0) / cnp(0xBEEF))
    assert ours == theirs
    assert ours[18 + 28 + 4] == 0x40   # BTH byte 4: BECN


@pytest.mark.parametrize("ecn", [0, 1, 2, 3])
def test_icrc_is_invariant_to_ecn_and_valid_per_spec(ecn):
    frames = [roce_frame(packet(ecn=ecn, payload_len=64), ADDR, bytes(64)) for _ in range(1)]
    assert spec_icrc_ok(frames[0])
    assert frames[0][-4:] == roce_frame(packet(ecn=0, payload_len=64), ADDR, bytes(64))[-4:]


def test_ipv4_header_checksum_verifies_to_zero():
    frame = roce_frame(packet(payload_len=10), ADDR, bytes(10))
    assert ipv4_checksum(frame[18:38]) == 0


def test_pfc_frame_is_802_1qbb_class_based_pause():
    frame = pfc_frame(PfcFrame(bytes.fromhex("0e5c0000ff10"), 1 << 3, (0, 0, 0, 0xFFFF, 0, 0, 0, 0)))
    assert len(frame) == 60
    assert frame[:6] == bytes.fromhex("0180c2000001")
    assert struct.unpack("!HHH", frame[12:18]) == (0x8808, 0x0101, 0x0008)
    assert struct.unpack("!8H", frame[18:34]) == (0, 0, 0, 0xFFFF, 0, 0, 0, 0)


def test_lldp_frame_matches_scapy_and_carries_the_802_1qaz_pfc_enable_bitmap():
    """802.1AB: Chassis ID (MAC), Port ID (interface name), TTL, then the PFC configuration TLV
    (type 127, OUI 00-80-C2, subtype 0x0B, willing/MBC/cap, enable bitmap), End; roceview's own
    LLDP dissector reads the bitmap back."""
    from scapy.contrib import lldp as sl
    from dissectors import lldp

    f = LldpFrame(bytes.fromhex("0e5c0000ff10"), bytes.fromhex("0e5c0000ff00"), "swp1", 1 << 3)
    ours = lldp_frame(f)
    theirs = bytes(Ether(dst="01:80:c2:00:00:0e", src="0e:5c:00:00:ff:10")
                   / sl.LLDPDUChassisID(subtype=4, id="0e:5c:00:00:ff:00") / sl.LLDPDUPortID(subtype=5, id=b"swp1")
                   / sl.LLDPDUTimeToLive(ttl=120)
                   / sl.LLDPDUGenericOrganisationSpecific(org_code=0x0080C2, subtype=0x0B, data=b"\x08\x08")
                   / sl.LLDPDUEndOfLLDPDU())
    assert ours == theirs.ljust(60, b"\0") and len(ours) == f.frame_len == 60
    assert struct.unpack("!H", ours[12:14])[0] == 0x88CC
    assert lldp.pfc_enable(ours, 14) == 0x08


def test_rocev1_frame_is_ethertype_8915_with_a_grh_and_the_same_transport_as_v2():
    """A16: Ethernet / 0x8915 / GRH (version 6, traffic class = ToS, next header 0x1B, IPv4-
    mapped GIDs) / BTH..., the GRH's IPv6 layout checked by scapy's IPv6 parser, the ICRC from
    the spec (A16.4)."""
    from scapy.layers.inet6 import IPv6

    payload = bytes(range(100))
    p1, p2 = packet(payload_len=100, ackreq=True, v1=True), packet(payload_len=100, ackreq=True)
    v1, v2 = roce_frame(p1, ADDR, payload), roce_frame(p2, ADDR, payload)
    assert struct.unpack("!H", v1[16:18])[0] == 0x8915 and len(v1) == len(v2) + 40 - 28
    grh = IPv6(v1[18:58])
    assert (grh.version, grh.tc, grh.fl, grh.nh, grh.hlim) == (6, 0x6A, 0, 0x1B, 1)
    assert (grh.src, grh.dst, grh.plen) == ("::ffff:10.0.0.1", "::ffff:10.0.0.2", len(v1) - 58)
    assert v1[58:-4] == v2[18 + 28:-4]          # BTH, extensions, payload, pad: identical
    assert spec_icrc_ok(v1) and v1[-4:] != v2[-4:]
    assert not spec_icrc_ok(v1[:60] + bytes([v1[60] ^ 1]) + v1[61:])
