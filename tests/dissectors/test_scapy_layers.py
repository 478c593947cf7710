"""Scapy layers generated from the header declarations, and the packets table they produce.

Packets are crafted with `dissectors.scapy_layers`, written with roceview's pcap writer,
read back with `roceview.read_packets`, and every column asserted exactly.
"""
from __future__ import annotations

import functools
import ipaddress
import operator
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw
from scapy.utils import RawPcapReader

import roceview
from dissectors import ib, macctl, opcodes, tunnel
from dissectors import scapy_layers as S
from dissectors.fields import Field, Header, field_value
from dissectors.scapy_layers import (AETH, BTH, CNP, DETH, GRH, IETH, LRH, PAUSE, PFC, RDETH, RETH, XRCETH,
                                     AtomicAckETH, AtomicETH, ImmDt, MACControl, preferred, with_icrc)
from roceview.capture.writer import write_pcap

REAL = Path(__file__).resolve().parents[3] / "shared" / "captures" / "real"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}

DECLARED = {h.name: h for h in (ib.LRH, ib.GRH, ib.BTH, *ib.EXT_HEADERS, macctl.MACCTL, macctl.PAUSE, macctl.PFC,
                                tunnel.ERSPAN_II, tunnel.ERSPAN_III)}


@pytest.fixture(autouse=True)
def _our_layers():
    """Dissect with dissectors.scapy_layers even when another test module loaded scapy.contrib.roce."""
    with preferred():
        yield


# ---------------------------------------------------------------- helpers

def stack(*layers: Packet) -> Packet:
    return functools.reduce(operator.truediv, layers)


def rocev2(*layers: Packet, src="10.0.0.1", dst="10.0.0.2", sport=49152, icrc=True) -> Packet:
    pkt = Ether(**MACS) / IP(src=src, dst=dst) / UDP(sport=sport) / stack(*layers)
    return with_icrc(pkt) if icrc else pkt


def write(path: Path, pkts, snaplen: int | None = None, ts0: int = 1_700_000_000_000_000_000) -> Path:
    frames = [bytes(p) for p in pkts]
    kept = [f[:snaplen] if snaplen else f for f in frames]
    write_pcap(path, np.frombuffer(b"".join(kept), np.uint8), [len(f) for f in kept],
               [ts0 + 1000 * i for i in range(len(frames))], wire_lengths=[len(f) for f in frames])
    return path


def read(tmp_path: Path, pkts, snaplen: int | None = None, **kw) -> pd.DataFrame:
    return roceview.read_packets(write(tmp_path / "t.pcap", pkts, snaplen), **kw)


def row(df: pd.DataFrame, i: int = 0) -> dict:
    """One row as plain Python values, None where null."""
    out = {}
    for name in df.columns:
        v = df[name].iloc[i]
        out[name] = None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)
    return out


def payload(n: int) -> tuple[bytes, int]:
    """n payload bytes and the BTH pad count that makes them a multiple of 4 (IBTA 9.2)."""
    return bytes(k & 0xFF for k in range(n)) + b"\0" * (-n % 4), -n % 4


EXT_COLUMNS = {h.name: [f.column for f in h.columns] for h in ib.EXT_HEADERS}
ALL_EXT_COLUMNS = sorted({c for cols in EXT_COLUMNS.values() for c in cols})


# ---------------------------------------------------------------- derivation from the declarations

@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_declared_header_is_a_layer_of_its_declared_length(name):
    cls = getattr(S, name.replace("-", "_"))
    assert cls.header is DECLARED[name]
    assert len(bytes(cls())) == DECLARED[name].length
    assert len(cls.fields_desc) >= len([f for f in DECLARED[name].fields if f.name not in cls.views])


def _value_strategy(f: Field):
    return st.integers(0, (1 << f.bits) - 1)


def _as_int(f: Field, value) -> int:
    if f.kind == "mac":
        return int(value.replace(":", ""), 16)
    if f.kind in ("ipv4", "ipv6"):
        return int(ipaddress.ip_address(value))
    return int(value)


def _from_int(f: Field, v: int):
    if f.kind == "mac":
        return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))
    if f.kind == "ipv6":
        return str(ipaddress.IPv6Address(v))
    return v


@pytest.mark.parametrize("name", sorted(DECLARED))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_declared_field_lands_at_its_declared_bits(name, data):
    header = DECLARED[name]
    cls = getattr(S, name.replace("-", "_"))
    wire = [f for f in header.fields if f.name not in cls.views]
    values = {f.name: data.draw(_value_strategy(f), label=f.name) for f in wire}
    built = bytes(cls(**{k: _from_int(header.field(k), v) for k, v in values.items()}))
    assert len(built) == header.length
    parsed = cls(built)
    for f in header.fields:                   # views too: they read the declared bits
        assert field_value(built, 0, f) == _as_int(f, getattr(parsed, f.name)), f.name
    for k, v in values.items():
        assert field_value(built, 0, header.field(k)) == v, k


def test_a_field_added_to_a_declaration_becomes_a_scapy_field():
    header = Header("Probe", "probe header", 8, (
        Field("a", 0, 4),
        Field("flag", 0, 1, bit=7, kind="bool"),
        Field("word", 2, 16),
        Field("addr", 4, 32, kind="ipv4"),
        Field("a_low", 0, 2, bit=2),          # inside `a`: a view, not a wire field
    ))
    cls = S.layer_class(header)
    assert [f.name for f in cls.fields_desc] == ["a", "reserved4", "flag", "reserved8", "word", "addr"]
    pkt = cls(a=0xF, flag=1, word=0xBEEF, addr="10.1.2.3")
    assert bytes(pkt) == bytes.fromhex("f1 00 be ef 0a 01 02 03")
    assert pkt.a_low == 3
    assert bytes(cls(a_low=2)) == bytes.fromhex("20 00 00 00 00 00 00 00")


def test_overlapping_fields_that_are_not_nested_are_rejected():
    header = Header("Bad", "bad", 2, (Field("x", 0, 10), Field("y", 1, 8)))
    with pytest.raises(ValueError, match="overlaps"):
        S.layer_class(header)


def test_aeth_kind_and_code_are_views_of_the_syndrome():
    nak = AETH(kind=3, code=2, msn=0x010203)
    assert nak.syndrome == 0x62
    assert bytes(nak) == bytes.fromhex("62 01 02 03")
    assert (AETH(syndrome=0x3F).kind, AETH(syndrome=0x3F).code) == (1, 31)
    nak.code = 4
    assert nak.syndrome == 0x64


def test_bth_opcode_accepts_ibta_names():
    assert BTH(opcode="RC_RDMA_WRITE_FIRST").opcode == 0x06
    assert BTH(opcode="CNP").opcode == 0x81
    assert bytes(BTH(opcode="UD_SEND_ONLY", destqp=0x123456, psn=0xABCDEF, ackreq=1)) == \
        bytes.fromhex("64 00 ffff 00 123456 80 abcdef")


@pytest.mark.parametrize("opcode", sorted(opcodes.OPCODES), ids=lambda op: opcodes.opcode_name(op))
def test_bth_chains_the_extended_headers_of_its_opcode_when_dissecting(opcode):
    names = opcodes.OPCODES[opcode][2]
    pkt = rocev2(BTH(opcode=opcode), *(S.EXT_CLASSES[n]() for n in names), Raw(b"\x11" * 8))
    parsed = Ether(bytes(pkt))
    layers = []
    layer = parsed[BTH].payload
    while layer:
        layers.append(type(layer).__name__)
        layer = layer.payload
    assert layers == [n for n in names] + ["Raw"]
    assert parsed[BTH].opcode == opcode


def test_rocev1_binds_grh_to_ethertype_0x8915_and_bth_follows():
    pkt = with_icrc(Ether(**MACS) / GRH(sgid="fe80::1", dgid="fe80::2") / BTH(opcode=0x11) / AETH())
    raw = bytes(pkt)
    assert raw[12:14] == b"\x89\x15"
    assert raw[14] >> 4 == 6 and raw[14 + 6] == 0x1B      # IPVer 6, NxtHdr BTH
    assert int.from_bytes(raw[18:20], "big") == 12 + 4 + 4  # PayLen: BTH .. ICRC
    parsed = Ether(raw)
    assert parsed[AETH].syndrome == 0


def test_rocev2_binds_bth_to_udp_port_4791():
    raw = bytes(rocev2(BTH(opcode=4), Raw(b"abcd")))
    assert int.from_bytes(raw[36:38], "big") == 4791
    assert int.from_bytes(raw[38:40], "big") == 8 + 12 + 4 + 4   # UDP length counts the ICRC
    assert type(Ether(raw)[UDP].payload) is BTH


def test_mac_control_dissects_pause_and_pfc_by_opcode():
    pause = Ether(bytes(Ether(**MACS) / PAUSE(quanta=0xFFFF)))
    pfc = Ether(bytes(Ether(**MACS) / PFC(class_enable=0x08, quanta3=100)))
    other = Ether(bytes(Ether(**MACS) / MACControl(opcode=0x0002) / Raw(b"\0" * 4)))
    assert bytes(pause)[12:18] == bytes.fromhex("8808 0001 ffff")
    assert type(pause.payload) is PAUSE and pause[PAUSE].quanta == 0xFFFF
    assert type(pfc.payload) is PFC and (pfc[PFC].class_enable, pfc[PFC].quanta3) == (8, 100)
    assert type(other.payload) is MACControl


def test_the_layers_module_imports_nothing_from_roceview_rich_textual_or_scapy_roce():
    code = ("import sys, dissectors.scapy_layers; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('roceview', 'rich', 'textual') "
            "or m == 'scapy.contrib.roce'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


_COEXIST = """
import sys
first, second = sys.argv[1:]
for name in (first, second):
    __import__(name)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
import scapy.contrib.roce as contrib
import dissectors.scapy_layers as ours
raw = bytes(ours.with_icrc(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP() / UDP() / ours.BTH(opcode=0x11) / ours.AETH(syndrome=0x61)))
outside = Ether(raw)
with ours.preferred():
    inside = Ether(raw)
print(type(outside[contrib.BTH].payload).__module__, type(inside[ours.BTH].payload).__name__, inside[ours.AETH].code)
"""


@pytest.mark.parametrize("order", ["ours-first", "contrib-first"])
def test_scapy_contrib_roce_keeps_dissecting_as_itself_and_ours_inside_preferred(order):
    names = ["dissectors.scapy_layers", "scapy.contrib.roce"]
    if order == "contrib-first":
        names.reverse()
    out = subprocess.run([sys.executable, "-c", _COEXIST, *names], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["scapy.contrib.roce", "AETH", "1"]


# ---------------------------------------------------------------- ICRC against real NIC captures

def _real_frames(name: str, count: int):
    path = REAL / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    frames = []
    for data, _ in RawPcapReader(str(path)):
        frames.append(bytes(data))
        if len(frames) == count:
            break
    return frames


@pytest.mark.parametrize("name", ["magnate3_rocev2_mlx5_rc-send_a.pcap", "magnate3_rocev1_mlx5_rc-send.pcap",
                                  "scapy-roce-uts_cnp-and-rocev1_from-hexdump.pcap",
                                  "oferby-proxy_rocev2_rxe_rc-send-srcport69.pcap"])
def test_with_icrc_reproduces_the_icrc_of_real_nic_frames(name):
    checked = 0
    for frame in _real_frames(name, 60):
        eth = Ether(frame)
        if BTH not in eth:
            continue
        assert bytes(with_icrc(Ether(frame[:-4]))) == frame
        checked += 1
    assert checked >= 3


def test_with_icrc_reproduces_native_ib_icrc_local_and_global():
    path = REAL / "magnate3_native-ib_ibdump-erf_rc-send.pcap"
    if not path.exists():
        pytest.skip(f"{path} not present")
    seen = set()
    for data, _ in RawPcapReader(str(path)):
        h = 16                                     # ERF record header, then extension headers
        ext = data[8] & 0x80
        while ext:
            ext, h = data[h] & 0x80, h + 8
        packet = LRH(data[h:])
        body = bytes(data[h:h + 4 * packet.pktlen])   # LRH .. ICRC (the VCRC follows)
        assert bytes(with_icrc(LRH(body[:-4]))) == body
        seen.add(packet.lnh)
    assert seen == {2, 3}


# ---------------------------------------------------------------- extended headers per opcode

def _ext_values(opcode: int, name: str) -> dict[str, int]:
    """Distinct, opcode-dependent values for every wire field of an extended header."""
    cls = S.EXT_CLASSES[name]
    out = {}
    for k, f in enumerate(cls.header.fields):
        if f.name in cls.views or f.name.startswith("reserved"):
            continue
        out[f.name] = ((opcode + 1) * 0x9E3779B97F4A7C15 * (k + 3)) >> 7 & ((1 << f.bits) - 1)
    return out


@pytest.mark.parametrize("opcode", sorted(opcodes.OPCODES), ids=lambda op: opcodes.opcode_name(op))
def test_every_opcode_decodes_exactly_its_extended_headers(tmp_path, opcode):
    transport, operation, names = opcodes.OPCODES[opcode]
    data, pad = payload(0 if transport == "CNP" else 13)
    exts = {n: _ext_values(opcode, n) for n in names}
    pkt = rocev2(BTH(opcode=opcode, pad=pad, destqp=0xABCDE, psn=0x123456),
                 *(S.EXT_CLASSES[n](**exts[n]) for n in names), Raw(data) if data else Raw(b""))
    r = row(read(tmp_path, [pkt]))
    expected = {c: None for c in ALL_EXT_COLUMNS}
    for n, values in exts.items():
        header = S.EXT_CLASSES[n].header
        for fname, v in values.items():
            if header.field(fname).column:
                expected[header.field(fname).column] = v
    if "AETH" in exts:
        expected["aeth_code"] = exts["AETH"]["syndrome"] & 0x1F       # IBTA Table 42: bits 4:0
    assert {c: r[c] for c in ALL_EXT_COLUMNS} == expected
    assert (r["opcode"], r["opcode_name"], r["transport"]) == (opcode, opcodes.opcode_name(opcode), transport)
    assert (r["dest_qp"], r["psn"], r["pad"]) == (0xABCDE, 0x123456, pad)
    assert r["payload_len"] == (0 if transport == "CNP" else 13)
    assert r["icrc_ok"] is True


def test_rc_rdma_write_first_carries_reth(tmp_path):
    data, pad = payload(1024)
    pkt = rocev2(BTH(opcode=0x06, pad=pad, destqp=0x11, psn=100),
                 RETH(va=0x00007F0012345678, rkey=0xCAFE0001, dmalen=4096), Raw(data))
    r = row(read(tmp_path, [pkt]))
    assert r["opcode_name"] == "RC_RDMA_WRITE_FIRST"
    assert (r["reth_va"], r["reth_rkey"], r["reth_dmalen"]) == (0x00007F0012345678, 0xCAFE0001, 4096)
    assert r["payload_len"] == 1024 and r["wire_len"] == 14 + 20 + 8 + 12 + 16 + 1024 + 4


@pytest.mark.parametrize("opcode,has_aeth", [(0x0D, True), (0x0E, False), (0x0F, True), (0x10, True)])
def test_read_responses_first_last_only_carry_aeth_and_middle_does_not(tmp_path, opcode, has_aeth):
    layers = [BTH(opcode=opcode, psn=7)] + ([AETH(syndrome=0x1F, msn=42)] if has_aeth else []) + [Raw(b"\xAA" * 256)]
    r = row(read(tmp_path, [rocev2(*layers)]))
    assert (r["aeth_syndrome"], r["aeth_msn"], r["aeth_kind"]) == ((0x1F, 42, "ACK") if has_aeth else (None,) * 3)
    assert r["payload_len"] == 256


@pytest.mark.parametrize("opcode,name", [(0x13, "RC_CMP_SWAP"), (0x14, "RC_FETCH_ADD")])
def test_atomic_requests_carry_atomiceth(tmp_path, opcode, name):
    pkt = rocev2(BTH(opcode=opcode, psn=9, ackreq=1),
                 AtomicETH(va=0x1000, rkey=0x55, swapdt=0x1111222233334444, cmpdt=0xFFFFFFFFFFFFFFFF))
    r = row(read(tmp_path, [pkt]))
    assert r["opcode_name"] == name and r["ackreq"] is True
    assert (r["atomic_va"], r["atomic_rkey"], r["atomic_swap_add"], r["atomic_compare"]) == \
        (0x1000, 0x55, 0x1111222233334444, 0xFFFFFFFFFFFFFFFF)
    assert r["payload_len"] == 0


def test_atomic_acknowledge_carries_aeth_then_atomicacketh(tmp_path):
    pkt = rocev2(BTH(opcode=0x12, psn=9), AETH(syndrome=0x05, msn=3), AtomicAckETH(origrem=0x0123456789ABCDEF))
    r = row(read(tmp_path, [pkt]))
    assert r["opcode_name"] == "RC_ATOMIC_ACKNOWLEDGE"
    assert (r["aeth_kind"], r["aeth_code"], r["aeth_msn"], r["atomic_ack_data"]) == ("ACK", 5, 3, 0x0123456789ABCDEF)


def test_ud_send_only_carries_deth(tmp_path):
    data, pad = payload(6)
    pkt = rocev2(BTH(opcode=0x64, pad=pad, destqp=1), DETH(qkey=0x80010000, srcqp=0x000ABC), Raw(data))
    r = row(read(tmp_path, [pkt]))
    assert (r["opcode_name"], r["transport"], r["dest_qp"]) == ("UD_SEND_ONLY", "UD", 1)
    assert (r["deth_qkey"], r["deth_src_qp"], r["payload_len"], r["pad"]) == (0x80010000, 0xABC, 6, 2)


def test_ud_send_only_with_immediate_has_deth_then_immdt(tmp_path):
    pkt = rocev2(BTH(opcode=0x65), DETH(qkey=7, srcqp=8), ImmDt(imm=0xDEADBEEF), Raw(b"\0" * 8))
    r = row(read(tmp_path, [pkt]))
    assert (r["deth_qkey"], r["deth_src_qp"], r["imm_data"], r["payload_len"]) == (7, 8, 0xDEADBEEF, 8)


@pytest.mark.parametrize("opcode,has_xrceth", [(0xA4, True), (0xA6, True), (0xAC, True), (0xB1, False), (0xB0, False)])
def test_xrc_requests_carry_xrceth_and_responses_do_not(tmp_path, opcode, has_xrceth):
    names = opcodes.OPCODES[opcode][2]
    layers = [BTH(opcode=opcode)] + [S.EXT_CLASSES[n]() if n != "XRCETH" else XRCETH(xrcsrq=0x00F00D) for n in names]
    r = row(read(tmp_path, [rocev2(*layers)]))
    assert r["transport"] == "XRC"
    assert r["xrc_srq"] == (0xF00D if has_xrceth else None)


def test_rd_range_is_connectx_dc_with_8_vendor_bytes_then_rdeth_and_deth(tmp_path):
    """Opcodes 0x40-0x5F as ConnectX DC sends them (dissectors/opcodes.py): DCETH, RDETH, DETH
    on requests, and an ACKNOWLEDGE carries RDETH, DETH, AETH."""
    dc = S.EXT_CLASSES["DCETH"]
    req = rocev2(BTH(opcode=0x44), dc(word0=0x11009036, word1=0x00715001), RDETH(eecnxt=0x00ABCD),
                 DETH(qkey=0x11, srcqp=0x22), Raw(b"\0" * 4))
    ack = rocev2(BTH(opcode=0x51), dc(word0=0x10807FF4), RDETH(eecnxt=0x00ABCE), DETH(qkey=0x33, srcqp=0x44),
                 AETH(syndrome=0x60 | 4, msn=1))
    df = read(tmp_path, [req, ack])
    a, b = row(df, 0), row(df, 1)
    assert (a["opcode_name"], a["rdeth_ee_context"], a["deth_qkey"], a["deth_src_qp"], a["payload_len"]) == \
        ("RD_SEND_ONLY", 0xABCD, 0x11, 0x22, 4)
    assert (b["opcode_name"], b["rdeth_ee_context"], b["deth_qkey"], b["aeth_kind"], b["aeth_code"],
            b["payload_len"]) == ("RD_ACKNOWLEDGE", 0xABCE, 0x33, "NAK", 4, 0)
    assert a["icrc_ok"] and b["icrc_ok"]


def test_send_only_with_invalidate_carries_ieth(tmp_path):
    pkt = rocev2(BTH(opcode=0x17), IETH(rkey=0x0BADF00D), Raw(b"\0" * 12))
    r = row(read(tmp_path, [pkt]))
    assert (r["opcode_name"], r["ieth_rkey"], r["payload_len"]) == ("RC_SEND_ONLY_WITH_INVALIDATE", 0x0BADF00D, 12)


@pytest.mark.parametrize("opcode,name,reth", [(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", False),
                                               (0x03, "RC_SEND_LAST_WITH_IMMEDIATE", False),
                                               (0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", False),
                                               (0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", True)])
def test_with_immediate_carries_immdt_after_any_reth(tmp_path, opcode, name, reth):
    layers = [BTH(opcode=opcode)] + ([RETH(va=1, rkey=2, dmalen=64)] if reth else []) + \
        [ImmDt(imm=0x01020304), Raw(b"\x55" * 64)]
    r = row(read(tmp_path, [rocev2(*layers)]))
    assert (r["opcode_name"], r["imm_data"], r["payload_len"]) == (name, 0x01020304, 64)
    assert r["reth_dmalen"] == (64 if reth else None)


def test_cnp_opcode_0x81_is_named_cnp_with_16_reserved_bytes_and_no_payload(tmp_path):
    pkt = rocev2(BTH(opcode=0x81, destqp=0x0000D2, becn=1), CNP())
    r = row(read(tmp_path, [pkt]))
    assert (r["opcode"], r["opcode_name"], r["transport"], r["becn"]) == (0x81, "CNP", "CNP", True)
    assert (r["payload_len"], r["wire_len"], r["icrc_ok"]) == (0, 14 + 20 + 8 + 12 + 16 + 4, True)


# ---------------------------------------------------------------- AETH syndromes (IBTA Tables 42-44)

def _ack(syndrome: int) -> Packet:
    return rocev2(BTH(opcode=0x11, psn=1000), AETH(syndrome=syndrome, msn=77))


@pytest.mark.parametrize("credits", [0, 5, 0x1F])
def test_aeth_ack_carries_the_credit_count(tmp_path, credits):
    r = row(read(tmp_path, [_ack(credits)]))
    assert (r["aeth_syndrome"], r["aeth_kind"], r["aeth_code"], r["aeth_msn"]) == (credits, "ACK", credits, 77)


@pytest.mark.parametrize("timer", [0, 1, 14, 31])
def test_aeth_rnr_nak_carries_the_timer_code(tmp_path, timer):
    r = row(read(tmp_path, [_ack(0x20 | timer)]))
    assert (r["aeth_kind"], r["aeth_code"]) == ("RNR_NAK", timer)


@pytest.mark.parametrize("code,meaning", sorted(ib.NAK_CODES.items()))
def test_aeth_nak_codes_0_to_4(tmp_path, code, meaning):
    r = row(read(tmp_path, [_ack(0x60 | code)]))
    assert (r["aeth_syndrome"], r["aeth_kind"], r["aeth_code"]) == (0x60 | code, "NAK", code)


def test_aeth_syndrome_bits_6_5_equal_2_are_reserved(tmp_path):
    assert row(read(tmp_path, [_ack(0x41)]))["aeth_kind"] == "RESERVED"


# ---------------------------------------------------------------- ICRC and truncation

def _good_packets() -> list[Packet]:
    data, pad = payload(33)
    return [
        rocev2(BTH(opcode=0x04, pad=pad), Raw(data)),
        with_icrc(Ether(**MACS) / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=1) / BTH(opcode=0x04, pad=pad) / Raw(data)),
        with_icrc(Ether(**MACS) / GRH(sgid="fe80::1", dgid="fe80::2") / BTH(opcode=0x04, pad=pad) / Raw(data)),
        with_icrc(Ether(**MACS) / Dot1Q(vlan=5, prio=3) / IP(src="1.1.1.1", dst="2.2.2.2") / UDP() / BTH(opcode=0x11) / AETH()),
    ]


def test_icrc_ok_on_good_rocev2_ipv4_ipv6_and_rocev1_packets(tmp_path):
    df = read(tmp_path, _good_packets())
    assert list(df["proto"]) == ["roce_v2", "roce_v2", "roce_v1", "roce_v2"]
    assert list(df["icrc_ok"]) == [True] * 4
    assert list(df["payload_len"]) == [33, 33, 33, 0]


def test_a_flipped_payload_byte_fails_the_icrc(tmp_path):
    frames = [bytearray(bytes(p)) for p in _good_packets()]
    for f in frames:
        f[-8] ^= 0x01                               # a payload byte (or the AETH MSN), not the ICRC
    df = read(tmp_path, [Raw(bytes(f)) for f in frames])
    assert list(df["icrc_ok"]) == [False] * 4
    assert list(df["truncated"]) == [False] * 4


def test_a_flipped_icrc_byte_fails_the_icrc_and_the_stored_value_is_reported(tmp_path):
    frame = bytearray(bytes(_good_packets()[0]))
    stored = int.from_bytes(frame[-4:], "little")
    frame[-1] ^= 0x80
    r = row(read(tmp_path, [Raw(bytes(frame))]))
    assert (r["icrc_ok"], r["icrc"]) == (False, stored ^ 0x80000000)


def test_variant_fields_changed_in_flight_keep_the_icrc_valid(tmp_path):
    v4 = Ether(bytes(_good_packets()[0]))
    v4[IP].tos, v4[IP].ttl, v4[IP].chksum = (46 << 2) | 3, 3, None      # a switch remarks DSCP, sets CE
    v4[UDP].chksum = 0x1234
    v4[BTH].fecn, v4[BTH].becn = 1, 1
    v6 = Ether(bytes(_good_packets()[1]))
    v6[IPv6].tc, v6[IPv6].fl, v6[IPv6].hlim = 0xFF, 0xFFFFF, 1
    v1 = Ether(bytes(_good_packets()[2]))
    v1[GRH].dscp, v1[GRH].ecn, v1[GRH].flow_label, v1[GRH].hoplmt = 10, 3, 99, 2
    df = read(tmp_path, [v4, v6, v1])
    assert list(df["icrc_ok"]) == [True] * 3
    assert (df["dscp"][0], df["ecn"][0], df["ttl"][0], df["fecn"][0], df["becn"][0]) == (46, 3, 3, True, True)


def test_changing_an_invariant_field_breaks_the_icrc(tmp_path):
    pkt = Ether(bytes(_good_packets()[0]))
    pkt[BTH].psn = 1
    assert list(read(tmp_path, [pkt])["icrc_ok"]) == [False]


def test_the_icrc_is_found_from_the_length_fields_not_the_frame_end(tmp_path):
    with_fcs = Raw(bytes(_good_packets()[0]) + bytes.fromhex("0badc0de"))    # a captured Ethernet FCS
    r = row(read(tmp_path, [with_fcs]))
    assert (r["icrc_ok"], r["payload_len"], r["wire_len"]) == (True, 33, len(bytes(with_fcs)))


def test_ipv4_options_are_covered_by_the_icrc(tmp_path):
    pkt = rocev2(BTH(opcode=0x11), AETH())
    opt = with_icrc(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2", options=b"\x94\x04\x00\x00")
                    / UDP(sport=49152) / BTH(opcode=0x11) / AETH())
    bent = bytearray(bytes(opt))
    bent[14 + 21] ^= 1                                         # one bit of the Router Alert option
    df = read(tmp_path, [pkt, opt, Raw(bytes(bent))])
    assert list(df["icrc_ok"]) == [True, True, False]
    assert list(df["udp_dport"]) == [4791] * 3


@pytest.mark.parametrize("snaplen", [60, 64, 80])
def test_truncated_frame_has_null_icrc_ok_and_exact_payload_len_from_length_fields(tmp_path, snaplen):
    data, pad = payload(1000)
    pkt = rocev2(BTH(opcode=0x0A, pad=pad, psn=3), RETH(va=0x10, rkey=0x20, dmalen=1000), Raw(data))
    r = row(read(tmp_path, [pkt], snaplen=snaplen))
    assert (r["cap_len"], r["wire_len"]) == (snaplen, 14 + 20 + 8 + 12 + 16 + 1000 + 4)
    assert (r["truncated"], r["icrc_ok"], r["icrc"], r["payload_len"]) == (True, None, None, 1000)
    assert (r["opcode_name"], r["psn"]) == ("RC_RDMA_WRITE_ONLY", 3)
    assert r["reth_dmalen"] == (1000 if snaplen >= 14 + 20 + 8 + 12 + 16 else None)


# ---------------------------------------------------------------- network layers

def test_rocev2_over_ipv6_traffic_class_gives_dscp_ecn_and_the_flow_label(tmp_path):
    pkt = with_icrc(Ether(**MACS) / IPv6(src="2001:db8::10", dst="2001:db8::20", tc=(26 << 2) | 2, fl=0xABCDE, hlim=9)
                    / UDP(sport=61000) / BTH(opcode=0x0A, destqp=0x33) / RETH(dmalen=0) )
    r = row(read(tmp_path, [pkt]))
    assert (r["proto"], r["ethertype"], r["src_ip"], r["dst_ip"]) == ("roce_v2", 0x86DD, "2001:db8::10", "2001:db8::20")
    assert (r["dscp"], r["ecn"], r["flow_label"], r["ttl"], r["udp_sport"], r["udp_dport"]) == (26, 2, 0xABCDE, 9, 61000, 4791)
    assert (r["ip_frag"], r["icrc_ok"]) == (None, True)


def test_rocev1_grh_gives_gids_traffic_class_flow_label_and_hop_limit(tmp_path):
    data, pad = payload(20)
    pkt = with_icrc(Ether(**MACS) / GRH(sgid="fe80::202:c9ff:fe00:1", dgid="::ffff:192.168.1.7", dscp=24, ecn=1,
                                        flow_label=0x54321, hoplmt=1)
                    / BTH(opcode=0x00, pad=pad, destqp=0x15, psn=0xFFFFFF) / Raw(data))
    r = row(read(tmp_path, [pkt]))
    assert (r["proto"], r["ethertype"], r["src_ip"], r["dst_ip"]) == ("roce_v1", 0x8915, "fe80::202:c9ff:fe00:1", "192.168.1.7")
    assert (r["dscp"], r["ecn"], r["flow_label"], r["ttl"]) == (24, 1, 0x54321, 1)
    assert (r["udp_sport"], r["psn"], r["payload_len"], r["icrc_ok"]) == (None, 0xFFFFFF, 20, True)


def test_8021q_tag_gives_vlan_id_and_pcp(tmp_path):
    pkt = with_icrc(Ether(**MACS) / Dot1Q(prio=3, vlan=100) / IP(src="10.0.0.1", dst="10.0.0.2")
                    / UDP() / BTH(opcode=0x11) / AETH())
    r = row(read(tmp_path, [pkt]))
    assert (r["vlan_id"], r["pcp"], r["inner_vlan_id"], r["inner_pcp"], r["ethertype"]) == (100, 3, None, None, 0x0800)
    assert (r["proto"], r["icrc_ok"]) == ("roce_v2", True)


def test_qinq_outer_88a8_tag_is_vlan_id_pcp_and_inner_8100_tag_is_inner(tmp_path):
    pkt = with_icrc(Ether(**MACS, type=0x88A8) / Dot1AD(prio=5, vlan=2000) / Dot1Q(prio=2, vlan=17)
                    / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / BTH(opcode=0x11) / AETH())
    raw = bytes(pkt)
    assert raw[12:14] == b"\x88\xa8" and raw[16:18] == b"\x81\x00"
    r = row(read(tmp_path, [pkt]))
    assert (r["vlan_id"], r["pcp"], r["inner_vlan_id"], r["inner_pcp"]) == (2000, 5, 17, 2)
    assert (r["ethertype"], r["proto"], r["src_ip"], r["icrc_ok"]) == (0x0800, "roce_v2", "10.0.0.1", True)


def test_pfc_frame_gives_the_class_enable_vector_and_eight_quanta(tmp_path):
    quanta = {f"quanta{p}": 1000 * p + 7 for p in range(8)}
    pkt = Ether(src=MACS["src"], dst="01:80:c2:00:00:01") / PFC(class_enable=0b10001000, **quanta) / Raw(b"\0" * 26)
    r = row(read(tmp_path, [pkt]))
    assert (r["proto"], r["ethertype"], r["pfc_enable"], r["pause_quanta"]) == ("pfc", 0x8808, 0x88, None)
    assert [r[f"pfc_quanta{p}"] for p in range(8)] == [1000 * p + 7 for p in range(8)]
    assert (r["opcode"], r["wire_len"]) == (None, 60)


def test_8023x_pause_frame_gives_pause_quanta(tmp_path):
    pkts = [Ether(src=MACS["src"], dst="01:80:c2:00:00:01") / PAUSE(quanta=q) / Raw(b"\0" * 42) for q in (0xFFFF, 0)]
    df = read(tmp_path, pkts)
    assert list(df["proto"]) == ["pause", "pause"]
    assert list(df["pause_quanta"]) == [0xFFFF, 0]
    assert df["pfc_enable"].isna().all()
