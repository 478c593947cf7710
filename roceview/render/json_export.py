"""`--json FILE` bytes: exactly what `json.dumps(result_document(result), indent=1,
allow_nan=False)` writes, built vectorised (render/cells.py). With an indent, json runs its
pure-Python encoder: ~0.35 s for the 32k-row timeline of a 1M-packet capture.

A table is a list of objects: each row is ` {`, then `  "column": value` lines joined by `,`,
then ` }`, every line one more space in once nested in the document. A table holding anything
the fast path does not model (an infinite float, which json refuses; a non-string in a string
column) goes through json itself.
"""
from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii

import numpy as np

from roceview.analysis.tables import KINDS, NONE_TS
from roceview.render.nullable import nullable_ts_parts
from roceview.render.cells import (BLOCK_BYTES, assemble, column_parts, const_cells, numeric_array, string_cells,
                                   text_matrix)

TABLES = (("flows", "flows_table"), ("pfc", "pfc_table"), ("findings", "findings_table"),
          ("events", "events_table"), ("timeline", "timeline_table"), ("ops", "ops_table"), ("connections", "connections_table"),
          ("op_stats", "op_stats_table"), ("read_depth", "read_depth_table"), ("priorities", "priorities_table"),
          ("cc", "cc_table"), ("paused_flows", "paused_flows_table"), ("pfc_timeline", "pfc_timeline_table"))
# the diagnoser sets pfc_timeline_table (diagnose.find): a result it never saw writes []
_DIAGNOSED = {"pfc_timeline_table"}
_WIDTH_GUESS = {"ts": 22, "qp": 10}  # bytes of a value, for the block size only


def document_json(result) -> bytes:
    return b"".join(document_json_chunks(result))


def document_json_chunks(result):
    """document_json in pieces of a few MB, made as they are asked for: --json writes them as
    they come (100 k queue pairs' document is 470 MB: held whole and joined, 2.2 GB peak)."""
    summary = json.dumps(result.summary, indent=1, allow_nan=False).replace("\n", "\n ")
    yield b'{\n "summary": ' + summary.encode()
    for key, attr in TABLES:
        yield b",\n " + json.dumps(key).encode() + b": "
        table = getattr(result, attr, None) if attr in _DIAGNOSED else getattr(result, attr)
        yield from table_json_chunks(table, level=1) if table is not None else [b"[]"]
    yield b"\n}"


def table_json(table, level: int = 0) -> bytes:
    """json.dumps(table.records(), indent=1, allow_nan=False), nested `level` deep."""
    return b"".join(table_json_chunks(table, level))


def table_json_chunks(table, level: int = 0):
    """table_json in pieces (a block of rows each)."""
    n, pad = len(table), " " * level
    if not n or not table.columns:
        yield b"[]"
        return
    columns = [_JsonColumn.of(table.data[c], KINDS.get(c, "int")) for c in table.columns]
    if any(c is None for c in columns):
        text = json.dumps(table.records(), indent=1, allow_nan=False)
        yield text.replace("\n", "\n" + pad).encode()
        return
    heads = [((",\n" if i else pad + " {\n") + pad + "  " + encode_basestring_ascii(c) + ": ").encode()
             for i, c in enumerate(table.columns)]
    close = ("\n" + pad + " }").encode()

    def block(lo: int, hi: int) -> list:
        parts = []
        for head, column in zip(heads, columns):
            parts += [const_cells(hi - lo, head)] + column.parts(lo, hi)
        more = np.arange(lo, hi) < n - 1
        return parts + [const_cells(hi - lo, close), const_cells(hi - lo, b",\n", more)]

    width = sum(len(h) + c.width for h, c in zip(heads, columns)) + len(close) + 2
    yield b"[\n"
    step = max(256, BLOCK_BYTES // max(1, width))              # assemble's own block: one each
    for lo in range(0, n, step):
        yield assemble(min(n, lo + step) - lo, width, lambda a, b, lo=lo: block(lo + a, lo + b))
    yield b"\n" + pad.encode() + b"]"


class _JsonColumn:
    """The JSON values of one column for any block of rows (Table.records() semantics)."""

    def __init__(self, kind: str, array=None, strings=None, width: int = 8):
        self.kind, self.array, self.strings, self.width = kind, array, strings, width

    @classmethod
    def of(cls, values, kind: str):
        """None when the column needs json itself."""
        if kind == "bool":            # true / false, unquoted
            codes = np.asarray(values, dtype=bool).astype(np.int64)
            return cls(kind, strings=(codes,) + text_matrix(["false", "true"]), width=5)
        if kind == "nts":             # the ts text as a JSON string, null when empty
            return cls(kind, array=np.asarray(values, dtype=np.int64), width=_WIDTH_GUESS["ts"])
        if kind == "str":
            cells = string_cells(values, lambda v: "null" if v is None else encode_basestring_ascii(v))
            return None if cells is None else cls(kind, strings=cells, width=cells[1].shape[1])
        array = numeric_array(values, kind)
        if array is None:
            return None
        if kind != "float":
            return cls(kind, array=array, width=_WIDTH_GUESS.get(kind, 8))
        x = np.ascontiguousarray(array, dtype=np.float64)
        if np.isinf(x).any():  # json refuses it (allow_nan=False): let json raise its own error
            return None
        # json writes repr(float): once per distinct bit pattern (-0.0 is not 0.0), NaN as null
        bits, codes = np.unique(x.view(np.int64), return_inverse=True)
        texts = ["null" if f != f else repr(f) for f in bits.view(np.float64).tolist()]
        cells = (codes.reshape(-1),) + text_matrix(texts)
        return cls(kind, strings=cells, width=cells[1].shape[1])

    def parts(self, lo: int, hi: int) -> list:
        if self.strings is not None:
            codes, mat, mask = self.strings
            return [(mat[codes[lo:hi]], mask[codes[lo:hi]])]
        v = self.array[lo:hi]
        if self.kind == "nts":
            shown = v != NONE_TS
            return ([const_cells(hi - lo, b'"', shown)] + nullable_ts_parts(v)
                    + [const_cells(hi - lo, b'"', shown), const_cells(hi - lo, b"null", ~shown)])
        if self.kind == "ts":  # the CSV text as a JSON string
            return [const_cells(hi - lo, b'"')] + column_parts(v, "ts") + [const_cells(hi - lo, b'"')]
        if self.kind == "qp":  # "0x......", or null when unknown
            shown = v >= 0
            return ([const_cells(hi - lo, b'"', shown)] + column_parts(v, "qp")
                    + [const_cells(hi - lo, b'"', shown), const_cells(hi - lo, b"null", ~shown)])
        if self.kind == "nint":
            return column_parts(v, "nint") + [const_cells(hi - lo, b"null", v < 0)]
        return column_parts(v, "int")
