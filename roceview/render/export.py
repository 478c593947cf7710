"""CSV and JSON export of an AnalysisResult (no pandas: written from the numpy columns).

`--csv DIR` writes qps.csv, pfc.csv, findings.csv, events.csv, timeline.csv, ops.csv, connections.csv,
priorities.csv, cc.csv and paused_flows.csv. Each file is
first written to a temporary file beside the file it replaces; they are renamed into place only
when all of them are complete, so an error or a Ctrl-C leaves nothing half written
(capture.writer.write_files: symlinks followed, devices and FIFOs written directly).
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np

from roceview.analysis.tables import DECIMALS, KINDS, Coded, slow_text
from roceview.errors import WriteError
from roceview.render.cells import (assemble, column_parts, const_cells, distinct_strings, numeric_array,
                                   string_cells)
from roceview.render.nullable import nullable_ts_parts

CSV_FILES = (("qps.csv", "flows_table"), ("pfc.csv", "pfc_table"), ("findings.csv", "findings_table"),
             ("events.csv", "events_table"), ("timeline.csv", "timeline_table"), ("ops.csv", "ops_table"),
             ("connections.csv", "connections_table"), ("priorities.csv", "priorities_table"), ("cc.csv", "cc_table"),
             ("paused_flows.csv", "paused_flows_table"))
WIDTH_GUESS = {"ts": 20, "float": 10, "qp": 8}  # text bytes of a number, for the block size only
_SPECIAL = re.compile(r'[,"\r\n]')  # csv.writer quotes a field only when it holds one of these


def table_csv(table) -> str:
    return table_csv_bytes(table).decode("utf-8")


def table_csv_bytes(table) -> bytes:
    """The CSV file of a Table: the same bytes as csv.writer (`\\n` line ends) writing its
    text rows (`slow_text`), built in C (kernels/_celltext.c) or vectorised (render/cells.py)."""
    return b"".join(table_csv_chunks(table))


def table_csv_chunks(table):
    """table_csv_bytes in pieces of a few MB, made as they are asked for: --csv writes them as
    they come (100 k queue pairs' 140 MB timeline.csv, held whole and joined, was 280 MB)."""
    yield (",".join(map(_quoted, table.columns)) + "\n").encode("utf-8")
    n = len(table)
    if not n or not table.columns:
        return
    c_rows = _c_rows(table)
    python_rows = None
    for lo in range(0, n, C_BLOCK_ROWS):
        hi = min(n, lo + C_BLOCK_ROWS)
        text = c_rows(lo, hi) if c_rows is not None else None
        if text is None:                     # not plain columns, or no C formatter: vectorised
            python_rows = python_rows or _python_rows(table)
            text = python_rows(lo, hi)
        yield text


def _python_rows(table):
    """(lo, hi) -> the CSV rows lo..hi by the vectorised cells (render/cells.py)."""
    columns = [_Column(table.data[name], name) for name in table.columns]

    def block(lo: int, hi: int) -> list:
        parts = columns[0].parts(lo, hi)
        for c in columns[1:]:
            parts += [const_cells(hi - lo, b",")] + c.parts(lo, hi)
        return parts + [const_cells(hi - lo, b"\n")]

    row_bytes = sum(c.width + 1 for c in columns)
    return lambda lo, hi: assemble(hi - lo, row_bytes, lambda a, b: block(lo + a, lo + b))


def bool_column(values) -> Coded:
    """A `bool` column (tables.py) as the strings `false` / `true`."""
    return Coded(np.asarray(values, dtype=bool).astype(np.int64), ["false", "true"])


class _Column:
    """One column's CSV cells for any block of rows: numbers formatted per block, strings
    quoted once per distinct value and gathered by index."""

    def __init__(self, values, name: str):
        self.kind, self.decimals = KINDS.get(name, "int"), DECIMALS.get(name, 6)
        if self.kind == "bool":
            self.kind, values = "str", bool_column(values)
        if self.kind == "nts":
            self.array, self.width = np.asarray(values, dtype=np.int64), WIDTH_GUESS["ts"]
            return
        self.array = numeric_array(values, self.kind)
        if self.array is not None:
            self.width = WIDTH_GUESS.get(self.kind, 6)
            return
        cells = string_cells(values, lambda v: _quoted("" if v is None else v)) if self.kind == "str" else None
        if cells is None:  # not plain strings: by their text (a list holding None, say)
            cells = string_cells(slow_text(values, self.kind, self.decimals), _quoted)
        self.codes, self.mat, self.mask = cells
        self.width = self.mat.shape[1]

    def parts(self, lo: int, hi: int) -> list:
        if self.kind == "nts":
            return nullable_ts_parts(self.array[lo:hi])
        if self.array is not None:
            return column_parts(self.array[lo:hi], self.kind, self.decimals)
        codes = self.codes[lo:hi]
        return [(self.mat[codes], self.mask[codes])]


C_KINDS = {"int": 0, "nint": 1, "ts": 2, "qp": 3, "float": 4, "str": 5}     # _celltext.c CELL_*
C_BLOCK_ROWS = 1 << 17          # rows formatted per call: the output buffer stays a few MB


def _c_rows(table):
    """(lo, hi) -> the CSV rows lo..hi by the C formatter (None: not formatted there); None
    where it is not built or a column is not plain (a list holding None, ints past int64, more
    than 9 decimals): cells.py formats those."""
    from roceview.kernels import backend as kernels

    if kernels.format_rows is None:
        return None
    kinds, decimals, ints, floats, offsets, texts = [], [], [], [], [], []
    for name in table.columns:
        kind, places = KINDS.get(name, "int"), DECIMALS.get(name, 6)
        values = table.data[name]
        if kind == "bool":
            kind, values = "str", bool_column(values)
        column = _nts_text(values) if kind == "nts" else _c_column(values, kind)
        kind = "str" if kind == "nts" or (kind == "qp" and column is not None and column[2] is not None) else kind
        if column is None or places > 9:
            return None
        kinds.append(C_KINDS[kind])
        decimals.append(places)
        for out, part in zip((ints, floats, offsets, texts), column):
            out.append(part)
    # a row's most bytes: 24 a number (20 digits, sign, point), the longest text of a str column
    row_bytes = sum(int(np.diff(o).max(initial=0)) + 1 if o is not None else 25 for o in offsets)

    def rows(lo: int, hi: int) -> bytes | None:
        block = [[None if a is None else a[lo:hi] for a in group] for group in (ints, floats)]
        return kernels.format_rows(kinds, decimals, *block, offsets, texts, (hi - lo) * row_bytes + 4096)

    return rows


def _c_column(values, kind: str):
    """(int64 values or str codes, float64 values, str offsets, str bytes) of one column."""
    if kind == "str":
        found = distinct_strings(values)
        if found is None:
            return None
        codes, distinct = found
        data = [_quoted("" if v is None else v).encode("utf-8") for v in distinct]
        offsets = np.zeros(len(data) + 1, np.int64)
        np.cumsum([len(d) for d in data], out=offsets[1:])
        return codes, None, offsets, np.frombuffer(b"".join(data), np.uint8).copy()
    array = numeric_array(values, kind)
    if array is None:
        return None
    if kind == "float":
        return None, np.ascontiguousarray(array, dtype=np.float64), None, None
    if array.dtype.kind == "u" and len(array) and int(array.max()) > np.iinfo(np.int64).max:
        return None
    if kind == "qp" and len(array) >= 4096:
        few = _few_qps(array)
        if few is not None:
            return few
    return np.ascontiguousarray(array, dtype=np.int64), None, None, None


def _few_qps(array: np.ndarray):
    """A QP column of few distinct values (ops.csv: one a flow, a row a message) as str cells,
    each formatted once: the C formatter's hex cells cost ~0.4 us each, 40 ms a 100 k rows."""
    order = np.argsort(array, kind="stable")
    ordered = array[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    distinct = ordered[new]
    if len(distinct) * 8 > len(array):
        return None
    codes = np.empty(len(array), dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    data = [t.encode() for t in slow_text(distinct, "qp")]
    offsets = np.zeros(len(data) + 1, np.int64)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return codes, None, offsets, np.frombuffer(b"".join(data), np.uint8).copy()


def _nts_text(values):
    """An `nts` column as the C formatter's str cells: a text per row (codes 0..n-1), built
    vectorised (no Python string per row)."""
    n = len(values)
    if not n:
        return np.zeros(0, np.int64), None, np.zeros(1, np.int64), np.zeros(0, np.uint8)
    from roceview.render.cells import join_cells

    mat, mask = join_cells(nullable_ts_parts(values))
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(mask.sum(axis=1), out=offsets[1:])
    return np.arange(n, dtype=np.int64), None, offsets, np.ascontiguousarray(mat[mask])


def _quoted(text: str) -> str:
    """A field as csv.writer writes it: special ones through csv itself."""
    if not _SPECIAL.search(text):
        return text
    import csv  # not needed (nor imported) for plain fields

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([text, ""])  # two fields: "" alone would be quoted
    return buf.getvalue()[:-2]


def write_csv_dir(result, directory, also=()) -> list[Path]:
    """The CSV files into `directory` (created if missing: removed again on failure or Ctrl-C),
    and the (path, make_bytes) outputs `also` (the --json file): one transaction, all or none of
    them replaced (capture.writer.write_files)."""
    from roceview import interrupt
    from roceview.capture.writer import write_files

    directory = Path(directory)
    _check_folder(directory)
    created = [p for p in (directory, *directory.parents) if not os.path.lexists(p)][::-1]
    try:
        with interrupt.deferred():
            for folder in created:          # outermost first: removed in the reverse order
                interrupt.remove_on_interrupt(folder, "dir")
            directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_created(created)
        raise WriteError(f"cannot write CSV files into {directory}: {exc.strerror or exc}") from None
    try:
        paths = [directory / name for name, _ in CSV_FILES]
        write_files([*((path, _csv_maker(result, attr)) for path, (_, attr) in zip(paths, CSV_FILES)), *also])
        return paths
    except WriteError:
        _remove_created(created)
        raise
    finally:
        for folder in created:
            interrupt.forget(folder)


def _check_folder(directory: Path) -> None:
    """A --csv path that exists must be a folder: a file, or a symlink loop (ELOOP), is one line
    naming why, not mkdir's "File exists"."""
    if not os.path.lexists(directory):
        return
    try:
        if os.stat(directory).st_mode & 0o170000 == 0o040000:      # S_ISDIR
            return
        reason = "it is not a folder"
    except OSError as exc:          # a symlink loop, a dangling symlink
        reason = exc.strerror or str(exc)
    raise WriteError(f"cannot write CSV files into {directory}: {reason}")


def _remove_created(folders: list[Path]) -> None:
    """The folders write_csv_dir created, innermost first, where still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            pass


def _csv_maker(result, attr: str):
    return lambda: table_csv_chunks(getattr(result, attr))


def result_document(result) -> dict:
    """The --json document as Python objects (write_json writes the same, faster: json_export.py)."""
    return {"summary": result.summary,
            "flows": result.flows_table.records(), "pfc": result.pfc_table.records(),
            "findings": result.findings_table.records(), "events": result.events_table.records(),
            "timeline": result.timeline_table.records(), "ops": result.ops_table.records(),
            "connections": result.connections_table.records(),
            "op_stats": result.op_stats_table.records(), "read_depth": result.read_depth_table.records(),
            "priorities": result.priorities_table.records(), "cc": result.cc_table.records(),
            "paused_flows": result.paused_flows_table.records(),
            "pfc_timeline": _records(getattr(result, "pfc_timeline_table", None))}


def _records(table) -> list:
    """A table's records; [] for a table the result does not have (the diagnoser sets
    pfc_timeline_table: a result it never saw has none), as json_export writes it."""
    return [] if table is None else table.records()


def write_json(result, path, stdout=None) -> None:
    """The --json document into `path`; '-' is `stdout` (a binary stream, or a text one)."""
    if str(path) == "-":
        buffer = getattr(stdout, "buffer", None)
        stdout.flush()
        for data in json_maker(result)():
            buffer.write(data) if buffer is not None else stdout.write(data.decode("ascii"))
        stdout.flush()
        return
    from roceview.capture.writer import write_files

    write_files([(path, json_maker(result))])


def json_maker(result):
    """The --json document's bytes, made a piece at a time when called
    (json_export.document_json_chunks): never whole in memory."""
    import itertools

    from roceview.render.json_export import document_json_chunks  # json only with --json

    return lambda: itertools.chain(document_json_chunks(result), [b"\n"])
