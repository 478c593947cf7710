"""Where `dissect -T json` puts each field: tshark 4.0's `-T json` tree of the fields roceview
decodes, in tshark's order (layers, then `<field>_tree` subtrees), and the few fields of that
tree the display filter has no name for.

The values come from the display filter's Wireshark fields (roceview/filter/field_names.py:
the same columns, layer conditions and `-T fields` text), so a field prints the same in
`-T fields`, `-T json` and under `-Y`. This module only adds what the JSON tree shows beyond
them, each computed from a column roceview decodes: the DS field / traffic class byte, the
GRH/IPv6 flow label, the MAC's OUI and I/G, L/G bits, the AETH syndrome's parts, the ICRC as
tshark reads it, the MAC control opcode and PFC enable bits. The MAD header and the CM messages
(`infiniband.mad.*`, `infiniband.cm.*`) are the filter's fields, placed as tshark places them.
tests/commands/test_dissect_json.py keeps every Wireshark filter field placed here;
tests/commands/test_dissect_json_equals_tshark.py compares every field with tshark.

Left out (tshark shows them, roceview does not decode them or they are not fields of the
packet): a header's own bytes (`infiniband.bth` is the BTH's bytes in tshark; roceview keeps
fields, not bytes: its `infiniband.bth_tree` stands alone), reserved bits, lengths, checksums,
IP version/flags/protocol, name resolution (`*_resolved`, `ip.src_host`), stream indexes,
expert info, `frame.protocols`, `frame.encap_type`, `frame.marked`, payload (`data`, `udp.payload`),
the VLAN DEI, LLDP, the LLC and STP subtrees and bridge identifiers, the MADs of classes other
than CM beyond their common header, and any protocol roceview does not decode (TCP, ARP, IPoIB...).
"""
from __future__ import annotations

import numpy as np

from dissectors import cm
from roceview.filter import field_names as F
from roceview.packets.batch import PROTO_CODE, Batch

BYTES = F.BYTES     # tshark FT_BYTES: colon-separated hex of the value's hex_digits // 2 bytes (or of a row of bytes)
_J = "_json_"       # prefix of the columns computed here (never in the packets table)


def _x(name: str, kind: str, column: str, when: str | None = None, hex_digits: int = 0,
       extra: tuple = ()) -> F.FieldDef:
    """A tshark field the JSON tree shows and the filter does not name (yet)."""
    sources = (F.Source(column, when),) + tuple(F.Source(c, when) for c in extra)
    return F.FieldDef(name, kind, sources, "tshark -T json field", hex_digits)


_SYNDROME = ("credit_count", "timer", "reserved_value", "error_code")   # by syndrome bits 6:5
_MAC_BITS = [_x(f"eth.{end}.{bit}", F.BOOL, f"{_J}{end}_{bit}") for end in ("dst", "src") for bit in ("lg", "ig")]
EXTRA = {f.name: f for f in [
    _x("eth.dst.oui", F.INT, _J + "dst_oui"), _x("eth.src.oui", F.INT, _J + "src_oui"),
    _x("eth.addr.oui", F.INT, _J + "dst_oui", extra=(_J + "src_oui",)),
    *_MAC_BITS,
    _x("eth.lg", F.BOOL, _J + "dst_lg", extra=(_J + "src_lg",)),
    _x("eth.ig", F.BOOL, _J + "dst_ig", extra=(_J + "src_ig",)),
    _x("vlan.etype", F.INT, _J + "outer_etype", hex_digits=4, extra=(_J + "inner_etype",)),
    _x("ip.dsfield", F.INT, _J + "tos", "ipv4", hex_digits=2),
    _x("ipv6.tclass", F.INT, _J + "tos", "ipv6", hex_digits=8),
    _x("ipv6.flow", F.INT, "flow_label", "ipv6", hex_digits=6),
    _x("infiniband.grh.tclass", F.INT, _J + "tos", "grh"),
    _x("infiniband.grh.flowlabel", F.INT, "flow_label", "grh"),
    _x("infiniband.aeth.syndrome.reserved", F.INT, _J + "syn_reserved"),
    _x("infiniband.aeth.syndrome.opcode", F.INT, _J + "syn_opcode"),
    *[_x(f"infiniband.aeth.syndrome.{name}", F.INT, f"{_J}syn_{name}") for name in _SYNDROME],
    _x("infiniband.atomiceth.swapdt", F.INT, "atomic_swap_add"),
    _x("infiniband.atomiceth.cmpdt", F.INT, "atomic_compare"),
    _x("infiniband.atomicacketh.origremdt", F.INT, "atomic_ack_data"),
    _x("infiniband.immdt", BYTES, "imm_data", hex_digits=8),
    _x("infiniband.ieth", BYTES, "ieth_rkey", hex_digits=8),
    _x("infiniband.invariant.crc", F.INT, _J + "icrc", hex_digits=8),
    _x("macc.opcode", F.INT, _J + "macc_opcode", hex_digits=4),
    *[_x(f"macc.cbfc.enbv.c{p}", F.BOOL, f"{_J}enbv{p}") for p in range(8)],
]}


def lookup(name: str) -> F.FieldDef:
    """A field by its tshark name: the filter's, or one of the JSON tree's own."""
    return EXTRA.get(name) or F.lookup(name, None)


def _ib(header: str, *names: str) -> tuple:
    return (f"infiniband.{header}_tree", tuple(f"infiniband.{header}.{n}" for n in names))


def _cm_tree() -> tuple:
    """The CM message fields as tshark 4.0 writes them under `infiniband.smplid.smpdata_tree`,
    in its order, for the messages it decodes (dissectors/cm.py WIRESHARK_MESSAGES): a REQ's IP
    CM service id and private data in subtrees, a GID as IPv4 on RoCEv2 over IPv4, a name tshark
    gives twice (alt_reserved1) as its second occurrence."""
    out, seen = [], set()
    for m in (cm.MESSAGES[cm.ATTR[short]] for short in cm.WIRESHARK_MESSAGES):
        for f in m.header.fields:
            if (m.short, f.name) in cm.NOT_IN_WIRESHARK:
                continue
            name = cm.tshark_name(m, f)
            slot = f"{name}#1" if name in seen else name
            seen.add(name)
            if m.short == "REQ" and f.name in ("prim_localgid", "prim_remotegid"):
                out += [name, name + "_ipv4"]
            elif m.short == "REQ" and f.name == "private":
                ip_cm = [f"{m.prefix}.ip_cm.{g.name}" for g in cm.IP_CM_REQ.fields]
                ip_cm = [n for g in ip_cm for n in ((g, g[:-1] + "4") if g.endswith("ip6") else (g,))]
                out += [name, f"{m.prefix}.ip_cm", (f"{m.prefix}.ip_cm_tree", tuple(ip_cm))]
            else:
                out.append(slot)
            if m.short == "REQ" and f.name == "serviceid":
                out.append((f"{name}_tree", tuple(f"{name}.{g.name}" for g in cm.IP_CM_SID.fields)))
    return tuple(out)


def _mac_tree(end: str, k: int) -> tuple:
    return (f"eth.{end}_tree", (f"eth.{end}.oui", f"eth.addr#{k}", f"eth.addr.oui#{k}", f"eth.{end}.lg", f"eth.lg#{k}",
                                f"eth.{end}.ig", f"eth.ig#{k}"))


# (key, children): a layer or subtree; a string: a field (`name#k`: its k-th occurrence)
LAYOUT = (
    ("frame", ("frame.time", "frame.time_epoch", "frame.time_delta", "frame.time_delta_displayed",
               "frame.time_relative", "frame.number", "frame.len", "frame.cap_len")),
    ("eth", ("eth.dst", _mac_tree("dst", 0), "eth.src", _mac_tree("src", 1), "eth.type")),
    ("vlan", ("vlan.priority", "vlan.id", "vlan.etype")),
    ("vlan", ("vlan.priority#1", "vlan.id#1", "vlan.etype#1")),         # QinQ's inner tag
    ("llc", ("llc.dsap", "llc.ssap", "llc.control")),                     # IEEE 802.3 frames
    ("stp", ("stp.version", "stp.type", "stp.flags", "stp.root.cost", "stp.port")),
    ("ip", ("ip.dsfield", ("ip.dsfield_tree", ("ip.dsfield.dscp", "ip.dsfield.ecn")), "ip.id", "ip.ttl",
            "ip.src", "ip.addr", "ip.dst", "ip.addr#1")),
    ("ipv6", ("ipv6.tclass", ("ipv6.tclass_tree", ("ipv6.tclass.dscp", "ipv6.tclass.ecn")), "ipv6.flow",
              "ipv6.hlim", "ipv6.src", "ipv6.addr", "ipv6.dst", "ipv6.addr#1")),
    ("udp", ("udp.srcport", "udp.dstport", "udp.port", "udp.port#1")),
    ("infiniband", (
        _ib("lrh", "vl", "sl", "dlid", "slid"),
        _ib("grh", "tclass", "flowlabel", "hoplmt", "sgid", "dgid"),
        _ib("bth", "opcode", "se", "m", "padcnt", "tver", "p_key", "destqp", "a", "psn"),
        _ib("rdeth", "eecnxt"),
        _ib("deth", "q_key", "srcqp"),
        _ib("reth", "va", "r_key", "dmalen"),
        # tshark 4.0 names AtomicETH's VA and R_Key as the RETH's (the filter's second occurrence)
        ("infiniband.atomiceth_tree", ("infiniband.reth.va#1", "infiniband.reth.r_key#1",
                                       "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt")),
        ("infiniband.aeth_tree", ("infiniband.aeth.syndrome",
                                  _ib("aeth.syndrome", "reserved", "opcode", *_SYNDROME), "infiniband.aeth.msn")),
        _ib("atomicacketh", "origremdt"),
        "infiniband.immdt", ("infiniband.immdt_tree", ("infiniband.immdt",)),      # tshark shows it twice
        "infiniband.ieth", ("infiniband.ieth_tree", ("infiniband.ieth",)),
        _ib("mad", *(f.name for f in cm.MAD.fields), "data"),
        ("infiniband.smplid.smpdata_tree", _cm_tree()),
        "infiniband.invariant.crc")),
    ("macc", ("macc.opcode", "macc.pause_time", "macc.cbfc.enbv",
              ("macc.cbfc.enbv_tree", tuple(f"macc.cbfc.enbv.c{p}" for p in range(8))),
              ("CBFC Class Pause Times", tuple(f"macc.cbfc.pause_time.c{p}" for p in range(8))))),
)


def slot_names(node=LAYOUT) -> list[str]:
    """Every `name#k` of the layout, in tree order."""
    out = []
    for item in node:
        if isinstance(item, str):
            out.append(item if "#" in item else item + "#0")
        else:
            out += slot_names(item[1])
    return out


# ------------------------------------------------------------------ the computed columns

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
        return syn & 31, ok & ((syn >> 5) & 3 == _SYNDROME.index(part))
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


COMPUTED = {
    _J + "tos": _tos,
    _J + "dst_oui": _mac("dst", 24, 0), _J + "src_oui": _mac("src", 24, 0),
    _J + "dst_lg": _mac("dst", 41), _J + "src_lg": _mac("src", 41),
    _J + "dst_ig": _mac("dst", 40), _J + "src_ig": _mac("src", 40),
    _J + "outer_etype": _etype(False), _J + "inner_etype": _etype(True),
    **{f"{_J}syn_{part}": _syndrome(part) for part in ("reserved", "opcode", *_SYNDROME)},
    _J + "icrc": lambda b: (b.cols["icrc"].byteswap(), b.mask("icrc")),     # tshark reads the 4 bytes big-endian
    _J + "macc_opcode": _macc_opcode,
    **{f"{_J}enbv{p}": _enbv(p) for p in range(8)},
}


def with_computed(b: Batch, fields) -> Batch:
    """`b` and the computed columns `fields` read (a shallow copy: the batch is not changed)."""
    names = {s.column for f in fields for s in f.sources if s.column in COMPUTED}
    if not names:
        return b
    cols, valid = dict(b.cols), dict(b.valid)
    for name in names:
        values, ok = COMPUTED[name](b)
        cols[name], valid[name] = np.asarray(values), np.asarray(ok, bool)
    return Batch(b.n, cols, valid)
