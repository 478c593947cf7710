"""`dissect -T json [-e FIELD ...]`: tshark's `-T json` array over Batches, written as it goes.

Each packet is tshark's document, `{"_index": "packets-<local date>", "_type": "doc",
"_score": null, "_source": {"layers": {...}}}`, indented as tshark indents it; every value is
a string printed as `tshark -T fields` prints it (roceview/render/field_text.py). Without `-e`
the layers are tshark's tree of the fields roceview decodes (roceview/render/tshark_layout.py),
a field with two occurrences written twice in its layer (`ip.addr`), as tshark does: duplicate
keys. With `-e` the layers are `{"FIELD": ["value", ...]}` in the order given, a field absent
from a packet left out.

The array is streamed: `text(batch)` returns the batch's packets (after "[" on the first),
`close()` the end, so a capture of any size is written batch by batch in constant memory.
Rows are grouped by the set of fields they have (their shape: a few per capture); each shape
is one `%` template, so a packet costs one string formatting, not one per field.
"""
from __future__ import annotations

import json
import time

import numpy as np

from roceview.errors import BadInput
from roceview.filter import field_names as F
from roceview.filter.evaluate import columns_of, occurrences
from roceview.packets.batch import Batch
from roceview.render import tshark_layout as L
# -T fields' text of one value: the one formatting of a field's value
from roceview.render.field_text import value_text as field_text

NS = 1_000_000_000
_HEAD = '  {\n    "_index": %s,\n    "_type": "doc",\n    "_score": null,\n    "_source": {\n      "layers": '
_TAIL = "\n    }\n  }"
_LAYER_DEPTH = 4            # "frame": { ... } sits 8 spaces in
SLICE = 8192                # rows formatted at once (~20 MB of text)


class TsharkJsonWriter:
    """The -T json text of Batches (stamped by packets/times.Clock: frame.time_relative, ...)."""

    def __init__(self, names: list[str]):
        try:
            fields = [L.lookup(name) for name in dict.fromkeys(names)]     # a repeated -e once, as tshark
        except BadInput as exc:
            raise BadInput(str(exc).replace("filter:", "-e:", 1)) from None
        self.chosen = bool(names)
        if self.chosen:
            self.slots = [(f, k) for f in fields for k in range(len(f.sources))]
            self._tree = [(f.name, [i for i, (g, _) in enumerate(self.slots) if g is f]) for f in fields]
        else:
            self.slots = [(L.lookup(name), int(k)) for name, _, k in (s.partition("#") for s in L.slot_names())]
            self._tree = _numbered(L.LAYOUT, iter(range(len(self.slots))))
        self.fields = list({id(f): f for f, _ in self.slots}.values())
        self._templates: dict[tuple, str] = {}
        self._started = False

    @property
    def columns(self) -> frozenset:
        """The packets-table columns the fields read (dissect's roceview.finding pass asks)."""
        return frozenset().union(*(columns_of(f) for f in self.fields))

    def text(self, b: Batch) -> str:
        """The packets of `b`, each after ",\\n" (the first of all after "[\\n")."""
        return "".join(self.pieces(b))

    def pieces(self, b: Batch):
        """text(b) a slice of rows at a time: what is held is one slice's text, not the batch's."""
        for start in range(0, b.n, SLICE):
            yield self._slice(b if b.n <= SLICE else b.select(np.arange(start, min(start + SLICE, b.n))))

    def _slice(self, b: Batch) -> str:
        seconds = _Seconds(b.cols["ts_ns"])
        texts, on = self._texts(b, seconds)
        index = seconds.index_texts()
        packed = np.packbits(on, axis=1)
        first, codes = _row_codes(packed)
        out = np.empty(b.n, dtype=object)
        for code, row in enumerate(first):
            rows = np.flatnonzero(codes == code)
            slots = tuple(np.flatnonzero(np.unpackbits(packed[row])[:len(self.slots)]))
            columns = [index[rows]] + [texts[s][rows] for s in slots]
            template = self._template(slots)
            out[rows] = [template % values for values in zip(*columns)]
        first_of_all, self._started = not self._started, True
        return ("[\n" if first_of_all else ",\n") + ",\n".join(out.tolist())

    def close(self) -> str:
        """The end of the array ("[]" when no packet was written)."""
        return "\n]\n" if self._started else "[]\n"

    def _texts(self, b: Batch, seconds: _Seconds):
        """Each slot's JSON-quoted text per row (object array) and the (rows, slots) presence."""
        occ = {id(f): occurrences(b, f) for f in self.fields}
        on = np.zeros((b.n, len(self.slots)), bool)
        texts = []
        for s, (field, k) in enumerate(self.slots):
            values, present = occ[id(field)][k]
            present = np.ones(b.n, bool) if present is None else present
            column, on[:, s] = _column_texts(field, values, present, seconds)
            texts.append(column)
        return texts, on

    def _template(self, slots: tuple) -> str:
        if slots not in self._templates:
            on = set(slots)
            members = _chosen(self._tree, on) if self.chosen else _members(self._tree, on, _LAYER_DEPTH)
            pad = "  " * (_LAYER_DEPTH - 1)
            layers = "{\n" + ",\n".join(members) + f"\n{pad}}}" if members else "{}"
            self._templates[slots] = _HEAD + layers.replace("%", "%%").replace("\0", "%s") + _TAIL
        return self._templates[slots]


def _numbered(node, counter) -> list:
    """The layout with each field replaced by (its name, its slot number), in slot order."""
    out = []
    for item in node:
        if isinstance(item, str):
            out.append((item.partition("#")[0], next(counter)))
        else:
            out.append((item[0], _numbered(item[1], counter)))
    return out


def _members(node, on: set, depth: int) -> list[str]:
    """`"key": value` lines of the present fields under `node` (\\0 stands for each value)."""
    pad = "  " * depth
    out = []
    for key, inner in node:
        if isinstance(inner, list):
            members = _members(inner, on, depth + 1)
            if members:
                out.append(f"{pad}{json.dumps(key)}: {{\n" + ",\n".join(members) + f"\n{pad}}}")
        elif inner in on:
            out.append(f"{pad}{json.dumps(key)}: \0")
    return out


def _chosen(tree, on: set) -> list[str]:
    """-e: `"FIELD": [values]` of each field with a value in this packet."""
    pad = "  " * _LAYER_DEPTH
    out = []
    for name, slots in tree:
        present = [s for s in slots if s in on]
        if present:
            values = ",\n".join(f"{pad}  \0" for _ in present)
            out.append(f"{pad}{json.dumps(name)}: [\n{values}\n{pad}]")
    return out


def _column_texts(field: F.FieldDef, values, present: np.ndarray, seconds: _Seconds):
    """(object array of quoted texts, present): each distinct value formatted once (times,
    all distinct, by arithmetic on the column); a value whose text is empty is absent."""
    n = len(present)
    out = np.full(n, None, dtype=object)
    rows = np.flatnonzero(present)
    if not len(rows):
        return out, present
    if field.kind == F.NONE or values is None:
        out[rows] = json.dumps(field.name)
        return out, present
    if field.kind in (F.RELTIME, F.ABSTIME):
        ns = values[rows].astype(np.int64)
        out[rows] = seconds.frame_times(rows) if field.kind == F.ABSTIME else _seconds_texts(ns)
        return out, present
    vals = values[rows]
    if vals.ndim > 1:                   # addresses: (n, 16) bytes
        first, inverse = _row_codes(vals)
        distinct = vals[first]
    else:
        distinct, inverse = np.unique(vals, return_inverse=True)
    quoted = np.array(_quoted(field, distinct) + [None], dtype=object)
    out[rows] = quoted[inverse.reshape(-1)]
    return out, present & (out != None)      # elementwise on the object array: an empty text is no value


def _quoted(field: F.FieldDef, distinct: np.ndarray) -> list:
    """The quoted text of each distinct value (None where it is empty): integers by one
    %-format each (as field_text: decimal, or 0x and hex_digits digits), the rest by field_text."""
    if field.kind in (F.INT, F.FLAG) and distinct.ndim == 1:
        fmt = f'"0x%0{field.hex_digits}x"' if field.hex_digits else '"%d"'
        return [fmt % v for v in distinct.tolist()]
    texts = (_value_text(field, v) for v in distinct)
    return [json.dumps(t, ensure_ascii=False) if t else None for t in texts]


def _row_codes(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct row, each row's code) of a 2-D uint8 array, by 64-bit words:
    np.unique(axis=0) sorts the rows as structured values, ten times slower."""
    n, width = matrix.shape
    padded = np.zeros((n, -(-width // 8) * 8), np.uint8)
    padded[:, :width] = matrix
    codes = np.zeros(n, np.int64)
    for word in padded.view(np.uint64).T:
        _, inverse = np.unique(word, return_inverse=True)
        inverse = inverse.reshape(-1)
        _, codes = np.unique(codes * (int(inverse.max()) + 1) + inverse, return_inverse=True)
        codes = codes.reshape(-1)
    return np.unique(codes, return_index=True)[1], codes


def _value_text(field: F.FieldDef, v) -> str:
    if field.kind == L.BYTES:           # FT_BYTES: "ca:fe:00:04" (a row of bytes, or an integer's)
        raw = bytes(v) if np.ndim(v) else int(v).to_bytes(field.hex_digits // 2, "big")
        return ":".join(f"{x:02x}" for x in raw)
    return field_text(field, v)


def _seconds_texts(ns: np.ndarray) -> list[str]:
    """Quoted `signed_seconds(ns)` of each value (9 decimals, as tshark's JSON)."""
    negative, a = (ns < 0).tolist(), np.abs(ns)
    return ['"%s%d.%09d"' % ("-" if neg else "", w, f)
            for neg, w, f in zip(negative, (a // NS).tolist(), (a % NS).tolist())]


class _Seconds:
    """The distinct whole seconds of a batch's timestamps, each put in local time once."""

    def __init__(self, ts_ns: np.ndarray):
        ns = ts_ns.astype(np.int64)
        self.unique, self.inverse = np.unique(ns // NS, return_inverse=True)
        self.frac = ns % NS

    def index_texts(self) -> np.ndarray:
        """_index: tshark's `packets-YYYY-MM-DD` of the local date."""
        dates = np.array([f'"packets-{time.strftime("%Y-%m-%d", time.localtime(int(s)))}"' for s in self.unique],
                         dtype=object)
        return dates[self.inverse.reshape(-1)]

    def frame_times(self, rows: np.ndarray) -> list[str]:
        """Quoted frame.time (packets/times.frame_time_text) of the rows."""
        from roceview.packets.times import frame_time_text

        whole = [frame_time_text(int(s) * NS).split(".000000000 ", 1) for s in self.unique]
        inverse = self.inverse.reshape(-1)[rows].tolist()
        return ['"%s.%09d %s"' % (whole[i][0], f, whole[i][1]) for i, f in zip(inverse, self.frac[rows].tolist())]
