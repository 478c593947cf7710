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

from dissectors import cm
from roceview.filter import derived, field_names as F

BYTES = F.BYTES     # tshark FT_BYTES: colon-separated hex of the value's hex_digits // 2 bytes (or of a row of bytes)


def lookup(name: str) -> F.FieldDef:
    """A field by its tshark name (the display filter's: roceview/filter)."""
    return F.lookup(name, None)



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
                                  _ib("aeth.syndrome", "reserved", "opcode", *derived.SYNDROME), "infiniband.aeth.msn")),
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
