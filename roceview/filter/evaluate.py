"""A parsed filter compiled once into closures over a Batch's numpy columns.

Each test node becomes `fn(ctx) -> bool array`; a field's occurrences (values, present) are
computed once per batch and shared by every test of that field. Semantics are Wireshark's
(wireshark-filter(4)), checked against tshark 4.0 (tests/filter/test_filter_equals_tshark.py): a comparison is
true when ANY occurrence satisfies it (`==`, `<`, `in`, ...) and false on a frame without the
field; `a != b` is all_ne: the field is present and no occurrence equals b (`ip.addr != X`:
neither address is X). tshark 4.0 does NOT match a frame without the field with `!=`:
`!(ip.src == X)` and `ip.src not in {X}` do. `===` wants every occurrence equal, `!==` some
occurrence different; a bare field is "present".
"""
from __future__ import annotations

import numpy as np

from dissectors import cm
from dissectors.fields import column_dtype, extract
from roceview.packets.batch import PROTO_CODE, Batch
from roceview.filter import derived, field_names as F
from roceview.filter.parse import FilterError, Node
from roceview.filter.values import LID_MARK, compare_test, member_test

_ROCE = [PROTO_CODE[p] for p in ("roce_v1", "roce_v2", "ib")]
_GRH = [PROTO_CODE[p] for p in ("roce_v1", "ib")]
_MACCTL = [PROTO_CODE[p] for p in ("pfc", "pause")]
_LID_WORDS = np.frombuffer(LID_MARK[:8], ">u8")[0], int.from_bytes(LID_MARK[8:12], "big")


def _not_lid(b: Batch) -> np.ndarray:
    words = np.ascontiguousarray(b.cols["_src_addr"]).view(">u8")
    return (words[:, 0] != _LID_WORDS[0]) | ((words[:, 1] >> np.uint64(32)) != _LID_WORDS[1])


def _ipv6(b: Batch) -> np.ndarray:
    return ~b.mask("ip_frag") & b.mask("ethertype") & (b.cols["ethertype"] == 0x86DD) & ~np.isin(b.cols["_proto"], _GRH)


# layer conditions: (columns read, mask)
CONDITIONS = {
    "ipv4": (("ip_frag",), lambda b: b.mask("ip_frag")),            # valid exactly where L3 is IPv4
    "ipv6": (("ip_frag", "ethertype", "_proto"), _ipv6),
    "grh": (("_proto", "_src_addr"), lambda b: np.isin(b.cols["_proto"], _GRH) & _not_lid(b)),
    "roce": (("_proto",), lambda b: np.isin(b.cols["_proto"], _ROCE)),
    "macctl": (("_proto",), lambda b: np.isin(b.cols["_proto"], _MACCTL)),
}


def _eth_type(b: Batch) -> tuple[np.ndarray, np.ndarray]:
    """eth.type: 0x8100 where a VLAN tag follows the MACs, else the EtherType; on Ethernet II
    frames (an 802.3 frame's length, below 0x0600, is no type: tshark shows none)."""
    tagged = b.mask("vlan_id")
    ethernet = b.mask("_dst_mac") & (tagged | b.mask("ethertype") & (b.cols["ethertype"] >= 0x0600))
    return np.where(tagged, 0x8100, b.cols["ethertype"]).astype(np.uint16), ethernet


# ---- MADs and CM messages (field_names CM_FIELDS): conditions on a row, values from its MAD bytes
_MAD = ("_mad_whole", "mad_class", "mad_attr_id")


def _cm_condition(spec: str):
    """(columns read, batch -> mask) of "mad", "cm:REQ", "cm:REQ+ipcm+!v4" (field_names: what
    each part means)."""
    head, *parts = spec.split("+")
    attr = cm.ATTR.get(head[3:]) if head.startswith("cm:") else None
    cols = set(_MAD) | ({"ip_frag"} if any(p.endswith("ipv4") for p in parts) else set()) | (
        {"cm_service_id"} if any(p.endswith("ipcm") for p in parts) else set()) | (
        {"_cm_mad"} if any(p.endswith("v4") and not p.endswith("ipv4") for p in parts) else set())

    def mask(b: Batch) -> np.ndarray:
        out = b.mask("_mad_whole") & b.cols["_mad_whole"]
        if attr is not None:
            out = out & (b.cols["mad_class"] == cm.MGMT_CLASS_CM) & (b.cols["mad_attr_id"] == attr)
        for part in parts:
            out = out & (_cm_part(b, part.lstrip("!")) != part.startswith("!"))
        return out
    return tuple(sorted(cols)), mask


def _cm_part(b: Batch, part: str) -> np.ndarray:
    if part == "ipv4":                                   # tshark: pinfo->dst is an IPv4 address
        return b.mask("ip_frag")
    if part == "ipcm":
        return (b.cols["cm_service_id"] & np.uint64(cm.IP_CM_SID_MASK)) == np.uint64(cm.IP_CM_SID_PREFIX)
    rows, mads = _mads(b, "a REQ's IP CM field")                     # "v4": the IP CM private data's version
    out = np.zeros(b.n, bool)
    out[rows] = (mads[:, cm.LOCATIONS["IPCM"][1] + 1] >> 4) == 4
    return out


def _mads(b: Batch, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows holding a whole MAD, their bytes as a (rows, 256) matrix)."""
    if "_cm_mad" not in b.cols:
        raise FilterError(f"{what} is read from the MAD's bytes, which dissect keeps and analyze --filter does not "
                          "(the CM fields a packets-table column holds work there: docs/columns.md)")
    rows = np.flatnonzero(b.mask("_cm_mad"))
    data = b"".join(b.cols["_cm_mad"][rows].tolist())
    return rows, np.frombuffer(data, np.uint8).reshape(len(rows), cm.MAD_LEN)


def _cm_value(b: Batch, name: str, rows: np.ndarray, mads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A field of the MAD bytes ("_cm:REQ.startpsn"; "@4": a 16-byte address's last 4 bytes, as
    an IPv4 address is kept) on the rows holding a whole MAD (`mads`: their bytes)."""
    where, _, rest = name[len(F.CM_PREFIX):].partition(".")
    fname, _, tail = rest.partition("@")
    ok = np.zeros(b.n, bool)
    ok[rows] = True
    if where == "MAD" and fname == "data":
        start, width = cm.MAD_HEADER_LEN, cm.MAD_LEN - cm.MAD_HEADER_LEN
    else:
        header, base = cm.LOCATIONS[where]
        f = header.field(fname)
        if f.kind not in ("bytes", "ipv6"):
            out = np.zeros(b.n, column_dtype(f))
            out[rows] = extract(mads, f, base)
            return out, ok
        start, width = base + f.offset, f.bits // 8
    out = np.zeros((b.n, width), np.uint8)
    out[rows] = mads[:, start:start + width]
    if tail:                                             # as the Batch keeps IPv4: ::ffff:a.b.c.d
        out[:, :10], out[:, 10:12] = 0, 0xFF
    return out, ok


def _cm_message(b: Batch) -> tuple[np.ndarray, np.ndarray]:
    """cm_message: the attribute id of a CM MAD (field_names vocab: its name)."""
    ok = b.mask("mad_attr_id") & b.mask("mad_class") & (b.cols["mad_class"] == cm.MGMT_CLASS_CM)
    return np.minimum(b.cols["mad_attr_id"], 255).astype(np.uint8), ok


# columns computed from others when a filter reads them: (columns read, batch -> (values, valid))
DERIVED = {F.ETH_TYPE_COLUMN: (("vlan_id", "ethertype", "_dst_mac"), _eth_type),
           F.CM_MESSAGE_COLUMN: (("mad_attr_id", "mad_class"), _cm_message), **derived.DERIVED}
CONDITIONS.update({s.when: _cm_condition(s.when) for d in F.CM_FIELDS for s in d.sources})
_CLOCK_COLUMNS = ("_ts_rel", "_ts_delta", "_ts_delta_displayed")     # packets/times.py Clock


def columns_of(field: F.FieldDef) -> set[str]:
    cols = set()
    for s in field.sources:
        if s.column in DERIVED:
            cols.update(DERIVED[s.column][0])
        elif s.column and s.column.startswith(F.CM_PREFIX):
            cols.add("_cm_mad")
        elif s.column:
            cols.add(s.column)
        if s.when in CONDITIONS:
            cols.update(CONDITIONS[s.when][0])
    if field.flag is not None and field.flag.value_column and not field.flag.column:
        cols.add(field.flag.value_column)
    return cols


def occurrences(b: Batch, field: F.FieldDef) -> list[tuple[np.ndarray, np.ndarray]]:
    """(values, present) of each occurrence of `field` in batch `b`."""
    if field is F.FINDING:
        return _finding_kinds(b, field)
    out = []
    for s in field.sources:
        if field.kind == F.FLAG:
            out.append(_flag(b, field, s))
            continue
        present = CONDITIONS[s.when][1](b) if s.when else None
        if s.column is None:
            out.append((np.ones(b.n, np.uint8), present))
            continue
        values, valid = _source(b, s.column, field)
        out.append((values, valid if present is None else valid & present))
    return out


def _source(b: Batch, name: str, field: F.FieldDef) -> tuple[np.ndarray, np.ndarray]:
    if name in DERIVED:
        return DERIVED[name][1](b)
    if name.startswith(F.CM_PREFIX):
        return _cm_value(b, name, *_mads(b, field.name))
    if name in F.OP_COLUMNS and name not in b.cols:
        raise FilterError(f"{field.name} needs the operations of the whole capture: dissect reads the capture "
                          "twice for it (analyze --filter, which filters before the analysis, cannot)")
    if name in _CLOCK_COLUMNS and name not in b.cols:
        raise FilterError(f"{field.name} needs the times of the packets before it: dissect and the TUI have it "
                          "(analyze --filter, which filters each chunk alone, cannot)")
    return _column(b, name, field), b.mask(name)


def _finding_kinds(b: Batch, field: F.FieldDef) -> list[tuple[np.ndarray, np.ndarray]]:
    """One occurrence per finding kind: its code, present where the packet is its evidence."""
    bits = b.cols.get(field.sources[0].column)
    if bits is None:
        raise FilterError(f"{field.name} needs the findings of the whole capture: dissect reads the capture "
                          "twice for it (analyze --filter, which filters before the analysis, cannot)")
    return [(np.full(b.n, i, np.int64), (bits >> np.uint64(i)) & np.uint64(1) != 0)
            for i in range(len(field.vocab))]


def _column(b: Batch, name: str, field: F.FieldDef) -> np.ndarray:
    try:
        return b.cols[name]
    except KeyError:
        raise FilterError(f'{field.name} needs column "{name}", which this batch was decoded without '
                          "(decode the columns DisplayFilter.fields lists)") from None


def _flag(b: Batch, field: F.FieldDef, s: F.Source):
    f = field.flag
    if f.column:                    # decided by a packets-table column (bad ICRC, truncated)
        values = _column(b, f.column, field)
        present = b.mask(f.column) & (values == f.column_value)
        return np.ones(b.n, np.uint8), present
    if "flags" not in b.cols:
        raise FilterError(f"{field.name} needs the analysis flags: dissect -Y and read_packets(analysis=True) "
                          "have them; analyze --filter cannot (they come from the analysis it filters)")
    present = (b.cols["flags"] & int(f.flag)) != 0
    if f.value_column and f.value_column in b.cols:
        return b.cols[f.value_column], present & b.mask(f.value_column)
    return np.ones(b.n, np.uint8), present


class _Ctx:
    def __init__(self, batch: Batch):
        self.batch = batch
        self.cache: dict[str, list] = {}

    def occ(self, field: F.FieldDef) -> list:
        if field.name not in self.cache:
            self.cache[field.name] = occurrences(self.batch, field)
        return self.cache[field.name]


def _any(parts: list[np.ndarray], n: int) -> np.ndarray:
    return np.logical_or.reduce(parts) if parts else np.zeros(n, bool)


def _test_node(node: Node, fields: dict):
    field = F.lookup(node.field, node.column)
    fields[field.name] = field
    if node.op == "has":
        return lambda ctx: _any([p for _, p in ctx.occ(field)], ctx.batch.n)
    if field.kind == F.BYTES:
        test = _bytes_test(field, node)
    elif field.kind in (F.RELTIME, F.ABSTIME):
        test = _time_test(field, node)
    elif node.op in ("in", "not in"):
        test = member_test(field, node.items)
    else:
        test = compare_test(field, "==" if node.op in ("!=", "===", "!==") else node.op, node.value)
    hit = lambda ctx: _any([p & test(v) for v, p in ctx.occ(field)], ctx.batch.n)  # noqa: E731
    if node.op == "not in":
        return lambda ctx: ~hit(ctx)
    if node.op == "!=":            # all_ne: present, and no occurrence equal
        return lambda ctx: _any([p for _, p in ctx.occ(field)], ctx.batch.n) & ~hit(ctx)
    if node.op == "===":           # all_eq: present, and every present occurrence equal
        return lambda ctx: _any([p for _, p in ctx.occ(field)], ctx.batch.n) & np.logical_and.reduce(
            [~p | test(v) for v, p in ctx.occ(field)])
    if node.op == "!==":           # any_ne
        return lambda ctx: _any([p & ~test(v) for v, p in ctx.occ(field)], ctx.batch.n)
    return hit


def _bytes_test(field: F.FieldDef, node: Node):
    """values -> bool array of a bytes field (rows of bytes) against a literal of hex bytes
    (`00:1a:2b`, `00-1a-2b`, `001a2b`): equal when every byte is, as tshark compares FT_BYTES."""
    from roceview.filter.parse import quote

    if node.op not in ("==", "!=", "===", "!=="):
        raise FilterError(f"{field.name} is a byte string: compare it with == or != only", node.column)
    text = node.value.text.replace(":", "").replace("-", "").replace(".", "")
    try:
        want = np.frombuffer(bytes.fromhex(text), np.uint8)
    except ValueError:
        raise FilterError(f"{quote(node.value.text)} is not a byte string ({field.name}: hex bytes such as "
                          "00:1a:2b)", node.value.column) from None
    whole = int.from_bytes(want.tobytes(), "big")        # an integer column shown as bytes (immdt)
    size = field.hex_digits // 2

    def test(v):
        if v.ndim == 2:
            return (v == want).all(axis=1) if v.shape[1] == len(want) else np.zeros(len(v), bool)
        return v == whole if len(want) == size else np.zeros(len(v), bool)
    return test


def _time_test(field: F.FieldDef, node: Node):
    """values -> bool array of a time field against its literal(s), in ns (packets/times.py)."""
    if node.op in ("in", "not in"):
        tests = [(_time_literal(field, low), None if high is None else _time_literal(field, high))
                 for low, high in node.items]
        return lambda v: np.logical_or.reduce([(v == lo) if hi is None else (v >= lo) & (v <= hi) for lo, hi in tests]
                                              + [np.zeros(len(v), bool)])
    ns = _time_literal(field, node.value)
    op = "==" if node.op in ("!=", "===", "!==") else node.op
    compare = {"==": np.equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op]
    return lambda v: compare(v.astype(np.int64, copy=False), ns)


def _time_literal(field: F.FieldDef, v) -> int:
    from roceview.filter.parse import quote
    from roceview.packets.times import parse_absolute, parse_relative

    if field.kind == F.ABSTIME:
        ns = parse_absolute(v.text)
        if ns is None:
            raise FilterError(f"{quote(v.text)} is not a valid absolute time. Example: \"Nov 12, 1999 08:55:44.123\" "
                              "or \"2011-07-04 12:34:56\"", v.column)
        return ns
    ns = None if v.quoted else parse_relative(v.text)
    if ns is None:
        raise FilterError(f"{quote(v.text)} is not a valid time ({field.name} is in seconds: 1.5, 0.000010112)",
                          v.column)
    return ns


def build(node: Node, fields: dict):
    """The tree as one function ctx -> bool array; `fields` collects the FieldDefs used."""
    if node.op in ("and", "or", "xor"):
        parts = [build(a, fields) for a in node.args]
        return lambda ctx: _combine(node.op, parts, ctx)
    if node.op == "not":
        inner = build(node.args[0], fields)
        return lambda ctx: ~inner(ctx)
    return _test_node(node, fields)


def _combine(op: str, parts, ctx) -> np.ndarray:
    """`a or b or c ...` accumulated in place: a chain of 1,000 clauses (a generated filter)
    holds two arrays at a time, not the (1000, n) stack np.logical_or.reduce builds of a list
    (1 GB per million packets; 4-7 s measured)."""
    out = np.array(parts[0](ctx), bool)          # a copy: a part may return an array it shares
    update = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]
    for p in parts[1:]:
        update(out, p(ctx), out=out)
    return out


def run(fn, batch: Batch) -> np.ndarray:
    out = fn(_Ctx(batch))
    return np.broadcast_to(out, (batch.n,)).copy() if out.shape != (batch.n,) else out
