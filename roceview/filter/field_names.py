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

from dissectors import ib, opcodes
from roceview.packets.batch import PROTO_NAMES
from roceview.packets.decode import BOOL_COLUMNS as HEADER_BOOL_COLUMNS
from roceview.packets.flags import FILTER_PREFIX, FINDING_COLUMN, FINDING_FIELD, FINDING_KINDS, FLAG_FIELDS, FlagField

# kinds: how a literal is read and compared (roceview/filter/values.py)
INT, BOOL, MAC, IPV4, IPV6, ADDR, STR, NONE, FLAG = "int", "bool", "mac", "ipv4", "ipv6", "addr", "str", "none", "flag"
# times, in ns (literals: packets/times.py): seconds (`0.000010112`, -T fields with 9 decimals as
# tshark), and a date and time of day (`"2023-11-14 22:13:20.5"`, `"Nov 14, 2023 22:13:20"`)
RELTIME, ABSTIME = "reltime", "abstime"
ETH_TYPE_COLUMN = "_eth_type"     # derived (filter/evaluate.py DERIVED): the Ethernet header's own type


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
            "infiniband.aeth.syndrome",
         16: "eth.type vlan.id vlan.priority ip.id udp.srcport udp.dstport udp.port infiniband.lrh.dlid infiniband.lrh.slid "
             "infiniband.bth.p_key macc.pause_time macc.cbfc.enbv " + " ".join(f"macc.cbfc.pause_time.c{p}" for p in range(8)),
         24: "infiniband.bth.destqp infiniband.bth.psn infiniband.rdeth.eecnxt infiniband.aeth.msn",
         32: "frame.number frame.len frame.cap_len ipv6.tclass.dscp ipv6.tclass.ecn infiniband.deth.srcqp "
             "infiniband.reth.r_key infiniband.reth.dmalen",
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
] + [_w(f"macc.cbfc.pause_time.c{p}", INT, f"pfc_quanta{p}") for p in range(8)]


def _flag(f: FlagField) -> FieldDef:
    source = Source(f.column or "flags")       # evaluate._flag decides presence (bit, or column value)
    return FieldDef(FILTER_PREFIX + f.name, FLAG, (source,), f.meaning, flag=f)


# one occurrence per finding kind the packet is evidence for (evaluate.occurrences expands the bits)
FINDING = FieldDef(FINDING_FIELD, STR, (Source(FINDING_COLUMN),), "finding kinds this packet is evidence for",
                   vocab=FINDING_KINDS)
_ALIASES = ({f.name: f for f in _WIRESHARK} | {d.name: d for d in map(_flag, FLAG_FIELDS)}
            | {FINDING_FIELD: FINDING})
WIRESHARK_NAMES = tuple(f.name for f in _WIRESHARK)
FIELDS_BY_KIND_NONE = frozenset(f.name for f in _WIRESHARK if f.kind == NONE)   # protocols: presence only
_ALL: dict[str, FieldDef] = {}


def all_fields() -> dict[str, FieldDef]:
    """Every field name: packets-table columns, Wireshark aliases, flags. Loaded on first use:
    the column list lives in roceview.packets.table, whose pandas import (~0.2 s) a filter of
    Wireshark names alone (analyze --filter, before reading starts) does not wait for."""
    if not _ALL:
        from roceview.packets.table import COLUMNS

        _ALL.update({c: _own(c) for c in COLUMNS} | _ALIASES)
    return _ALL


def lookup(name: str, column: int | None) -> FieldDef:
    field = _ALIASES.get(name) or all_fields().get(name)
    if field is not None:
        return field
    import difflib

    from roceview.filter.parse import FilterError, quote

    close = difflib.get_close_matches(name, all_fields(), n=1, cutoff=0.6) if len(name) < 100 else []
    raise FilterError(f"unknown field {quote(name)}", column, f"did you mean {close[0]}?" if close else None)
