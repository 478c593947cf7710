"""The display filter's field names: every packets-table column (docs/columns.md) under its
own name, the Wireshark names of the same fields as aliases, and `roceview.<flag>`.

A field reads one or more *sources*: a Batch column, valid where the column is and where a
layer condition holds (`ip.src` is the source address only where the frame's L3 header is
IPv4; RoCEv1's GRH source GID is `infiniband.grh.sgid`, as in Wireshark). A field with
several sources has several occurrences, as in Wireshark: `ip.addr` is `ip.src` and `ip.dst`,
`udp.port` both ports, `eth.addr` both MACs (destination first, tshark's order).
"""
from __future__ import annotations

from dataclasses import dataclass

from dissectors import cm, ib, opcodes
from roceview.packets.batch import PROTO_NAMES
from roceview.packets.decode import BOOL_COLUMNS as HEADER_BOOL_COLUMNS
from roceview.packets.flags import FILTER_PREFIX, FINDING_COLUMN, FINDING_FIELD, FINDING_KINDS, FLAG_FIELDS, FlagField

# kinds: how a literal is read and compared (roceview/filter/values.py)
INT, BOOL, MAC, IPV4, IPV6, ADDR, STR, NONE, FLAG = "int", "bool", "mac", "ipv4", "ipv6", "addr", "str", "none", "flag"
BYTES = "bytes"                   # tshark FT_BYTES: a row of bytes, written colon-separated hex
# times, in ns (literals: packets/times.py): seconds (`0.000010112`, -T fields with 9 decimals as
# tshark), and a date and time of day (`"2023-11-14 22:13:20.5"`, `"Nov 14, 2023 22:13:20"`)
RELTIME, ABSTIME = "reltime", "abstime"
MICROS = "usec"                   # a duration held in ns, written and compared in µs (roceview.op.latency)
ETH_TYPE_COLUMN = "_eth_type"     # derived (filter/evaluate.py DERIVED): the Ethernet header's own type
CM_PREFIX = "_cm:"                # derived (filter/evaluate.py): a field of the MAD's bytes, "_cm:REQ.startpsn"
CM_MESSAGE_COLUMN = "_cm_message"  # derived: a CM MAD's message, by attribute id


@dataclass(frozen=True)
class Source:
    column: str | None            # a Batch column; None: the field is present where `when` holds
    when: str | None = None       # a layer condition (roceview/filter/evaluate.py CONDITIONS)


@dataclass(frozen=True)
class FieldDef:
    name: str
    kind: str
    sources: tuple[Source, ...]
    meaning: str = ""
    hex_digits: int = 0           # `-T fields`: tshark prints the field as 0x + this many hex digits
    vocab: tuple = ()             # STR: the name of each code the column holds
    flag: FlagField | None = None
    bits: int = 0                 # tshark's type (FT_UINT<bits>): a larger literal is refused; 0: 64 bits


# the Wireshark integer fields' types (tshark -G fields): tshark refuses a literal above the
# type's maximum ("too big for this field"), whatever the column's own width
_BITS = {8: "ip.dsfield.dscp ip.dsfield.ecn ip.ttl ipv6.hlim infiniband.lrh.vl infiniband.lrh.sl "
            "infiniband.grh.hoplmt infiniband.bth.opcode infiniband.bth.padcnt infiniband.bth.tver "
            "infiniband.aeth.syndrome llc.dsap llc.ssap stp.version stp.type stp.flags",
         16: "eth.type vlan.id vlan.priority ip.id udp.srcport udp.dstport udp.port infiniband.lrh.dlid infiniband.lrh.slid "
             "infiniband.bth.p_key macc.pause_time macc.cbfc.enbv " + " ".join(f"macc.cbfc.pause_time.c{p}" for p in range(8))
             + " llc.control stp.port",
         24: "infiniband.bth.destqp infiniband.bth.psn infiniband.rdeth.eecnxt infiniband.aeth.msn",
         32: "frame.number frame.len frame.cap_len ipv6.tclass.dscp ipv6.tclass.ecn infiniband.deth.srcqp "
             "infiniband.reth.r_key infiniband.reth.dmalen stp.root.cost",
         64: "infiniband.deth.q_key infiniband.reth.va"}
BITS = {name: bits for bits, names in _BITS.items() for name in names.split()}


OPCODE_VOCAB = tuple(opcodes.opcode_name(op) for op in range(256))
TRANSPORT_VOCAB = tuple(opcodes.TRANSPORTS.get(op & 0xE0) for op in range(256))
AETH_KIND_VOCAB = tuple(ib.AETH_KINDS[(s >> 5) & 3] for s in range(256))
# the header flags declared kind="bool" (dissectors/, BTH SE M FECN BECN A) and the decoder's own
BOOL_COLUMNS = HEADER_BOOL_COLUMNS | {"ip_frag", "icrc_ok", "truncated"}
_STRING_COLUMNS = {  # column -> (kind, source column, vocab)
    "src_mac": (MAC, "_src_mac", ()), "dst_mac": (MAC, "_dst_mac", ()),
    "src_ip": (ADDR, "_src_addr", ()), "dst_ip": (ADDR, "_dst_addr", ()),
    "proto": (STR, "_proto", PROTO_NAMES), "opcode_name": (STR, "opcode", OPCODE_VOCAB),
    "transport": (STR, "opcode", TRANSPORT_VOCAB), "aeth_kind": (STR, "aeth_syndrome", AETH_KIND_VOCAB),
    "cm_message": (STR, CM_MESSAGE_COLUMN, tuple(cm.ATTRIBUTE_NAMES.get(a) if a in cm.MESSAGES else None
                                                for a in range(256))),
}


def _own(column: str) -> FieldDef:
    kind, source, vocab = _STRING_COLUMNS.get(column, (BOOL if column in BOOL_COLUMNS else INT, column, ()))
    return FieldDef(column, kind, (Source(source),), f"packets-table column {column}", vocab=vocab)


def _w(name, kind, column, when=None, hex_digits=0, meaning="", extra=()) -> FieldDef:
    """A Wireshark alias of `column` (and of the columns in `extra`, further occurrences)."""
    sources = (Source(column, when),) + tuple(Source(c, when) for c in extra)
    return FieldDef(name, kind, sources, meaning, hex_digits, bits=BITS.get(name, 0))


_WIRESHARK = [
    _w("frame.number", INT, "frame", meaning="frame number"),
    _w("frame.len", INT, "wire_len", meaning="frame length on the wire"),
    _w("frame.cap_len", INT, "cap_len", meaning="bytes captured"),
    # tshark's times (packets/times.py Clock adds the relative ones: dissect and the TUI)
    _w("frame.time", ABSTIME, "ts_ns", meaning="arrival time (local time, as TZ says)"),
    _w("frame.time_epoch", RELTIME, "ts_ns", meaning="arrival time, seconds since 1970 UTC"),
    _w("frame.time_relative", RELTIME, "_ts_rel", meaning="seconds since the first packet"),
    _w("frame.time_delta", RELTIME, "_ts_delta", meaning="seconds since the previous packet captured"),
    _w("frame.time_delta_displayed", RELTIME, "_ts_delta_displayed",
       meaning="seconds since the previous packet shown (0 before any)"),
    _w("eth", NONE, "_dst_mac", meaning="an Ethernet frame"),
    _w("eth.dst", MAC, "_dst_mac"), _w("eth.src", MAC, "_src_mac"),
    _w("eth.addr", MAC, "_dst_mac", extra=("_src_mac",), meaning="eth.dst or eth.src"),
    _w("eth.type", INT, ETH_TYPE_COLUMN, hex_digits=4,
       meaning="the Ethernet header's type: 0x8100 before a VLAN tag, else the EtherType"),
    _w("vlan", NONE, "vlan_id", meaning="an 802.1Q tag"),
    _w("vlan.id", INT, "vlan_id", extra=("inner_vlan_id",), meaning="VID of either tag"),
    _w("vlan.priority", INT, "pcp", extra=("inner_pcp",), meaning="PCP of either tag"),
    _w("ip", NONE, None, "ipv4", meaning="an IPv4 packet"),
    _w("ip.src", IPV4, "_src_addr", "ipv4"), _w("ip.dst", IPV4, "_dst_addr", "ipv4"),
    _w("ip.addr", IPV4, "_src_addr", "ipv4", extra=("_dst_addr",), meaning="ip.src or ip.dst"),
    _w("ip.dsfield.dscp", INT, "dscp", "ipv4"), _w("ip.dsfield.ecn", INT, "ecn", "ipv4"),
    _w("ip.ttl", INT, "ttl", "ipv4"),
    _w("ip.id", INT, "ip_id", "ipv4", hex_digits=4),
    _w("ipv6", NONE, None, "ipv6", meaning="an IPv6 packet"),
    _w("ipv6.src", IPV6, "_src_addr", "ipv6"), _w("ipv6.dst", IPV6, "_dst_addr", "ipv6"),
    _w("ipv6.addr", IPV6, "_src_addr", "ipv6", extra=("_dst_addr",), meaning="ipv6.src or ipv6.dst"),
    _w("ipv6.tclass.dscp", INT, "dscp", "ipv6"), _w("ipv6.tclass.ecn", INT, "ecn", "ipv6"),
    _w("ipv6.hlim", INT, "ttl", "ipv6"),
    _w("udp", NONE, "udp_dport", meaning="a UDP datagram"),
    _w("udp.srcport", INT, "udp_sport"), _w("udp.dstport", INT, "udp_dport"),
    _w("udp.port", INT, "udp_sport", extra=("udp_dport",), meaning="udp.srcport or udp.dstport"),
    _w("infiniband", NONE, None, "roce", meaning="a RoCE or InfiniBand frame"),
    # the headers themselves (presence only), as Wireshark users test them: `infiniband.aeth` = an ACK/NAK
    _w("infiniband.lrh", NONE, "dlid", meaning="an IB local route header (native IB)"),
    _w("infiniband.grh", NONE, None, "grh", meaning="a GRH (RoCEv1, IB)"),
    _w("infiniband.bth", NONE, "opcode", meaning="a base transport header"),
    _w("infiniband.rdeth", NONE, "rdeth_ee_context", meaning="an RDETH"),
    _w("infiniband.deth", NONE, "deth_qkey", meaning="a DETH"),
    _w("infiniband.reth", NONE, "reth_va", meaning="a RETH"),
    _w("infiniband.aeth", NONE, "aeth_syndrome", meaning="an AETH (ACK or NAK)"),
    _w("infiniband.lrh.vl", INT, "vl", hex_digits=2), _w("infiniband.lrh.sl", INT, "sl"),
    _w("infiniband.lrh.dlid", INT, "dlid"), _w("infiniband.lrh.slid", INT, "slid"),
    _w("infiniband.grh.sgid", IPV6, "_src_addr", "grh"), _w("infiniband.grh.dgid", IPV6, "_dst_addr", "grh"),
    _w("infiniband.grh.hoplmt", INT, "ttl", "grh"),
    _w("infiniband.bth.opcode", INT, "opcode"), _w("infiniband.bth.se", BOOL, "se"),
    _w("infiniband.bth.m", BOOL, "migreq"), _w("infiniband.bth.padcnt", INT, "pad"),
    _w("infiniband.bth.tver", INT, "tver"), _w("infiniband.bth.p_key", INT, "pkey"),
    _w("infiniband.bth.destqp", INT, "dest_qp", hex_digits=6), _w("infiniband.bth.a", BOOL, "ackreq"),
    _w("infiniband.bth.psn", INT, "psn"),
    _w("infiniband.rdeth.eecnxt", INT, "rdeth_ee_context"),
    _w("infiniband.deth.q_key", INT, "deth_qkey", hex_digits=16), _w("infiniband.deth.srcqp", INT, "deth_src_qp",
                                                                   hex_digits=8),
    # tshark 4.0 shows AtomicETH's VA and R_Key under the RETH names (tests/packets/test_decode_equals_tshark.py, 6)
    _w("infiniband.reth.va", INT, "reth_va", hex_digits=16, extra=("atomic_va",)),
    _w("infiniband.reth.r_key", INT, "reth_rkey", hex_digits=8, extra=("atomic_rkey",)),
    _w("infiniband.reth.dmalen", INT, "reth_dmalen"),
    _w("infiniband.aeth.syndrome", INT, "aeth_syndrome"), _w("infiniband.aeth.msn", INT, "aeth_msn"),
    _w("macc", NONE, None, "macctl", meaning="a MAC control frame (PFC or PAUSE)"),
    _w("macc.pause_time", INT, "pause_quanta"),
    _w("macc.cbfc.enbv", INT, "pfc_enable", hex_digits=4),
] + [_w(f"macc.cbfc.pause_time.c{p}", INT, f"pfc_quanta{p}") for p in range(8)] + [
    _w("llc", NONE, "llc_dsap", meaning="an IEEE 802.3 frame's LLC header"),
    _w("llc.dsap", INT, "llc_dsap", hex_digits=2), _w("llc.ssap", INT, "llc_ssap", hex_digits=2),
    _w("llc.control", INT, "llc_control", hex_digits=4),
    _w("stp", NONE, "stp_bpdu_type", meaning="a spanning tree BPDU"),
    _w("stp.version", INT, "stp_version"), _w("stp.type", INT, "stp_bpdu_type", hex_digits=2),
    _w("stp.flags", INT, "stp_flags", hex_digits=2), _w("stp.port", INT, "stp_port", hex_digits=4),
    _w("stp.root.cost", INT, "stp_root_cost"),
]

# ---- CM MADs (dissectors/cm.py) under tshark's names: a field whose value a packets-table column
# holds reads it (every projection: analyze --filter too), the others the MAD's bytes (dissect).
# Conditions (filter/evaluate.py CONDITIONS) "mad": a whole 256-byte MAD on QP1, as tshark wants
# it; "cm:REQ": a whole CM REQ; "+ipv4" RoCEv2 over IPv4 (tshark then shows a GID's last 4 bytes
# as an IPv4 address), "+ipcm" an RDMA CM IP service id, "+v4" IP CM private data of IP version 4.
_HEX32 = ("flowlabel", "reserved0", "pktrate")            # tshark 4.0: FT_UINT32 whatever the width
_AS_BYTES = ("alt_localgid", "alt_remotegid")             # tshark 4.0: FT_BYTES in a REQ


def _cm_field(name: str, where: str, f, when: str, tail4: bool = False) -> FieldDef:
    column = f.column if f.column and not tail4 else f"{CM_PREFIX}{where}.{f.name}{'@4' if tail4 else ''}"
    if tail4 or f.kind in ("ipv6", "bytes"):
        kind = IPV4 if tail4 else BYTES if f.kind == "bytes" or where == "REQ" and f.name in _AS_BYTES else IPV6
        return FieldDef(name, kind, (Source(column, when),), f.meaning, 2 * (f.bits // 8) if kind == BYTES else 0)
    wide = f.name.startswith(("prim_", "alt_")) and f.name.endswith(_HEX32)
    bits = 32 if wide else next(b for b in (8, 16, 24, 32, 64) if f.bits <= b)
    digits = 0 if f.name.endswith(("locallid", "remotelid")) else bits // 4
    return FieldDef(name, INT, (Source(column, when),), f.meaning, digits, bits=bits)


def _cm_message_fields(m) -> list[FieldDef]:
    when, out = f"cm:{m.short}", []
    for f in m.header.fields:
        name = cm.tshark_name(m, f)
        if m.short == "REQ" and f.name in ("prim_localgid", "prim_remotegid"):
            out += [_cm_field(name, "REQ", f, when + "+!ipv4"),
                    _cm_field(name + "_ipv4", "REQ", f, when + "+ipv4", True)]
        elif m.short == "REQ" and f.name == "private":
            out += [_cm_field(name, "REQ", f, when + "+!ipcm"),
                    _cm_field(f"{m.prefix}.ip_cm", "REQ", f, when + "+ipcm")]
            for g in cm.IP_CM_REQ.fields:
                alias = f"{m.prefix}.ip_cm.{g.name}"
                if g.kind == "ipv6":
                    out += [_cm_field(alias, "IPCM", g, when + "+ipcm+!v4"),
                            _cm_field(alias[:-1] + "4", "IPCM", g, when + "+ipcm+v4", True)]
                else:
                    out.append(_cm_field(alias, "IPCM", g, when + "+ipcm"))
        else:
            out.append(_cm_field(name, m.short, f, when))
        if m.short == "REQ" and f.name == "serviceid":
            out += [_cm_field(f"{name}.{g.name}", "SID", g, when + "+ipcm") for g in cm.IP_CM_SID.fields]
    return out


def _cm_fields() -> list[FieldDef]:
    """Every MAD and CM field; a name tshark gives twice (alt_reserved1) has two occurrences."""
    out = [FieldDef("infiniband.mad", NONE, (Source(None, "mad"),), "a management datagram on QP1 (256 bytes)")]
    out += [_cm_field(f"infiniband.mad.{f.name}", "MAD", f, "mad") for f in cm.MAD.fields]
    out.append(FieldDef("infiniband.mad.data", BYTES, (Source(f"{CM_PREFIX}MAD.data", "mad"),), "the MAD's data",
                        2 * (cm.MAD_LEN - cm.MAD_HEADER_LEN)))
    for m in cm.MESSAGES.values():
        out += _cm_message_fields(m)
    merged: dict[str, FieldDef] = {}
    for d in out:
        first = merged.get(d.name)
        merged[d.name] = d if first is None else FieldDef(d.name, d.kind, first.sources + d.sources, d.meaning,
                                                          d.hex_digits, bits=d.bits)
    return list(merged.values())


CM_FIELDS = _cm_fields()
# the messages Wireshark 4.0 names fields of are among its names; MRA, LAP, APR, SIDR are roceview's
_OWN_CM = {cm.tshark_name(m, f) for m in cm.MESSAGES.values() for f in m.header.fields
           if m.short not in cm.WIRESHARK_MESSAGES or (m.short, f.name) in cm.NOT_IN_WIRESHARK}
_WIRESHARK += [d for d in CM_FIELDS if d.name not in _OWN_CM]
ROCEVIEW_CM_FIELDS = [d for d in CM_FIELDS if d.name in _OWN_CM]


def _flag(f: FlagField) -> FieldDef:
    source = Source(f.column or "flags")       # evaluate._flag decides presence (bit, or column value)
    return FieldDef(FILTER_PREFIX + f.name, FLAG, (source,), f.meaning, flag=f)


# one occurrence per finding kind the packet is evidence for (evaluate.occurrences expands the bits)
FINDING = FieldDef(FINDING_FIELD, STR, (Source(FINDING_COLUMN),), "finding kinds this packet is evidence for",
                   vocab=FINDING_KINDS)

# `roceview.op.*`: the ops.csv row of the RDMA message a packet belongs to (analysis/op_marks.py
# decides which packets; dissect reads the capture twice for them). OP_NAMES is ops.csv's `op`
# vocabulary, analysis/ops_classes.OP_NAMES (not imported: it loads the analysis, ~0.15 s, which
# `analyze --filter` does not wait for; tests/filter/test_op_fields.py checks they agree).
OP_PREFIX = FILTER_PREFIX + "op."
OP_NAMES = ("SEND", "SEND_IMM", "SEND_INV", "WRITE", "WRITE_IMM", "READ", "CMP_SWAP", "FETCH_ADD", "FLUSH",
            "ATOMIC_WRITE")
OP_FIELDS = {d.name: d for d in [
    FieldDef(OP_PREFIX + "op", STR, (Source("_op_kind"),), "its operation (ops.csv op)", vocab=OP_NAMES),
    FieldDef(OP_PREFIX + "bytes", INT, (Source("_op_bytes"),), "its message's bytes (ops.csv bytes)"),
    FieldDef(OP_PREFIX + "latency", MICROS, (Source("_op_latency"),), "its latency in µs (ops.csv latency_us)"),
    FieldDef(OP_PREFIX + "packets", INT, (Source("_op_packets"),), "its request packets (ops.csv packets)"),
    FieldDef(OP_PREFIX + "retransmitted", BOOL, (Source("_op_retrans"),), "ops.csv retransmitted"),
    FieldDef(OP_PREFIX + "outstanding", INT, (Source("_op_outstanding"),), "ops.csv outstanding"),
    FieldDef(OP_PREFIX + "first_frame", INT, (Source("_op_first_frame"),), "its first frame (ops.csv first_frame)"),
]}
OP_FIELD_NAMES = tuple(OP_FIELDS)
OP_COLUMNS = frozenset(s.column for d in OP_FIELDS.values() for s in d.sources)
_ALIASES = ({f.name: f for f in _WIRESHARK + ROCEVIEW_CM_FIELDS} | {d.name: d for d in map(_flag, FLAG_FIELDS)}
            | {FINDING_FIELD: FINDING} | OP_FIELDS)
WIRESHARK_NAMES = tuple(f.name for f in _WIRESHARK)
FIELDS_BY_KIND_NONE = frozenset(f.name for f in _WIRESHARK if f.kind == NONE)   # protocols: presence only
_ALL: dict[str, FieldDef] = {}


def all_fields() -> dict[str, FieldDef]:
    """Every field name: packets-table columns, Wireshark aliases, flags. Loaded on first use:
    the column list lives in roceview.packets.table, whose pandas import (~0.2 s) a filter of
    Wireshark names alone (analyze --filter, before reading starts) does not wait for."""
    if not _ALL:
        from roceview.packets.table import COLUMNS

        _ALL.update({c: _own(c) for c in COLUMNS} | _ALIASES | DERIVED_FIELDS)
    return _ALL


def lookup(name: str, column: int | None) -> FieldDef:
    field = _ALIASES.get(name) or all_fields().get(name)
    if field is not None:
        return field
    import difflib

    from roceview.filter.parse import FilterError, quote

    close = difflib.get_close_matches(name, all_fields(), n=1, cutoff=0.6) if len(name) < 100 else []
    raise FilterError(f"unknown field {quote(name)}", column, f"did you mean {close[0]}?" if close else None)


# ---- fields computed from decoded columns (the columns: filter/derived.py) --------------------
DERIVED_PREFIX = _J = "_derived_"   # columns computed by filter/derived.py (never in the packets table)


def _x(name: str, kind: str, column: str, when: str | None = None, hex_digits: int = 0,
       extra: tuple = ()) -> FieldDef:
    """A tshark field computed from `column` (filter/derived.py DERIVED)."""
    sources = (Source(column, when),) + tuple(Source(c, when) for c in extra)
    return FieldDef(name, kind, sources, "tshark field", hex_digits)


SYNDROME = ("credit_count", "timer", "reserved_value", "error_code")   # by syndrome bits 6:5
_MAC_BITS = [_x(f"eth.{end}.{bit}", BOOL, f"{_J}{end}_{bit}") for end in ("dst", "src") for bit in ("lg", "ig")]
DERIVED_FIELDS = {f.name: f for f in [
    _x("eth.dst.oui", INT, _J + "dst_oui"), _x("eth.src.oui", INT, _J + "src_oui"),
    _x("eth.addr.oui", INT, _J + "dst_oui", extra=(_J + "src_oui",)),
    *_MAC_BITS,
    _x("eth.lg", BOOL, _J + "dst_lg", extra=(_J + "src_lg",)),
    _x("eth.ig", BOOL, _J + "dst_ig", extra=(_J + "src_ig",)),
    _x("vlan.etype", INT, _J + "outer_etype", hex_digits=4, extra=(_J + "inner_etype",)),
    _x("ip.dsfield", INT, _J + "tos", "ipv4", hex_digits=2),
    _x("ipv6.tclass", INT, _J + "tos", "ipv6", hex_digits=8),
    _x("ipv6.flow", INT, "flow_label", "ipv6", hex_digits=6),
    _x("infiniband.grh.tclass", INT, _J + "tos", "grh"),
    _x("infiniband.grh.flowlabel", INT, "flow_label", "grh"),
    _x("infiniband.aeth.syndrome.reserved", INT, _J + "syn_reserved"),
    _x("infiniband.aeth.syndrome.opcode", INT, _J + "syn_opcode"),
    *[_x(f"infiniband.aeth.syndrome.{name}", INT, f"{_J}syn_{name}") for name in SYNDROME],
    _x("infiniband.atomiceth.swapdt", INT, "atomic_swap_add"),
    _x("infiniband.atomiceth.cmpdt", INT, "atomic_compare"),
    _x("infiniband.atomicacketh.origremdt", INT, "atomic_ack_data"),
    _x("infiniband.immdt", BYTES, "imm_data", hex_digits=8),
    _x("infiniband.ieth", BYTES, "ieth_rkey", hex_digits=8),
    _x("infiniband.invariant.crc", INT, _J + "icrc", hex_digits=8),
    _x("macc.opcode", INT, _J + "macc_opcode", hex_digits=4),
    *[_x(f"macc.cbfc.enbv.c{p}", BOOL, f"{_J}enbv{p}") for p in range(8)],
]}
