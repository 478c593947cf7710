"""Literals read for a field's kind, and the vectorised test of one occurrence against them.

A test is a function `values -> bool array` over one source column, built once when the
filter is compiled: an integer literal out of the field's type is refused as tshark refuses it
(above FT_UINT<bits>, or 64 bits), one within it compares in the column's own dtype (a literal
outside the dtype's range is decided without numpy: nothing equals it); addresses are (n, 16)
byte rows compared as two big-endian 64-bit words, a CIDR prefix by masking; names
(opcode_name, proto, ...) are decided once per code of the column's vocabulary and looked up
with one take().
"""
from __future__ import annotations

import ipaddress
import math
import operator
import re
from fractions import Fraction

import numpy as np

from roceview.filter import field_names as F
from roceview.filter.parse import FilterError, Value, quote

ORDER = {"==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_NP = {"==": np.equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
# tshark 4.0 takes 6 bytes as aa:bb:cc:dd:ee:ff, or as groups of whole bytes split by one kind of
# '-' or '.' (aa-bb-.., aabb.ccdd.eeff, aabbcc.ddeeff), or 12 hex digits in a row
_MAC = re.compile(r"^(?:[0-9a-f]{2}(?::[0-9a-f]{2}){5}|(?:[0-9a-f]{2})+(?:([\-.])(?:[0-9a-f]{2})+(?:\1(?:[0-9a-f]{2})+)*)?)$",
                  re.IGNORECASE)
_INT = re.compile(r"^(0x[0-9a-f]+|0b[01]+|0[0-7]*|[1-9][0-9]*)$")   # Wireshark's: no 0o, no 1_000
_DECIMAL = re.compile(r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")   # a µs literal: no exponent, no 1_000
_LID = re.compile(r"^lid:(0x[0-9A-Fa-f]{1,4}|[1-9][0-9]{0,4}|0)$")   # ASCII digits: \d takes any Unicode digit
LID_MARK = bytes(10) + b"\xfe\xfe"           # roceview.packets.names.address_text: IB LRH without GRH
U64 = (1 << 64) - 1
_MAX_DIGITS = {2: 64, 8: 22, 10: 20, 16: 16}  # digits of 2**64 - 1 in each base (leading zeros aside)


def parse_int(v: Value, field: F.FieldDef) -> int:
    text = v.text.lower()     # as tshark: " 5 " is no number
    if field.kind in (F.BOOL, F.FLAG) and text in ("true", "false"):
        return int(text == "true")
    boolean = field.kind == F.BOOL      # a flag's value may be a count (roceview.gap > 8: PSNs missing)
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text)
    if not _INT.match(body) or boolean and sign < 0:
        _not_a_field(field, v)
        what = "a boolean field (1/0, true/false)" if boolean else "an integer field"
        raise FilterError(f"{quote(v.text)} is not a number ({field.name} is {what})", v.column)
    value = _unsigned(body, v)
    # tshark 4.0 reads any non-zero literal of a boolean as TRUE: `infiniband.bth.se == 2` is `== 1`
    if boolean:
        return int(value != 0)
    _check_range(field, v, sign, value)
    return sign * value


def _unsigned(body: str, v: Value) -> int:
    """The value of an unsigned literal (decimal, 0x, 0b, or octal with a leading 0, as
    Wireshark reads them) of at most 64 bits: a longer one is refused by its digit count before
    int() reads it (Python refuses to read over 4,300 decimal digits; tshark: "causes an
    integer overflow")."""
    base, digits = 10, body
    if body.startswith(("0x", "0b")):
        base, digits = (16 if body[1] == "x" else 2), body[2:]
    elif len(body) > 1 and body.startswith("0"):            # Wireshark: a leading 0 is octal
        base, digits = 8, body[1:]
    significant = digits.lstrip("0")
    if len(significant) > _MAX_DIGITS[base] or significant and int(significant, base) > U64:
        raise FilterError(f"{quote(v.text)} causes an integer overflow (more than 64 bits)", v.column)
    return int(significant or "0", base)


def _check_range(field: F.FieldDef, v: Value, sign: int, value: int) -> None:
    """tshark's decision on a literal out of the field's type: refused. It reads `-N` as N of
    the field's type (at most its maximum), negated as a signed 32-bit integer (a 64-bit one
    for a 64-bit field), so -2147483648 is refused for frame.number."""
    top = (1 << field.bits) - 1 if field.bits else U64
    if value > top:
        raise FilterError(f"{quote(v.text)} too big for {field.name}, maximum {top}", v.column)
    least = (1 << (31 if 0 < field.bits <= 32 else 63)) - 1
    if sign < 0 and value > least:
        raise FilterError(f"{quote(v.text)} too small for {field.name}, minimum -{least} "
                          "(tshark negates a literal as a signed integer)", v.column)


def parse_micros(v: Value, field: F.FieldDef) -> Fraction:
    """A literal in µs (`100`, `2.5`, `0.001`) as an exact number of ns: a latency is whole ns,
    so `== 1.0005` matches nothing rather than what rounding would pick."""
    if v.quoted or not _DECIMAL.match(v.text):
        _not_a_field(field, v)
        raise FilterError(f"{quote(v.text)} is not a number ({field.name} is in microseconds: 100, 2.5)", v.column)
    try:
        return Fraction(v.text) * 1000
    except ValueError:                  # over Python's 4,300 digits
        raise FilterError(f"{quote(v.text)} has too many digits ({field.name})", v.column) from None


def _micros_test(op: str, ns: Fraction):
    """values (int ns) -> bool array against an exact ns literal: a fractional one lies between
    two whole ns, so `<` and `<=` mean <= its floor, `>` and `>=` mean > its floor."""
    whole = math.floor(ns)
    if ns == whole:
        return lambda values: _cmp_int(values, op, whole)
    if op == "==":
        return lambda values: np.zeros(len(values), bool)
    return lambda values: _cmp_int(values, "<=" if op in ("<", "<=") else ">", whole)


def micros_text(ns: int) -> str:
    """A duration in ns as µs with 3 decimals, exactly (ops.csv latency_us's text)."""
    sign, ns = ("-" if ns < 0 else ""), abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def parse_mac(v: Value, field: F.FieldDef) -> int:
    text = v.text
    digits = re.sub(r"[:\-.]", "", text)
    if len(text) > 17 or not _MAC.match(text) or len(digits) != 12:     # 17: aa:bb:cc:dd:ee:ff
        _not_a_field(field, v)
        raise FilterError(f"{quote(text)} is not a MAC address ({field.name})", v.column)
    return int(digits, 16)


def parse_addr(v: Value, field: F.FieldDef) -> tuple[bytes, int]:
    """(16 bytes as the Batch stores them, prefix length in bits)."""
    text, kind = v.text, field.kind
    lid = _LID.match(text)
    if lid and kind == F.ADDR:
        number = int(lid.group(1), 0)
        if number > 0xFFFF:                 # a LID is 16 bits (IBTA 7.7.1)
            raise FilterError(f"{quote(text)}: a LID is at most 0xffff ({field.name})", v.column)
        return LID_MARK + b"\0\0" + number.to_bytes(2, "big"), 128
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        _not_a_field(field, v)
        want = {F.IPV4: "an IPv4", F.IPV6: "an IPv6"}.get(kind, "an IPv4/IPv6")
        raise FilterError(f"{quote(text)} is not {want} address or network ({field.name})", v.column) from None
    if kind == F.IPV6 and net.version == 4 or kind == F.IPV4 and net.version == 6:
        raise FilterError(f"{quote(text)} is an IPv{net.version} address, {field.name} is IPv{10 - net.version}",
                          v.column)
    if net.version == 4:     # the Batch stores IPv4 as ::ffff:a.b.c.d (roceview/packets/batch.py)
        return b"\0" * 10 + b"\xff\xff" + net.network_address.packed, 96 + net.prefixlen
    return net.network_address.packed, net.prefixlen


def compare_test(field: F.FieldDef, op: str, v: Value):
    """values -> bool array: `values op literal` for one occurrence of `field`."""
    if field.kind == F.NONE:
        raise FilterError(f"{field.name} is a protocol: test it for presence only, without a comparison", v.column)
    if field.kind == F.STR:
        if op == "==":
            _known_name(field, v)
        return _vocab_test(field, lambda name: ORDER[op](name, v.text))
    if field.kind in (F.IPV4, F.IPV6, F.ADDR):
        return _addr_test(op, *parse_addr(v, field))
    if field.kind == F.MICROS:
        return _micros_test(op, parse_micros(v, field))
    lit = parse_mac(v, field) if field.kind == F.MAC else parse_int(v, field)
    if lit < 0 and field.name in F.WIRESHARK_NAMES:
        # tshark 4.0 makes `-N` a signed value, which no unsigned Wireshark field equals or
        # orders against: `udp.port > -1` and `frame.number in {-1..5}` match nothing (`!=`,
        # all-not-equal, is true). A packets-table column's own name compares as a number.
        return lambda values: np.zeros(len(values), bool)
    return lambda values: _cmp_int(_numeric(values), op, lit)


def member_test(field: F.FieldDef, items: tuple):
    """values -> bool array: the value is one of the set's values or within one of its ranges."""
    if field.kind == F.STR:             # one lookup table for the whole set
        for low, high in items:
            if high is None:
                _known_name(field, low)
        return _vocab_test(field, lambda name: any(_vocab_match(name, low, high) for low, high in items))
    tests, singles = [], []
    for low, high in items:
        if high is None and field.kind in (F.INT, F.BOOL, F.MAC):
            singles.append(parse_mac(low, field) if field.kind == F.MAC else parse_int(low, field))
        elif high is None:
            tests.append(compare_test(field, "==", low))
        else:
            ge, le = compare_test(field, ">=", low), compare_test(field, "<=", high)
            tests.append(lambda values, ge=ge, le=le: ge(values) & le(values))
    if singles:                         # one np.isin for all the set's numbers, not one pass each
        tests.append(lambda values: _isin(_numeric(values), singles))
    return lambda values: any_of(tests, values)


def any_of(tests, arg) -> np.ndarray:
    """OR of the tests' fresh bool arrays, accumulated in place: a set or a chain of `||` of
    1,000 items holds two arrays, not a (1000, n) stack (np.logical_or.reduce of a list)."""
    out = tests[0](arg)
    for t in tests[1:]:
        out |= t(arg)
    return out


def _isin(values: np.ndarray, literals: list[int]) -> np.ndarray:
    info = np.iinfo(values.dtype)
    return np.isin(values, np.array([x for x in literals if info.min <= x <= info.max], values.dtype))


def _not_a_field(field: F.FieldDef, v: Value) -> None:
    """Called on a literal that does not parse: say so when it is a field name."""
    if not v.quoted and v.text in F.all_fields():
        raise FilterError(f"{field.name} is compared with the field {v.text}: only values are supported "
                          "(field-to-field comparisons are not)", v.column)


def _known_name(field: F.FieldDef, v: Value) -> None:
    """A name no code has is a typo, not a filter that matches nothing (tshark: "cannot be found
    among the possible values")."""
    names = {name for name in field.vocab if name}
    if v.text not in names:
        import difflib

        close = difflib.get_close_matches(v.text, names, n=1, cutoff=0.6) if len(v.text) < 100 else []
        _not_a_field(field, v)
        raise FilterError(f"{quote(v.text)} is not a value of {field.name}", v.column,
                          f"did you mean {close[0]}?" if close else None)


def _vocab_match(name: str, low: Value, high: Value | None) -> bool:
    return name == low.text if high is None else low.text <= name <= high.text


def _vocab_test(field: F.FieldDef, keep):
    """A table of 257 entries: one per code of a uint8 column, the last for any larger code."""
    names = list(field.vocab)[:256]
    table = np.zeros(257, bool)
    table[:len(names)] = [name is not None and keep(name) for name in names]

    def test(values):
        return table[values] if values.dtype == np.uint8 else table[np.minimum(values, 256)]
    return test


def _numeric(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint8) if values.dtype == bool else values


def _cmp_int(values: np.ndarray, op: str, lit: int) -> np.ndarray:
    info = np.iinfo(values.dtype)
    if lit < info.min:               # every value is greater than the literal
        return np.full(len(values), op in (">", ">="))
    if lit > info.max:
        return np.full(len(values), op in ("<", "<="))
    return _NP[op](values, values.dtype.type(lit))


def _words(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = np.ascontiguousarray(values).view(">u8")
    return w[:, 0], w[:, 1]


def _addr_test(op: str, raw: bytes, prefix: int):
    hi, lo = (int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big"))
    if op == "==":                                       # CIDR: compare the prefix only
        keep = ((1 << 128) - (1 << (128 - prefix))).to_bytes(16, "big")
        mask = np.frombuffer(keep, np.uint64)            # native words: equality needs no byte order
        want = np.frombuffer(raw, np.uint64) & mask
        return lambda values: _equal_words(values, mask, want)
    strict = _NP["<" if op in ("<", "<=") else ">"]
    cmp, H, L = _NP[op], np.uint64(hi), np.uint64(lo)

    def test(values):
        vh, vl = _words(values)
        return strict(vh, H) | (vh == H) & cmp(vl, L)
    return test


def _equal_words(values, mask, want) -> np.ndarray:
    w = np.ascontiguousarray(values).view(np.uint64)
    out = None
    for k in range(2):
        if mask[k]:                                      # a /16 IPv4 network: one word to compare
            part = (w[:, k] & mask[k]) == want[k] if mask[k] != ~np.uint64(0) else w[:, k] == want[k]
            out = part if out is None else out & part
    return np.ones(len(w), bool) if out is None else out
