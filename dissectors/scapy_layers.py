"""scapy layers generated from the header declarations, for crafting RoCE / PFC packets.

Every `Header` declared in `dissectors.ib`, `dissectors.cm`, `dissectors.macctl` and
`dissectors.tunnel` becomes one scapy `Packet` class here, its `fields_desc` derived field by field from the
declaration (`layer_class`), so a field added to a declaration is a scapy field at once:

* a field wholly inside a wider field of the same header (AETH `kind`/`code` inside
  `syndrome`) is a *view*: a read/write attribute on the wider field's bits, also
  accepted as a constructor keyword;
* bits no field covers become `reservedN` fields (N = bit offset from the header start);
* MAC / IPv4 / IPv6 kinds become MACField / IPField / IP6Field, bytes (CM private data)
  StrFixedLenField, byte-aligned 8/16/24/32/64 bit fields the usual scapy integer fields,
  everything else BitField.

The classes carry the roceview names (BTH, RETH, AETH, ...). scapy ships its own
`scapy.contrib.roce` with classes of the same names, bound to the same keys (UDP 4791,
EtherType 0x8915). This module never imports it; where some other code has loaded it,
dissection yields to it (its users expect its classes) except inside `preferred()`,
so both can live in one process (the test suite uses both).

Bindings are stated at the bottom, in one place. BTH chains its extended headers by
opcode (`dissectors.opcodes.OPCODES`), not by bindings; a UD SEND to QP1 carries a MAD, and a
CM MAD its message by attribute id (`dissectors.cm.MESSAGES`). `with_icrc(pkt)` appends a
correct ICRC (IBTA 7.8.1). Imports nothing from roceview, rich or textual.
"""
from __future__ import annotations

import sys
import zlib
from contextlib import contextmanager

from scapy.fields import (BitEnumField, BitField, ByteEnumField, ByteField, IntEnumField, IntField,
                          IP6Field, IPField, LongField, MACField, ShortEnumField, ShortField,
                          StrFixedLenField, ThreeBytesField, XBitField)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import GRE, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw, bind_bottom_up, bind_layers, bind_top_down

from dissectors import cm, ethernet, ib, ip, macctl, opcodes, tunnel
from dissectors.fields import Field, Header, field_value

# The optional 8-byte platform sub-header of ERSPAN type III, present when the O bit is set.
ERSPAN_III_PLATFORM = Header("ERSPAN-III-platform", "ERSPAN type III platform-specific sub-header", 8, (
    Field("platf_id", 0, 6, meaning="platform id"),
    Field("info", 0, 58, bit=6, meaning="platform-specific information"),
), spec="draft-foschiano-erspan 4.2.1")

# Defaults that make a bare layer a valid header (declarations default every field to 0).
# None = computed from the payload when the packet is built (see _LENGTHS).
_DEFAULTS = {
    "BTH": {"pkey": 0xFFFF},
    "GRH": {"ipver": 6, "nxthdr": 0x1B, "hoplmt": 64, "paylen": None},
    "LRH": {"lnh": 2, "pktlen": None},
    "MACControl": {"opcode": macctl.MACCTL_OPCODE_PAUSE},
    "PAUSE": {"opcode": macctl.MACCTL_OPCODE_PAUSE},
    "PFC": {"opcode": macctl.MACCTL_OPCODE_PFC},
    "ERSPAN-II": {"ver": 1},
    "ERSPAN-III": {"ver": 2},
    "MAD": {"baseversion": 1, "mgmtclass": cm.MGMT_CLASS_CM, "classversion": 2, "method": 0x03},
}

# Value names shown by scapy (and accepted when crafting: BTH(opcode="RC_SEND_ONLY")).
_ENUMS = {("BTH", "opcode"): {op: opcodes.opcode_name(op) for op in opcodes.OPCODES}}

# Length fields filled in at build time from the payload length (IBTA 8.3 GRH PayLen:
# BTH to ICRC; IBTA 7.7.8 LRH PktLen: LRH to ICRC in 4-byte words, VCRC excluded).
_LENGTHS = {
    "GRH": ("paylen", lambda payload: payload),
    "LRH": ("pktlen", lambda payload: (ib.LRH.length + payload) // 4),
}


# ---------------------------------------------------------------- derivation

def _span(f: Field) -> tuple[int, int]:
    start = f.offset * 8 + f.bit
    return start, start + f.bits


def _inside(inner: Field, outer: Field) -> bool:
    (a, b), (c, d) = _span(inner), _span(outer)
    return inner is not outer and c <= a and b <= d and (d - c) > (b - a)


def layout(header: Header) -> tuple[list[Field], dict[str, Field]]:
    """(wire fields in order with reserved gaps filled, views: sub-field -> containing field)."""
    views = {f.name: next(g for g in header.fields if _inside(f, g))
             for f in header.fields if any(_inside(f, g) for g in header.fields)}
    outer = sorted((f for f in header.fields if f.name not in views), key=_span)
    wire, pos = [], 0
    for f in outer + [None]:
        start = _span(f)[0] if f else header.length * 8
        if start < pos:
            raise ValueError(f"{header.name}: field {f.name} overlaps the field before it")
        if start > pos:
            wire.append(Field(f"reserved{pos}", pos // 8, start - pos, bit=pos % 8, meaning="reserved"))
        if f:
            wire.append(f)
            pos = _span(f)[1]
    return wire, views


_INT_FIELDS = {8: (ByteField, ByteEnumField), 16: (ShortField, ShortEnumField), 24: (ThreeBytesField, None),
               32: (IntField, IntEnumField), 64: (LongField, None)}


def scapy_field(header: Header, f: Field):
    """One scapy field for one declared field."""
    default = _DEFAULTS.get(header.name, {}).get(f.name, 0)
    aligned = f.bit == 0 and f.bits % 8 == 0
    if f.kind in ("mac", "ipv4", "ipv6"):
        if not aligned:
            raise ValueError(f"{header.name}.{f.name}: address fields must be byte-aligned")
        cls, zero = {"mac": (MACField, "00:00:00:00:00:00"), "ipv4": (IPField, "0.0.0.0"),
                     "ipv6": (IP6Field, "::")}[f.kind]
        return cls(f.name, default or zero)
    if f.kind == "bytes":
        return StrFixedLenField(f.name, default or bytes(f.bits // 8), length=f.bits // 8)
    enum = _ENUMS.get((header.name, f.name), f.values)
    if aligned and f.bits in _INT_FIELDS:
        plain, with_enum = _INT_FIELDS[f.bits]
        if enum and with_enum:
            return with_enum(f.name, default, enum)
        if not enum:
            return plain(f.name, default)
    if enum:
        return BitEnumField(f.name, default, f.bits, enum)
    return (XBitField if f.name.startswith("reserved") else BitField)(f.name, default, f.bits)


def _patch(data: bytes, f: Field, value: int) -> bytes:
    """`data` with field `f` (at offset 0 of the header) set to `value`."""
    shift = f.nbytes * 8 - f.bit - f.bits
    mask = ((1 << f.bits) - 1) << shift
    word = int.from_bytes(data[f.offset:f.end], "big") & ~mask | (value << shift) & mask
    return data[:f.offset] + word.to_bytes(f.nbytes, "big") + data[f.end:]


class DeclaredHeader(Packet):
    """Base of the generated layers: views as attributes, length fields filled at build."""
    header: Header = None
    views: dict[str, Field] = {}

    def __init__(self, _pkt=b"", *args, **kwargs):
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in self.views}
        super().__init__(_pkt, *args, **kwargs)
        for name, value in given.items():
            setattr(self, name, value)

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        length = _LENGTHS.get(self.header.name)
        if length and getattr(self, length[0]) is None:
            pkt = _patch(pkt, self.header.field(length[0]), length[1](len(pay)))
        return pkt + pay


def _view(sub: Field, outer: Field) -> property:
    shift = _span(outer)[1] - _span(sub)[1]
    mask = (1 << sub.bits) - 1

    def get(self):
        return ((getattr(self, outer.name) or 0) >> shift) & mask

    def put(self, value):
        whole = getattr(self, outer.name) or 0
        setattr(self, outer.name, whole & ~(mask << shift) | (int(value) & mask) << shift)

    return property(get, put, doc=sub.meaning)


def layer_class(header: Header, base: type = DeclaredHeader, **extra) -> type:
    """A scapy Packet class generated from a header declaration (`extra`: more class attributes)."""
    wire, views = layout(header)
    namespace = {"name": header.title, "header": header, "views": dict(views),
                 "fields_desc": [scapy_field(header, f) for f in wire], "__module__": __name__,
                 "__doc__": f"{header.title} ({header.spec})", **extra}
    for sub, outer in views.items():
        namespace[sub] = _view(header.field(sub), outer)
    return type(header.name.replace("-", "_").replace(" ", "_"), (base,), namespace)


# ---------------------------------------------------------------- living beside scapy.contrib.roce

_preferred = 0                      # > 0 inside `preferred()`


@contextmanager
def preferred():
    """Dissect with these layers even where scapy.contrib.roce is loaded too."""
    global _preferred
    _preferred += 1
    try:
        yield
    finally:
        _preferred -= 1


def _yielding(name: str):
    """dispatch_hook of a layer that scapy.contrib.roce also binds: bytes dissect as its
    class when that module is loaded, outside `preferred()`; crafting is never affected."""

    @classmethod
    def dispatch_hook(cls, _pkt=None, *args, **kwargs):
        contrib = sys.modules.get("scapy.contrib.roce")
        if _pkt and contrib is not None and not _preferred:
            return getattr(contrib, name)
        return cls

    return dispatch_hook


def _first(lower: type, upper: type) -> None:
    """Move the (lower -> upper) dissection binding ahead of any bound before this module."""
    mine = [entry for entry in lower.payload_guess if entry[1] is upper]
    lower.payload_guess = mine + [entry for entry in lower.payload_guess if entry[1] is not upper]


# ---------------------------------------------------------------- transport: chaining by opcode

def _bth_below(layer):
    while layer is not None and not isinstance(layer, BTH):
        layer = layer.underlayer
    return layer


class TransportHeader(DeclaredHeader):
    """BTH and the extended headers: the next header is the opcode's next extended header."""

    def guess_payload_class(self, payload):
        bth = _bth_below(self)
        entry = opcodes.OPCODES.get(bth.opcode) if bth is not None else None
        if entry is not None and (self is bth or self.header.name in entry[2]):
            chain = entry[2]
            rest = chain if self is bth else chain[chain.index(self.header.name) + 1:]
            if not rest and entry[0] == "UD" and bth.destqp == cm.GSI_QP:
                return MAD                       # QP1 (IBTA 13.5.1): management datagrams
            return EXT_CLASSES[rest[0]] if rest else Raw
        return super().guess_payload_class(payload)


class MACControlPDU(DeclaredHeader):
    """PAUSE and PFC: what follows them is padding up to the 60-byte minimum frame."""

    def extract_padding(self, s):
        return b"", s


@classmethod
def _dispatch_by_opcode(cls, _pkt=None, *args, **kwargs):
    """MAC Control frames dissect as PAUSE or PFC by their opcode (scapy looks for this
    hook in the class's own namespace, hence passed to `layer_class`)."""
    pdu = MACCTL_BY_OPCODE.get(int.from_bytes(_pkt[:2], "big")) if _pkt and len(_pkt) >= 2 else None
    return pdu if pdu is not None and len(_pkt) >= pdu.header.length else cls


class MADHeader(DeclaredHeader):
    """The MAD common header: a CM MAD is followed by its message (by attribute id)."""

    def guess_payload_class(self, payload):
        message = cm.MESSAGES.get(self.attributeid) if self.mgmtclass == cm.MGMT_CLASS_CM else None
        return CM_CLASSES[message.short] if message else Raw


class ERSPANIIIHeader(DeclaredHeader):
    """ERSPAN type III: the mirrored frame, after the platform sub-header when O is set."""

    def guess_payload_class(self, payload):
        return ERSPAN_III_platform if self.o else Ether


# ---------------------------------------------------------------- the layers

LRH = layer_class(ib.LRH)
GRH = layer_class(ib.GRH, dispatch_hook=_yielding("GRH"))
BTH = layer_class(ib.BTH, TransportHeader, dispatch_hook=_yielding("BTH"))
RDETH = layer_class(ib.RDETH, TransportHeader)
DETH = layer_class(ib.DETH, TransportHeader)
XRCETH = layer_class(ib.XRCETH, TransportHeader)
RETH = layer_class(ib.RETH, TransportHeader)
AtomicETH = layer_class(ib.ATOMICETH, TransportHeader)
AETH = layer_class(ib.AETH, TransportHeader)
AtomicAckETH = layer_class(ib.ATOMICACKETH, TransportHeader)
ImmDt = layer_class(ib.IMMDT, TransportHeader)
IETH = layer_class(ib.IETH, TransportHeader)
CNP = layer_class(ib.CNP_PAD, TransportHeader)
DCETH = layer_class(ib.DCETH, TransportHeader)
MACControl = layer_class(macctl.MACCTL, dispatch_hook=_dispatch_by_opcode)
PAUSE = layer_class(macctl.PAUSE, MACControlPDU)
PFC = layer_class(macctl.PFC, MACControlPDU)
ERSPAN_II = layer_class(tunnel.ERSPAN_II)
ERSPAN_III = layer_class(tunnel.ERSPAN_III, ERSPANIIIHeader)
ERSPAN_III_platform = layer_class(ERSPAN_III_PLATFORM)
MAD = layer_class(cm.MAD, MADHeader)
CM_CLASSES = {m.short: layer_class(m.header) for m in cm.MESSAGES.values()}   # CM_CLASSES["REQ"], ...
IP_CM = layer_class(cm.IP_CM_REQ)                  # bytes(IP_CM(...)): a REQ's private data

EXT_CLASSES = {cls.header.name: cls for cls in
               (RDETH, DETH, XRCETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, CNP, DCETH)}
MACCTL_BY_OPCODE = {macctl.MACCTL_OPCODE_PAUSE: PAUSE, macctl.MACCTL_OPCODE_PFC: PFC}
LAYERS = (LRH, GRH, BTH, *EXT_CLASSES.values(), MACControl, PAUSE, PFC, ERSPAN_II, ERSPAN_III,
          ERSPAN_III_platform, MAD, *CM_CLASSES.values(), IP_CM)


# ---------------------------------------------------------------- ICRC (IBTA 7.8.1, A16.4, A17.4)

# Variant fields, replaced by ones before the CRC: they may change hop by hop.
ICRC_VARIANT = {
    "IPv4": (ip.IPV4, ("dscp", "ecn", "ttl", "checksum")),
    "IPv6": (ip.IPV6, ("dscp", "ecn", "flow_label", "hop_limit")),
    "GRH": (ib.GRH, ("dscp", "ecn", "flow_label", "hoplmt")),
    "UDP": (ip.UDP, ("checksum",)),
    "BTH": (ib.BTH, ("fecn", "becn", "resv6")),
    "LRH": (ib.LRH, ("vl",)),
}


def _masked(data: bytes, kind: str) -> bytes:
    header, names = ICRC_VARIANT[kind]
    for name in names:
        f = header.field(name)
        data = _patch(data, f, (1 << f.bits) - 1)
    return data


def _roce_layers(pkt: Packet) -> tuple[bytes, dict[str, int]]:
    """Frame bytes and offsets of the innermost frame's IP/IPv6/GRH/UDP/LRH and its BTH.

    Works on crafted packets too (a BTH on a `--roce-port` that scapy would not dissect)."""
    frame = bytes(pkt)
    found: dict[str, int] = {}
    layer = pkt
    while layer and not isinstance(layer, BTH):
        if isinstance(layer, Ether):                  # a mirrored frame starts afresh
            found.clear()
        for kind, cls in (("IPv4", IP), ("IPv6", IPv6), ("GRH", GRH), ("UDP", UDP), ("LRH", LRH)):
            if isinstance(layer, cls):
                found[kind] = len(frame) - len(bytes(layer))
        layer = layer.payload
    if not layer:
        raise ValueError("no BTH in this packet")
    found["BTH"] = len(frame) - len(bytes(layer))
    return frame, found


def _end(frame: bytes, found: dict[str, int]) -> int:
    """End of the RoCE / IB packet (after its ICRC), from the length fields."""
    if "UDP" in found:
        return found["UDP"] + field_value(frame, found["UDP"], ip.UDP.field("length"))
    if "GRH" in found:
        return found["GRH"] + ib.GRH.length + field_value(frame, found["GRH"], ib.GRH.field("paylen"))
    return found["LRH"] + 4 * field_value(frame, found["LRH"], ib.LRH.field("pktlen"))


def icrc(pkt: Packet) -> int:
    """The ICRC the packet's (innermost) RoCE / IB packet should carry, from its length fields."""
    frame, found = _roce_layers(pkt)
    l3 = next((k for k in ("IPv4", "IPv6", "GRH") if k in found), None)
    if l3 is None and "LRH" in found:                 # IBA local packet: the LRH itself is covered
        covered = _masked(frame[found["LRH"]:found["LRH"] + ib.LRH.length], "LRH")
    else:
        covered = b"\xff" * ib.LRH.length
    for kind, upto in ((l3, "UDP" if "UDP" in found else "BTH"), ("UDP", "BTH")):
        if kind in found:
            covered += _masked(frame[found[kind]:found[upto]], kind)
    bth = found["BTH"]
    covered += _masked(frame[bth:bth + ib.BTH.length], "BTH") + frame[bth + ib.BTH.length:_end(frame, found) - ib.ICRC_LEN]
    return zlib.crc32(covered) & 0xFFFFFFFF


def with_icrc(pkt: Packet) -> Packet:
    """`pkt` with its ICRC appended (little-endian, as the CRC register is sent); length
    fields left to scapy (IP, UDP, GRH PayLen, LRH PktLen) count the 4 ICRC bytes."""
    crc = icrc(pkt / Raw(b"\0" * ib.ICRC_LEN))
    return pkt / Raw(crc.to_bytes(ib.ICRC_LEN, "little"))


# ---------------------------------------------------------------- bindings, in one place

for _below in (Ether, Dot1Q, Dot1AD):
    bind_layers(_below, GRH, type=ethernet.ETHERTYPE_ROCE_V1)          # RoCEv1, IBTA A16
    bind_layers(_below, MACControl, type=ethernet.ETHERTYPE_MAC_CONTROL)
    bind_top_down(_below, PAUSE, type=ethernet.ETHERTYPE_MAC_CONTROL)   # MACControl dispatches
    bind_top_down(_below, PFC, type=ethernet.ETHERTYPE_MAC_CONTROL)     # to these when reading
bind_layers(UDP, BTH, dport=ib.ROCE_V2_UDP_PORT)                        # RoCEv2, IBTA A17.2
bind_layers(GRH, BTH)
for _below, _above in ((Ether, GRH), (Dot1Q, GRH), (Dot1AD, GRH), (UDP, BTH)):
    _first(_below, _above)                 # ahead of scapy.contrib.roce if it was loaded first
bind_layers(LRH, BTH, lnh=2)                                            # IBA local
bind_layers(LRH, GRH, lnh=3)                                            # IBA global
bind_layers(GRE, ERSPAN_II, proto=ethernet.ETHERTYPE_ERSPAN_II, seqnum_present=1)
bind_bottom_up(GRE, Ether, proto=ethernet.ETHERTYPE_ERSPAN_II, seqnum_present=0)   # ERSPAN type I
bind_layers(GRE, ERSPAN_III, proto=ethernet.ETHERTYPE_ERSPAN_III)
bind_layers(ERSPAN_II, Ether)
bind_layers(ERSPAN_III_platform, Ether)
