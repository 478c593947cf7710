"""Wireshark fields computed from the columns roceview decodes: the DS field / traffic class
byte, the MAC's OUI and I/G, L/G bits, what follows a VLAN tag, the AETH syndrome's parts, the
ICRC as tshark reads it, the MAC control opcode and PFC enable bits. `dissect -T json` writes
them where tshark does (render/tshark_layout.py); being filter fields, `-T fields -e` and `-Y`
take every name the JSON shows. DERIVED: column -> (columns read, batch -> (values, valid)).
"""
from __future__ import annotations

import numpy as np

from roceview.filter import field_names as F
from roceview.packets.batch import PROTO_CODE, Batch

# the fields are declared in field_names (so every lookup knows them); their columns here
_J, SYNDROME, FIELDS = F.DERIVED_PREFIX, F.SYNDROME, F.DERIVED_FIELDS


def _tos(b: Batch):
    return (b.cols["dscp"].astype(np.uint16) << 2) | b.cols["ecn"], b.mask("dscp") & b.mask("ecn")


def _mac(end: str, shift: int, mask: int = 1):
    def bits(b: Batch):
        mac = b.cols[f"_{end}_mac"]
        values = mac >> np.uint64(shift)
        return (values if mask == 0 else (values & np.uint64(mask)) != 0), b.mask(f"_{end}_mac")
    return bits


def _syndrome(part: str):
    def bits(b: Batch):
        syn, ok = b.cols["aeth_syndrome"], b.mask("aeth_syndrome")
        if part == "reserved":
            return syn >> 7, ok
        if part == "opcode":
            return (syn >> 5) & 3, ok
        return syn & 31, ok & ((syn >> 5) & 3 == SYNDROME.index(part))
    return bits


def _etype(inner: bool):
    """vlan.etype: what follows the tag (an 802.3 length, below 0x0600, is not a type)."""
    def etype(b: Batch):
        has_inner, typed = b.mask("inner_vlan_id"), b.mask("ethertype") & (b.cols["ethertype"] >= 0x0600)
        if inner:
            return b.cols["ethertype"], has_inner & typed
        return np.where(has_inner, 0x8100, b.cols["ethertype"]), b.mask("vlan_id") & (has_inner | typed)
    return etype


def _macc_opcode(b: Batch):
    proto = b.cols["_proto"]
    return np.where(proto == PROTO_CODE["pfc"], 0x0101, 0x0001), np.isin(proto, [PROTO_CODE["pfc"],
                                                                               PROTO_CODE["pause"]])


def _enbv(p: int):
    return lambda b: (((b.cols["pfc_enable"] >> p) & 1) != 0, b.mask("pfc_enable"))


_MACS = {"dst": ("_dst_mac",), "src": ("_src_mac",)}
DERIVED = {
    _J + "tos": (("dscp", "ecn"), _tos),
    _J + "dst_oui": (_MACS["dst"], _mac("dst", 24, 0)), _J + "src_oui": (_MACS["src"], _mac("src", 24, 0)),
    _J + "dst_lg": (_MACS["dst"], _mac("dst", 41)), _J + "src_lg": (_MACS["src"], _mac("src", 41)),
    _J + "dst_ig": (_MACS["dst"], _mac("dst", 40)), _J + "src_ig": (_MACS["src"], _mac("src", 40)),
    _J + "outer_etype": (("inner_vlan_id", "ethertype", "vlan_id"), _etype(False)),
    _J + "inner_etype": (("inner_vlan_id", "ethertype", "vlan_id"), _etype(True)),
    **{f"{_J}syn_{part}": (("aeth_syndrome",), _syndrome(part)) for part in ("reserved", "opcode", *SYNDROME)},
    # tshark reads the ICRC's 4 bytes big-endian
    _J + "icrc": (("icrc",), lambda b: (b.cols["icrc"].byteswap(), b.mask("icrc"))),
    _J + "macc_opcode": (("_proto",), _macc_opcode),
    **{f"{_J}enbv{p}": (("pfc_enable",), _enbv(p)) for p in range(8)},
}
