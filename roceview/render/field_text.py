"""`dissect -T fields -e FIELD ... -E OPT=VALUE`: tshark's field output over a Batch.

Field names are the display filter's (roceview/filter/field_names.py): packets-table columns and
their Wireshark aliases. Values print as tshark 4.0 prints them: integers in decimal, or
`0x` + fixed hex digits where Wireshark shows the field in hex (BASE_HEX), booleans 1/0,
addresses in their usual text, a field with several occurrences joined by the aggregator
(`ip.addr`: source, destination). Options (`-E`): header=y|n, separator=/t|/s|C,
quote=d|s|n, occurrence=f|l|a, aggregator=,|/s|C.
"""
from __future__ import annotations

import ipaddress

import numpy as np

from roceview.packets.batch import Batch
from roceview.errors import BadInput
from roceview.filter import field_names as F
from roceview.filter.evaluate import occurrences
from roceview.filter.parse import printable

_SPECIAL = {"/t": "\t", "/s": " "}


class FieldOptions:
    def __init__(self, options: list[str]):
        self.header, self.separator, self.quote = False, "\t", ""
        self.occurrence, self.aggregator = "a", ","
        for option in options:
            key, _, value = option.partition("=")
            setter = getattr(self, "_set_" + key.strip(), None)
            shown = printable(option)        # the error stays one line: a newline in it is shown as \n
            if setter is None or not value:
                raise BadInput(f"-E {shown}: expected header=y|n, separator=/t|/s|C, quote=d|s|n, "
                               "occurrence=f|l|a or aggregator=,|/s|C")
            setter(shown, value)

    def _set_header(self, option, value):
        self.header = value[0].lower() == "y"

    def _set_separator(self, option, value):
        self.separator = _SPECIAL.get(value, value[0])

    def _set_aggregator(self, option, value):
        self.aggregator = _SPECIAL.get(value, value[0])

    def _set_quote(self, option, value):
        if value not in ("d", "s", "n"):
            raise BadInput(f"-E {option}: quote must be d, s or n")
        self.quote = {"d": '"', "s": "'", "n": ""}[value]

    def _set_occurrence(self, option, value):
        if value not in ("f", "l", "a"):
            raise BadInput(f"-E {option}: occurrence must be f, l or a")
        self.occurrence = value


class FieldWriter:
    """Lines of `-T fields` output for a Batch, one per row."""

    def __init__(self, names: list[str], options: list[str]):
        if not names:
            raise BadInput("-T fields needs at least one -e FIELD")
        try:
            self.defs = [F.lookup(name, None) for name in names]
        except BadInput as exc:
            raise BadInput(str(exc).replace("filter:", "-e:", 1)) from None
        self.options = FieldOptions(options)

    @property
    def columns(self) -> frozenset:
        from roceview.filter.evaluate import columns_of

        return frozenset().union(*(columns_of(d) for d in self.defs))

    def header(self) -> str:
        return self.options.separator.join(d.name for d in self.defs)

    def lines(self, b: Batch) -> list[str]:
        if b.n == 0:
            return []
        cells = [self._cells(b, d) for d in self.defs]
        return [self.options.separator.join(row) for row in zip(*cells)]

    def _cells(self, b: Batch, field: F.FieldDef) -> list[str]:
        occ = [_text(field, values, present) for values, present in occurrences(b, field)]
        opt = self.options
        if opt.occurrence != "a" or len(occ) == 1:
            parts = occ[0] if len(occ) == 1 else None
            if parts is None:
                order = occ if opt.occurrence == "f" else occ[::-1]
                parts = [next((p[i] for p in order if p[i]), "") for i in range(b.n)]
        else:
            parts = [opt.aggregator.join(v for v in row if v) for row in zip(*occ)]
        q = opt.quote
        return [f"{q}{v}{q}" if v and q else v for v in parts]


def _text(field: F.FieldDef, values, present) -> list[str]:
    """The text of one occurrence per row ('' where absent), each distinct value formatted once.
    A flag prints the value its filter compares (roceview/filter/evaluate.py _flag): the
    value column's (`roceview.gap`: PSNs missing, `roceview.rtt_ack`: the RTT in ns), or 1."""
    n = len(present)
    if values is None or field.kind == F.NONE:
        return np.where(present, field.name, "").tolist()
    rows = np.flatnonzero(present)
    out = np.full(n, "", dtype=object)
    if len(rows) == 0:
        return out.tolist()
    vals = values[rows]
    distinct, inverse = np.unique(vals, axis=0 if vals.ndim > 1 else None, return_inverse=True)
    names = np.array([value_text(field, v) for v in distinct] + [""], dtype=object)
    out[rows] = names[inverse.reshape(-1)]
    return out.tolist()


def value_text(field: F.FieldDef, v) -> str:
    """One value of a field as `-T fields` prints it (tshark's text: hex QPs, dotted IPs, ...)."""
    kind = field.kind
    if kind == F.STR:
        return field.vocab[int(v)] or ""
    if kind == F.BOOL:
        return "1" if v else "0"
    if kind == F.MAC:
        return ":".join(f"{b:02x}" for b in int(v).to_bytes(6, "big"))
    if kind == F.IPV4:
        return str(ipaddress.IPv4Address(bytes(v[12:])))
    if kind == F.IPV6:
        return _ipv6(bytes(v))
    if kind == F.ADDR:
        from roceview.packets.names import address_text

        return address_text(bytes(v))
    if kind == F.BYTES:                      # tshark -T fields: the bytes' hex, no separators
        return bytes(v).hex() if np.ndim(v) else int(v).to_bytes(field.hex_digits // 2, "big").hex()
    if kind in (F.RELTIME, F.ABSTIME):      # as tshark: all 9 decimals, whatever the file's precision
        from roceview.packets.times import frame_time_text, signed_seconds

        return frame_time_text(int(v)) if kind == F.ABSTIME else signed_seconds(int(v))
    if kind == F.MICROS:                     # kept in ns, written as ops.csv's latency_us
        from roceview.filter.values import micros_text

        return micros_text(int(v))
    return f"0x{int(v):0{field.hex_digits}x}" if field.hex_digits else str(int(v))


def _ipv6(raw: bytes) -> str:
    """As Wireshark writes it: an IPv4-mapped address (a RoCEv1 GID) ends in dotted quad."""
    if raw[:12] == bytes(10) + b"\xff\xff":
        return "::ffff:" + str(ipaddress.IPv4Address(raw[12:]))
    return str(ipaddress.IPv6Address(raw))
