"""A zoo of hand-built frames: every encapsulation, link type and header roceview decodes
(Ethernet, VLAN/QinQ, IPv4/IPv6, GRH, RoCEv1/v2, native IB in ERF, LLDP DCBX PFC, PFC, PAUSE,
ERSPAN II/III, VXLAN, GRE, Linux SLL/SLL2), with the values each should decode to. The tshark
comparison, the kernels' equivalence and the fuzzed readers all read it."""
from __future__ import annotations

import ipaddress
import struct
import zlib

ROCE_PORT = 4791
AETH_KINDS = {0: "ACK", 1: "RNR_NAK", 2: "RESERVED", 3: "NAK"}


def _eth(dst: str, src: str, etype: int, *tags: tuple[int, int, int]) -> bytes:
    out = bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", ""))
    for tpid, pcp, vid in tags:
        out += struct.pack(">HH", tpid, (pcp << 13) | vid)
    return out + struct.pack(">H", etype)


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _ipv4(src: str, dst: str, proto: int, payload: bytes, dscp=0, ecn=0, ttl=64, mf=False,
          frag=0, length=None) -> bytes:
    total = 20 + len(payload) if length is None else length
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, (dscp << 2) | ecn, total, 0x1234,
                      (0x2000 if mf else 0) | frag, ttl, proto, 0,
                      ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed)
    hdr = hdr[:10] + struct.pack(">H", _csum(hdr)) + hdr[12:]
    return hdr + payload


def _ipv6(src: str, dst: str, nh: int, payload: bytes, dscp=0, ecn=0, flow=0, hlim=64) -> bytes:
    tclass = (dscp << 2) | ecn
    first = (6 << 28) | (tclass << 20) | flow
    return struct.pack(">IHBB16s16s", first, len(payload), nh, hlim, ipaddress.IPv6Address(src).packed,
                       ipaddress.IPv6Address(dst).packed) + payload


def _udp(sport: int, dport: int, payload: bytes) -> bytes:
    return struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload


def _grh(sgid: str, dgid: str, paylen: int, tclass=0, flow=0, hoplmt=64, nxthdr=0x1B) -> bytes:
    first = (6 << 28) | (tclass << 20) | flow
    return struct.pack(">IHBB16s16s", first, paylen, nxthdr, hoplmt, ipaddress.IPv6Address(sgid).packed,
                       ipaddress.IPv6Address(dgid).packed)


def _bth(op, qp, psn, se=False, m=False, pad=0, tver=0, pkey=0xFFFF, fecn=False, becn=False,
         ackreq=False) -> bytes:
    b1 = (se << 7) | (m << 6) | (pad << 4) | tver
    b4 = (fecn << 7) | (becn << 6)
    return struct.pack(">BBHB", op, b1, pkey, b4) + qp.to_bytes(3, "big") + \
        bytes([ackreq << 7]) + psn.to_bytes(3, "big")


# Extended headers per opcode, written from IBTA Vol. 1 Table 38 (independently of
# dissectors/opcodes.py): operation -> headers after the transport-specific ones.
_OPS = {0x00: (), 0x01: (), 0x02: (), 0x03: ("imm",), 0x04: (), 0x05: ("imm",), 0x06: ("reth",),
        0x07: (), 0x08: (), 0x09: ("imm",), 0x0A: ("reth",), 0x0B: ("reth", "imm"), 0x0C: ("reth",),
        0x0D: ("aeth",), 0x0E: (), 0x0F: ("aeth",), 0x10: ("aeth",), 0x11: ("aeth",),
        0x12: ("aeth", "atomicack"), 0x13: ("atomic",), 0x14: ("atomic",), 0x16: ("ieth",),
        0x17: ("ieth",)}
_RESPONSES = {0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12}
_NO_PAYLOAD = {0x0C, 0x11, 0x12, 0x13, 0x14}      # READ request, ACK, atomics: no payload


def _ext_names(op: int) -> tuple[str, ...]:
    low, cls = op & 0x1F, op & 0xE0
    if op == 0x81:
        return ("cnp",)
    if cls == 0x40:                        # ConnectX DC (dissectors/opcodes.py): ACKs carry a DETH
        return ("dceth", "rdeth") + (() if low in _RESPONSES and low != 0x11 else ("deth",)) + _OPS[low]
    if cls == 0x60:
        return ("deth",) + _OPS[low]
    if cls == 0xA0:
        return (() if low in _RESPONSES else ("xrceth",)) + _OPS[low]
    return _OPS[low]


def _ext(names, k: int, aeth_syndrome: int = 0x1F) -> tuple[bytes, dict]:
    """Extended headers with values derived from k; also the columns they should give."""
    out, cols = b"", {}
    for name in names:
        if name == "dceth":
            out += struct.pack(">II", 0x1100_0000 + k, 0x0071_5000 + k)
        elif name == "rdeth":
            cols["rdeth_ee_context"] = 0x10000 + k
            out += b"\0" + cols["rdeth_ee_context"].to_bytes(3, "big")
        elif name == "deth":
            cols["deth_qkey"], cols["deth_src_qp"] = 0x80010000 + k, 0x2000 + k
            out += struct.pack(">I", cols["deth_qkey"]) + b"\0" + cols["deth_src_qp"].to_bytes(3, "big")
        elif name == "xrceth":
            cols["xrc_srq"] = 0x30000 + k
            out += b"\0" + cols["xrc_srq"].to_bytes(3, "big")
        elif name == "reth":
            cols["reth_va"], cols["reth_rkey"], cols["reth_dmalen"] = 0x7F0000001000 + k, 0x1000 + k, 4096 + k
            out += struct.pack(">QII", cols["reth_va"], cols["reth_rkey"], cols["reth_dmalen"])
        elif name == "atomic":
            cols.update(atomic_va=0x7F0000002000 + 8 * k, atomic_rkey=0x2000 + k,
                        atomic_swap_add=0x1111111111111111 + k, atomic_compare=0x2222222222222222 + k)
            out += struct.pack(">QIQQ", cols["atomic_va"], cols["atomic_rkey"], cols["atomic_swap_add"],
                               cols["atomic_compare"])
        elif name == "aeth":
            cols["aeth_syndrome"], cols["aeth_msn"] = aeth_syndrome, 0x100 + k
            cols["aeth_kind"] = AETH_KINDS[(aeth_syndrome >> 5) & 3]
            cols["aeth_code"] = aeth_syndrome & 0x1F
            out += bytes([aeth_syndrome]) + cols["aeth_msn"].to_bytes(3, "big")
        elif name == "atomicack":
            cols["atomic_ack_data"] = 0x3333333333333333 + k
            out += struct.pack(">Q", cols["atomic_ack_data"])
        elif name == "imm":
            cols["imm_data"] = 0xCAFE0000 + k
            out += struct.pack(">I", cols["imm_data"])
        elif name == "ieth":
            cols["ieth_rkey"] = 0x4000 + k
            out += struct.pack(">I", cols["ieth_rkey"])
        elif name == "cnp":
            out += b"\0" * 16
    return out, cols


def icrc(data: bytes) -> bytes:
    """The ICRC over `data` = masked pseudo-header + headers + payload (IBTA 7.8.1, A17.4)."""
    return struct.pack("<I", zlib.crc32(data) & 0xFFFFFFFF)


def roce_v2_frame(ip_version: int, bth: bytes, rest: bytes, *, vlan=(), dscp=0, ecn=0, flow=0,
                  sport=49152, dport=ROCE_PORT, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02",
                  src="10.0.0.1", dst="10.0.0.2", good_icrc=True) -> bytes:
    """Ethernet [tags] / IPv4 or IPv6 / UDP / BTH / rest / ICRC (computed per A17.4)."""
    body = bth + rest
    udp = _udp(sport, dport, body + b"\0\0\0\0")
    if ip_version == 4:
        ip = _ipv4(src, dst, 17, udp, dscp=dscp, ecn=ecn)
        masked_ip = bytearray(ip[:20])
        masked_ip[1] = masked_ip[8] = masked_ip[10] = masked_ip[11] = 0xFF
        etype = 0x0800
    else:
        ip = _ipv6(src, dst, 17, udp, dscp=dscp, ecn=ecn, flow=flow)
        masked_ip = bytearray(ip[:40])
        masked_ip[0] |= 0x0F
        masked_ip[1] = masked_ip[2] = masked_ip[3] = masked_ip[7] = 0xFF
        etype = 0x86DD
    masked_udp = bytearray(udp[:8])
    masked_udp[6] = masked_udp[7] = 0xFF
    masked_bth = bytearray(bth)
    masked_bth[4] = 0xFF
    crc = icrc(b"\xff" * 8 + bytes(masked_ip) + bytes(masked_udp) + bytes(masked_bth) + rest)
    if not good_icrc:
        crc = bytes(b ^ 0x5A for b in crc)
    ip = ip[:-4] + crc
    return _eth(dst_mac, src_mac, etype, *vlan) + ip


def roce_v1_frame(bth: bytes, rest: bytes, *, tclass=0, flow=0, hoplmt=64, vlan=(),
                  sgid="fe80::1", dgid="fe80::2") -> bytes:
    grh = _grh(sgid, dgid, len(bth) + len(rest) + 4, tclass=tclass, flow=flow, hoplmt=hoplmt)
    masked = bytearray(grh)
    masked[0] |= 0x0F
    masked[1] = masked[2] = masked[3] = masked[7] = 0xFF
    masked_bth = bytearray(bth)
    masked_bth[4] = 0xFF
    crc = icrc(b"\xff" * 8 + bytes(masked) + bytes(masked_bth) + rest)
    return _eth("02:00:00:00:00:12", "02:00:00:00:00:11", 0x8915, *vlan) + grh + bth + rest + crc


def _pfc(enable: int, quanta: list[int]) -> bytes:
    body = struct.pack(">HH8H", 0x0101, enable, *quanta)
    return _eth("01:80:c2:00:00:01", "02:00:00:00:00:21", 0x8808) + body + b"\0" * (46 - len(body))


def _pause(quanta: int) -> bytes:
    body = struct.pack(">HH", 0x0001, quanta)
    return _eth("01:80:c2:00:00:01", "02:00:00:00:00:22", 0x8808) + body + b"\0" * (46 - len(body))


def _tlv(tlv_type: int, value: bytes) -> bytes:
    return struct.pack(">H", (tlv_type << 9) | len(value)) + value


def _lldp(pfc_tlv: bytes) -> bytes:
    body = (_tlv(1, b"\x04" + bytes.fromhex("020000000031")) + _tlv(2, b"\x03" + bytes.fromhex("020000000031"))
            + _tlv(3, b"\x00\x78") + pfc_tlv + _tlv(0, b""))
    return _eth("01:80:c2:00:00:0e", "02:00:00:00:00:31", 0x88CC) + body


def _ieee_pfc_tlv(bitmap: int) -> bytes:
    return _tlv(127, bytes.fromhex("0080c20b") + bytes([0x08, bitmap]))


def _cee_pfc_tlv(bitmap: int) -> bytes:
    control = _tlv(1, bytes([0, 0]) + struct.pack(">II", 1, 1))
    pfc = _tlv(3, bytes([0, 0, 0x80, 0, bitmap, 8]))
    return _tlv(127, bytes.fromhex("001b2102") + control + pfc)


def _erspan2(inner: bytes, session: int, seq: int = 1, truncated=False) -> bytes:
    gre = struct.pack(">HHI", 0x1000, 0x88BE, seq)
    hdr = struct.pack(">HHI", (1 << 12) | 100, (0 << 13) | (truncated << 10) | session, 7)
    ip = _ipv4("192.0.2.1", "192.0.2.2", 47, gre + hdr + inner)
    return _eth("02:00:00:00:01:02", "02:00:00:00:01:01", 0x0800) + ip


def _erspan3(inner: bytes, session: int, optional=False) -> bytes:
    gre = struct.pack(">HHI", 0x1000, 0x22EB, 9)
    hdr = struct.pack(">HHIHH", (2 << 12) | 200, session, 0x01020304, 0, 0x0001 if optional else 0)
    if optional:
        hdr += struct.pack(">II", (3 << 26) | 5, 0x0A0B0C0D)
    ip = _ipv4("192.0.2.1", "192.0.2.3", 47, gre + hdr + inner)
    return _eth("02:00:00:00:01:03", "02:00:00:00:01:01", 0x0800) + ip


def _vxlan(inner: bytes, vni: int) -> bytes:
    vx = struct.pack(">II", 0x08000000, vni << 8)
    return _eth("02:00:00:00:02:02", "02:00:00:00:02:01", 0x0800) + _ipv4(
        "198.51.100.1", "198.51.100.2", 17, _udp(40000, 4789, vx + inner))


def _gre_teb(inner: bytes) -> bytes:
    return _eth("02:00:00:00:03:02", "02:00:00:00:03:01", 0x0800) + _ipv4(
        "203.0.113.1", "203.0.113.2", 47, struct.pack(">HH", 0, 0x6558) + inner)


def _ib_packet(bth: bytes, rest: bytes, slid: int, dlid: int, sl=0, vl=0, grh=None) -> bytes:
    """Native IB: LRH [GRH] BTH rest ICRC VCRC (ICRC/VCRC are not checked here)."""
    body = (grh or b"") + bth + rest + b"\0\0\0\0"
    lnh = 3 if grh else 2
    pktlen = (8 + len(body)) // 4
    lrh = struct.pack(">BBHHH", (vl << 4) | 0, (sl << 4) | lnh, dlid, pktlen, slid)
    return lrh + body + b"\x12\x34"


def _erf_ib(packet: bytes, ts_ns: int) -> bytes:
    secs, frac = divmod(ts_ns, 1_000_000_000)
    ts = (secs << 32) | ((frac << 32) // 1_000_000_000)
    return struct.pack("<Q", ts) + struct.pack(">BBHHH", 21, 0x04, 16 + len(packet), 0, len(packet)) + packet


def _sll(inner_ip: bytes, etype: int, src="02:00:00:00:04:01") -> bytes:
    return struct.pack(">HHH", 0, 1, 6) + bytes.fromhex(src.replace(":", "")) + b"\0\0" + \
        struct.pack(">H", etype) + inner_ip


def _sll2(inner_ip: bytes, etype: int, src="02:00:00:00:05:01") -> bytes:
    return struct.pack(">HHIHBB", etype, 0, 3, 1, 0, 6) + bytes.fromhex(src.replace(":", "")) + b"\0\0" + inner_ip


def zoo_ts(i: int) -> int:
    return 1_700_000_000_123_456_789 + 1000 * i


def build_zoo() -> tuple[list[bytes], list[int], list[dict]]:
    """(frames, interface ids, expectations): interface 0 Ethernet, 1 ERF, 2 SLL, 3 SLL2."""
    frames: list[bytes] = []
    ifaces: list[int] = []
    expect: list[dict] = []

    def add(frame: bytes, iface: int = 0, **cols):
        frames.append(frame)
        ifaces.append(iface)
        expect.append(cols)

    k = 0
    opcodes = ([op for op in _OPS] + [0x20 | op for op in range(0x0C)] + [0x40 | op for op in _OPS if op <= 0x14]
               + [0x55, 0x64, 0x65, 0x81] + [0xA0 | op for op in _OPS])
    for op in opcodes:
        k += 1
        if op == 0x55:
            names = ("dceth", "rdeth", "deth")
        else:
            names = _ext_names(op)
        size = 0 if op == 0x81 or (op & 0x1F) in _NO_PAYLOAD else k % 7 + 1
        pad = -size % 4
        payload = bytes(range(size)) + b"\0" * pad
        rest, cols = _ext(names, k, aeth_syndrome=(0x1F, 0x00, 0x23, 0x60, 0x61, 0x62, 0x63, 0x64)[k % 8])
        cols["payload_len"] = size
        bth = _bth(op, 0x100 + k, 0xFFFFF0 + k % 16 if k % 3 == 0 else 1000 + k, se=k % 2 == 1,
                   m=k % 3 == 1, pad=pad, ackreq=k % 4 == 0, fecn=k % 5 == 0, becn=op == 0x81 or k % 7 == 0,
                   pkey=0xFFFF if k % 2 else 0x8001)
        v6 = k % 3 == 2
        tags = ((0x8100, k % 8, 100 + k),) if k % 4 == 1 else ()
        add(roce_v2_frame(6 if v6 else 4, bth, rest + payload, vlan=tags, dscp=(26, 24, 48, 0)[k % 4],
                          ecn=k % 4, flow=0x12345 + k if v6 else 0, sport=49152 + k,
                          src="fd00::1" if v6 else "10.0.0.1", dst="fd00::2" if v6 else "10.0.0.2"),
            opcode=op, icrc_ok=True, **cols)
    # RoCEv1 (GRH with an IPv4-mapped GID and a plain one), QinQ
    rest, cols = _ext(("aeth",), 1, 0x61)
    add(roce_v1_frame(_bth(0x11, 0x12, 77), rest, tclass=(26 << 2) | 2, flow=0xABCDE, hoplmt=7,
                      sgid="::ffff:10.1.1.1", dgid="::ffff:10.1.1.2"),
        src_ip="10.1.1.1", dst_ip="10.1.1.2", icrc_ok=True, dscp=26, ecn=2, ttl=7, flow_label=0xABCDE, **cols)
    rest, cols = _ext(("reth",), 2)
    add(roce_v1_frame(_bth(0x0A, 0x13, 78, pad=2), rest + b"ab\0\0", vlan=((0x8100, 5, 42),),
                      sgid="fe80::a", dgid="fe80::b"), icrc_ok=True, **cols)
    rest, cols = _ext(("deth", "imm"), 3)
    add(roce_v2_frame(4, _bth(0x65, 0x14, 79), rest, vlan=((0x88A8, 5, 10), (0x8100, 2, 20))),
        vlan_id=10, pcp=5, inner_vlan_id=20, inner_pcp=2, icrc_ok=True, **cols)
    # bad ICRC, CE mark, source port 69, source port 4791 (not RoCE), fragment
    add(roce_v2_frame(4, _bth(0x04, 0x15, 80), b"data", good_icrc=False), icrc_ok=False)
    add(roce_v2_frame(4, _bth(0x04, 0x15, 81), b"data", ecn=3, sport=69), proto="roce_v2", udp_sport=69,
        icrc_ok=True)
    add(roce_v2_frame(4, _bth(0x04, 0x15, 82), b"data", sport=ROCE_PORT, dport=5000), proto="other")
    add(_eth("02:00:00:00:00:02", "02:00:00:00:00:01", 0x0800) +
        _ipv4("10.0.0.1", "10.0.0.2", 17, _udp(1, ROCE_PORT, _bth(0x04, 1, 1) + b"x" * 20), mf=True),
        proto="other", ip_frag=True)
    # truncated: snaplen cut (record cap < wire) -- written below with wire lengths
    # MAC control and LLDP
    add(_pfc(0x28, [0, 1, 2, 3, 0xFFFF, 5, 6, 7]), proto="pfc", pfc_enable=0x28, pfc_quanta3=3)
    add(_pfc(0x00, [0] * 8), proto="pfc", pfc_enable=0)
    add(_pause(0x1234), proto="pause", pause_quanta=0x1234)
    add(_lldp(_ieee_pfc_tlv(0x18)), proto="lldp", lldp_pfc_enable=0x18)
    add(_lldp(_cee_pfc_tlv(0x09)), proto="lldp", lldp_pfc_enable=0x09)
    # ordinary traffic
    add(_eth("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:41", 0x0806) + bytes(28), proto="other")
    add(_eth("02:00:00:00:00:02", "02:00:00:00:00:01", 0x0800) + _ipv4("10.0.0.1", "10.0.0.2", 17,
                                                                         _udp(5353, 53, b"\0" * 12)),
        proto="other")
    # remote mirrors
    inner_rest, inner_cols = _ext(("reth",), 9)
    inner = roce_v2_frame(4, _bth(0x0A, 0x99, 12345), inner_rest + b"zz\0\0", src="10.9.9.1", dst="10.9.9.2")
    add(_erspan2(inner, 33), mirror_session=33, proto="roce_v2", icrc_ok=True, **inner_cols)
    add(_erspan3(inner, 44), mirror_session=44, proto="roce_v2", icrc_ok=True, **inner_cols)
    add(_erspan3(inner, 45, optional=True), mirror_session=45, proto="roce_v2", icrc_ok=True, **inner_cols)
    add(_vxlan(inner, 0x12345), mirror_session=0x2345, proto="roce_v2", icrc_ok=True, **inner_cols)
    add(_gre_teb(inner), proto="roce_v2", icrc_ok=True, **inner_cols)
    # native IB in ERF (interface 1): local (LRH only) and global (GRH)
    rest, cols = _ext(("reth",), 11)
    add(_erf_ib(_ib_packet(_bth(0x0A, 0x21, 500), rest, slid=0x12, dlid=0x0C, sl=3, vl=0), zoo_ts(len(frames))),
        iface=1, proto="ib",
        src_ip="lid:0x0012", dst_ip="lid:0x000c", slid=0x12, dlid=0x0C, sl=3, **cols)
    grh = _grh("fe80::8c0:eb03:ea:512e", "fe80::8c0:eb03:ea:512a", 12 + 8 + 4, tclass=0x64, flow=0x77)
    rest, cols = _ext(("deth",), 12)
    add(_erf_ib(_ib_packet(_bth(0x64, 0x1, 501), rest, slid=6, dlid=0xC000, grh=grh), zoo_ts(len(frames))),
        iface=1, proto="ib",
        src_ip="fe80::8c0:eb03:ea:512e", **cols)
    # Linux cooked captures (interfaces 2 and 3)
    ip = _ipv4("10.0.0.5", "10.0.0.6", 17, _udp(4000, 53, b"\0" * 8))
    add(_sll(ip, 0x0800), iface=2, src_mac="02:00:00:00:04:01", proto="other")
    add(_sll2(ip, 0x0800), iface=3, src_mac="02:00:00:00:05:01", proto="other")
    return frames, ifaces, expect
