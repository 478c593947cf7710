"""A capture with every kind of `dissect` line (crafted with scapy), and the line of a packet
formatted the simple way, one row dict at a time: the definition the vectorised lines
(roceview/render/lines.py) are checked against."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, GRE, Dot1Q, Ether
from scapy.packet import Raw

from dissectors.ib import NAK_CODES
from dissectors.scapy_layers import AETH, BTH, CNP, ERSPAN_II, GRH, PAUSE, PFC, RETH, with_icrc
from roceview.capture.writer import write_pcap
from roceview.render.flag_text import TAGGED, tag_text
from roceview.render.lines import PROTO_LABEL

MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
# an LLDP frame with an IEEE 802.1 PFC configuration TLV (enable 0x34), from tcpdump's tests
LLDP = bytes.fromhex(
    "0180c200000e08002742ba5988cc02070408002742ba5904070308002742ba5906020078fe060080c2010001fe07"
    "0080c202020000fe0e0080c20300010764656661756c74fe0d0080c204080000424203000000fe060080c20b0434"
    "000000000000000000")


def _v2(bth, *more, ip=None, payload=16, vlan=None, tos=0):
    """A RoCEv2 frame (IPv4 unless `ip` is given) with a valid ICRC."""
    l3 = ip if ip is not None else IP(src="10.0.0.1", dst="10.0.0.2", tos=tos)
    eth = Ether(**MACS) / Dot1Q(vlan=vlan, prio=3) if vlan is not None else Ether(**MACS)
    pkt = eth / l3 / UDP(sport=49152, dport=4791) / bth
    for layer in more:
        pkt = pkt / layer
    return bytes(with_icrc(pkt / Raw(b"\x5a" * payload)))


def _roce_frames() -> list[bytes]:
    out = [_v2(BTH(opcode=0x06, destqp=0x12, psn=1, ackreq=1, se=1, fecn=1, becn=1),
               RETH(va=0x1000, rkey=7, dmalen=64), vlan=100, tos=3),                    # flags, CE, VLAN
           _v2(BTH(opcode=0x04, destqp=0xABCDEF, psn=0xFFFFFF),
               ip=IPv6(src="fe80::1", dst="2001:db8::2", tc=3))]                         # IPv6, CE
    for code in (*NAK_CODES, 9):
        out.append(_v2(BTH(opcode=0x11, destqp=0x34, psn=5), AETH(syndrome=0x60 | code, msn=1), payload=0))
    out.append(_v2(BTH(opcode=0x11, destqp=0x34, psn=6), AETH(syndrome=0x20 | 14, msn=1), payload=0))  # RNR
    out.append(_v2(BTH(opcode=0x11, destqp=0x34, psn=7), AETH(syndrome=0x1F, msn=1), payload=0))       # ACK
    out.append(_v2(BTH(opcode=0x81, destqp=0x34, becn=1), CNP(), payload=0))
    grh = GRH(nxthdr=0x1B, sgid="::ffff:10.0.0.1", dgid="::ffff:10.0.0.2")
    out.append(bytes(with_icrc(Ether(type=0x8915, **MACS) / grh / BTH(opcode=0x04, destqp=0x99, psn=3)
                               / Raw(b"\1" * 8))))                                        # RoCEv1
    bad = bytearray(_v2(BTH(opcode=0x0A, destqp=0x99, psn=9), RETH(dmalen=16)))
    bad[-1] ^= 1
    out.append(bytes(bad))                                                                # bad ICRC
    inner = Ether(_v2(BTH(opcode=0x04, destqp=0x99, psn=10)))
    gre = GRE(proto=0x88BE, seqnum_present=1, sequence_number=1)
    out.append(bytes(Ether() / IP(src="192.0.2.1", dst="192.0.2.9", proto=47) / gre
                     / ERSPAN_II(session=0x3A5) / inner))                                 # mirror
    return out


def _other_frames() -> list[bytes]:
    ctl = {"dst": "01:80:c2:00:00:01", "src": MACS["src"]}
    return [bytes(Ether(**ctl) / PFC(class_enable=0b10001001, quanta0=0xFFFF, quanta7=3)),
            bytes(Ether(**ctl) / PFC(class_enable=0x08)),                          # all quanta 0
            bytes(Ether(**ctl) / Dot1Q(vlan=5, prio=7)
                  / PFC(class_enable=0xFF, **{f"quanta{p}": p * 300 for p in range(8)})),
            bytes(Ether(**ctl) / Dot1Q(vlan=5, prio=7) / PFC(class_enable=0)),     # "enable=0x00 " + VLAN
            bytes(Ether(**ctl) / PAUSE(quanta=0xFFFF)), bytes(Ether(**ctl) / PAUSE(quanta=0)),
            bytes(Ether(**ctl) / PFC(class_enable=0)),                              # ends in a space: stripped
            LLDP, bytes(Ether(**MACS) / ARP(pdst="10.0.0.2")), bytes(Ether(**MACS) / IP() / TCP()),
            bytes(Ether(**MACS, type=0x9000) / Raw(b"\0" * 46))]


def kitchen_sink(path: Path) -> Path:
    """Every line kind; the last frames again cut at 60 bytes ([truncated])."""
    frames = _roce_frames() + _other_frames()
    cut = frames[:3] + [frames[-11]]
    kept = frames + [f[:60] for f in cut]
    wire = [len(f) for f in frames + cut]
    ts = [1_700_000_000_000_000_000 + 1234 * i for i in range(len(kept))]
    write_pcap(path, np.frombuffer(b"".join(kept), np.uint8), [len(f) for f in kept], ts,
               wire_lengths=wire, linktype=1, nanosecond=True)
    return path


def reference_line(row: dict, quanta: list, rel: float, gbps: float = 100.0, colour: bool = False) -> str:
    """One packet's line formatted field by field (the old per-packet code, kept as the spec)."""
    src = row["src_ip"] or row["src_mac"] or "?"
    dst = row["dst_ip"] or row["dst_mac"] or "?"
    info = _reference_info(row, quanta)
    if row.get("flags") and row["flags"] & TAGGED:
        info = f"{info} {tag_text(row, quanta, gbps, colour)}"
    label = PROTO_LABEL.get(row["proto"], row["proto"])
    return f"{row['frame']:>7} {rel:12.6f} {src} → {dst} {label} {row['wire_len']} {info}".rstrip()


def _reference_info(row: dict, quanta: list) -> str:
    parts = []
    if row["opcode_name"] is not None:
        parts += [row["opcode_name"], f"QP=0x{row['dest_qp']:06x}", f"PSN={row['psn']}"]
        parts += [flag for flag, key in (("AckReq", "ackreq"), ("SE", "se"), ("FECN", "fecn"), ("BECN", "becn"))
                  if row[key]]
        if row["aeth_kind"] == "NAK":
            parts.append(f"NAK({NAK_CODES.get(row['aeth_code'], row['aeth_code'])})")
        elif row["aeth_kind"] == "RNR_NAK":
            parts.append(f"RNR_NAK(timer={row['aeth_code']})")
    elif row["proto"] == "pfc" and row["pfc_enable"] is not None:
        en = row["pfc_enable"]
        parts.append(f"enable=0x{en:02x} " + " ".join(f"P{p}={quanta[p]}" for p in range(8) if en >> p & 1))
    elif row["proto"] == "pause" and row["pause_quanta"] is not None:
        parts.append(f"quanta={row['pause_quanta']}" + (" (XON)" if row["pause_quanta"] == 0 else ""))
    elif row["proto"] == "lldp" and row["lldp_pfc_enable"] is not None:
        parts.append(f"DCBX PFC enable=0x{row['lldp_pfc_enable']:02x}")
    elif row["ethertype"] is not None:
        parts.append(f"ethertype=0x{row['ethertype']:04x}")
    if row["ecn"] == 3:
        parts.append("CE")
    if row["vlan_id"] is not None:
        parts.append(f"VLAN={row['vlan_id']} PCP={row['pcp']}")
    if row["mirror_session"] is not None:
        parts.append(f"mirror={row['mirror_session']}")
    if row["icrc_ok"] is False:
        parts.append("[bad ICRC]")
    if row["truncated"]:
        parts.append("[truncated]")
    return " ".join(parts)
