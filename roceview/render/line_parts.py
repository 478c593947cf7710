"""Column-wise text for `dissect`'s one-line summaries (render/lines.py, render/line_tags.py).

A line is built as render/cells.py builds CSV rows: "parts" (a uint8 matrix of bytes, rows x
width, and a bool mask of the bytes each row shows) laid side by side and read out with one numpy
selection per chunk. An optional piece of a line (" CE", " VLAN=5") is a part masked to the rows
that have it; a number is digits computed for the whole column at once; a value with few distinct
values (an opcode name, a NAK code, a VLAN) is formatted once per distinct value by Python, with
the same f-string as the per-packet code it replaces, and gathered by index. This replaces a dict
and a dozen format calls per packet (~9 us: 1 M packets took 9 s, tshark 4 s).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from roceview.packets.times import NS, clock_text, hms_whole
from roceview.render.cells import _digits, column_parts, const_cells, join_cells, text_matrix

NONE = -1  # the code of a null in a categorical column


class Columns:
    """The packets-table columns of a DataFrame as numpy arrays: (values, valid) of numbers and
    booleans, (codes, names) of categoricals; a column the DataFrame lacks reads as all null."""

    def __init__(self, df: pd.DataFrame):
        self.df, self.n = df, len(df)

    def has(self, name: str) -> bool:
        return name in self.df.columns

    def num(self, name: str, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
        """(values, valid); nulls hold 0 (False for booleans)."""
        if name not in self.df.columns:
            return np.zeros(self.n, dtype), np.zeros(self.n, bool)
        array = self.df[name].array
        if hasattr(array, "_mask"):                 # pandas' nullable Integer/Boolean arrays
            valid = ~np.asarray(array._mask)
            return np.where(valid, np.asarray(array._data), 0).astype(dtype, copy=False), valid
        s = self.df[name]
        if s.dtype.kind in "iub":                   # numpy: never null (frame, ts_ns, flags)
            return s.to_numpy().astype(dtype, copy=False), np.ones(self.n, bool)
        valid = s.notna().to_numpy()
        return s.where(valid, 0).to_numpy().astype(dtype, copy=False), valid

    def true(self, name: str) -> np.ndarray:
        """Rows where the column is True (`if row[name]` of the per-packet code)."""
        values, valid = self.num(name, bool)
        return values & valid

    def cat(self, name: str) -> tuple[np.ndarray, list]:
        """(codes, names): NONE where null; any column, categorical or not."""
        s = self.df[name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            return s.cat.codes.to_numpy().astype(np.int64), list(s.cat.categories)
        codes, names = pd.factorize(s, use_na_sentinel=True)
        return codes.astype(np.int64), list(names)


class BatchColumns(Columns):
    """The same read straight from a Batch (dissect's chunks: no DataFrame of ~80 columns
    built per chunk); its strings as table.to_dataframe makes them (addresses formatted once
    per distinct value)."""

    def __init__(self, batch):
        self.batch, self.n, self._strings = batch, batch.n, None

    def has(self, name: str) -> bool:
        return name in self.batch.cols

    def num(self, name: str, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
        values = self.batch.cols.get(name)
        if values is None:
            return np.zeros(self.n, dtype), np.zeros(self.n, bool)
        valid = self.batch.valid.get(name)
        if valid is None:
            return values.astype(dtype, copy=False), np.ones(self.n, bool)
        return np.where(valid, values, 0).astype(dtype, copy=False), valid

    def cat(self, name: str) -> tuple[np.ndarray, list]:
        if self._strings is None:
            from roceview.packets.table import string_columns  # the DataFrame's own string columns

            self._strings = string_columns(self.batch)
        column = self._strings[name]
        return column.codes.astype(np.int64), list(column.categories)


def lit(n: int, text: str, shown: np.ndarray | None = None):
    return const_cells(n, text.encode("utf-8"), shown)


def _masked(parts: list, shown: np.ndarray) -> list:
    for _, mask in parts:
        mask &= shown[:, None]
    return parts


def digits(values: np.ndarray, shown: np.ndarray) -> list:
    """str(value) of each shown row (a column with many distinct values: PSN, frame)."""
    return _masked(column_parts(np.where(shown, values, 0), "int"), shown)


def decimals(values: np.ndarray, places: int, shown: np.ndarray) -> list:
    """f"{value:.{places}f}" of each shown row."""
    return _masked(column_parts(np.where(shown, values, 0.0), "float", places), shown)


def or_none(values: np.ndarray, valid: np.ndarray, shown: np.ndarray) -> list:
    """f"{value}" of a nullable int: "None" where null (as the per-packet f-strings printed)."""
    return digits(values, shown & valid) + [lit(len(values), "None", shown & ~valid)]


def mapped(values: np.ndarray, valid: np.ndarray, shown: np.ndarray, fmt) -> list:
    """fmt(value) of each shown row (fmt(None) where null: only called if a shown row is), fmt
    run once per distinct value: for columns with few distinct values (VLAN, NAK code, ethertype)."""
    rows = np.flatnonzero(shown)
    distinct = np.unique(values[rows][valid[rows]])
    texts = [fmt(v) for v in distinct.tolist()] + [fmt(None) if not valid[rows].all() else ""]
    index = np.full(len(values), len(distinct), np.int64)
    index[rows] = np.where(valid[rows], np.searchsorted(distinct, values[rows]), len(distinct))
    return [gather(index, texts, shown)]


def gather(index: np.ndarray, texts: list[str], shown: np.ndarray):
    """texts[index] of each shown row, as one part as wide as the longest text shown (a chunk
    of RoCE packets need not be as wide as a MAC address or the longest opcode name)."""
    index = np.where(shown, index, 0)
    used = np.flatnonzero(np.bincount(index[shown], minlength=len(texts)))
    at = np.zeros(len(texts), np.int64)
    at[used] = np.arange(len(used))
    mat, mask = text_matrix([texts[i] for i in used.tolist()] or [""])
    return _take_rows(mat, at[index]), _take_rows(mask, at[index]) & shown[:, None]


def _take_rows(mat: np.ndarray, index: np.ndarray) -> np.ndarray:
    """mat[index] for a narrow byte matrix: its rows padded to 8-byte words and taken as uint64
    (np.take of words is ~3x faster than fancy indexing of short byte rows)."""
    width = mat.shape[1]
    words = np.zeros((len(mat), -(-width // 8) * 8), mat.dtype)
    words[:, :width] = mat
    return np.take(words.view(np.uint64), index, axis=0).view(mat.dtype)[:, :width]


def seconds(ns: np.ndarray, width: int):
    """f"{ns / 1e9:{width}.6f}" of integer ns. The microseconds are ns / 1000 rounded, except
    where ns ends in 500: there the float ns / 1e9 lies just above or below the half and Python
    rounds that float, not the exact half, so the product by 1e6 is taken exactly (Dekker's
    two-product) to see which side it lies. Negative or huge times (past 1e7 s the float is off
    by more than 1 ns) and exact binary halves are formatted by Python."""
    x = ns / 1e9
    us, rest = np.divmod(ns, 1000)
    up = rest > 500
    half = rest == 500
    odd = (ns < 0) | (ns >= 10 ** 16)
    if half.any():
        side = _side_of_half(x[half], us[half])
        up[half] = side > 0
        odd[half] |= side == 0
    shown = ~odd
    total = np.where(shown, us + up, 0)
    whole, frac = np.divmod(total, 1_000_000)
    mat, mask = right_aligned(digits(whole, shown) + [lit(len(ns), ".", shown)]
                              + [_digits(frac, min_width=6)], width)
    mask &= shown[:, None]
    if not odd.any():
        return [(mat, mask)]
    texts = [f"{v:{width}.6f}" for v in x[odd].tolist()]
    return [(mat, mask), gather(np.cumsum(odd) - 1, texts, odd)]


def time_parts(ns: np.ndarray, places: np.ndarray, fmt: str = "r", hms: bool = False, width: int = 12) -> list:
    """The time column as tshark's `-t fmt` (`-u hms`) writes it, each row with its own decimals
    (packets/times.py): `ns` is what the format shows (relative, delta or epoch ns). Whole
    seconds of absolute and hms formats are written once per distinct value (few per block)."""
    n = len(ns)
    absolute = fmt in ("a", "ad", "adoy", "u", "ud")
    simple = not absolute and not (hms and fmt != "e") and not (ns < 0).any() and (places == places[:1]).all()
    if simple:                                   # the default: digits only, no gaps to close
        whole, frac = np.divmod(ns, NS)
        return [right_aligned(digits(whole, np.ones(n, bool)) + _fraction(frac, places), width)]
    if absolute:
        whole, frac = np.divmod(ns, NS)
        head = _distinct_texts(whole, lambda w: clock_text(w, fmt))
    else:
        neg = ns < 0
        whole, frac = np.divmod(np.abs(ns), NS)
        if hms and fmt != "e":
            head = _distinct_texts(whole * 2 + neg, lambda k: ("- " if k & 1 else "") + hms_whole(k >> 1))
        else:
            every = np.ones(n, bool)
            head = [lit(n, "-", neg)] + digits(whole, every) if neg.any() else digits(whole, every)
    parts = head + _fraction(frac, places)
    if hms and not absolute and fmt != "e":
        parts.append(lit(n, "s"))
    return [right_aligned([_packed(*join_cells(parts))], width)]


def _packed(mat: np.ndarray, mask: np.ndarray):
    """Each row's shown bytes moved to the right end, in order: pieces of varying width side by
    side (a sign, a text gathered once per value, digits) leave gaps that right_aligned would
    fill with spaces."""
    order = np.argsort(mask, axis=1, kind="stable")
    return np.take_along_axis(mat, order, axis=1), np.take_along_axis(mask, order, axis=1)


def _fraction(frac: np.ndarray, places: np.ndarray) -> list:
    """"." and the first `places` decimals of each row's ns fraction (truncated, as tshark)."""
    n, parts = len(frac), []
    for d in np.unique(places).tolist():
        rows = places == d
        if d <= 0:
            continue
        parts.append(lit(n, ".", rows))
        parts += _masked([_digits(frac // 10 ** (9 - min(d, 9)), min_width=min(d, 9))], rows)
    return parts


def _distinct_texts(keys: np.ndarray, fmt) -> list:
    """fmt(key) of each row, formatted once per distinct key."""
    distinct, index = np.unique(keys, return_inverse=True)
    return [gather(index.reshape(-1), [fmt(int(k)) for k in distinct.tolist()], np.ones(len(keys), bool))]


def _side_of_half(x: np.ndarray, us: np.ndarray) -> np.ndarray:
    """The sign of x * 1e6 - (us + 0.5), computed exactly: x * 1e6 = p + err exactly (Dekker:
    x split in two 26-bit halves, each times 1e6 exact), then (p - (us + 0.5)) is exact
    (Sterbenz) and adding err keeps the sign unless they cancel (0: left to Python)."""
    c = 134217729.0 * x
    hi = c - (c - x)
    lo = x - hi
    p = x * 1e6
    err = (hi * 1e6 - p) + lo * 1e6
    return np.sign((p - (us + 0.5)) + err)


def right_aligned(parts: list, width: int):
    """Right-aligned parts (numbers) padded with spaces to `width`, as f"{x:>{width}}" does."""
    mat, mask = join_cells(parts)
    if mat.shape[1] < width:
        pad = width - mat.shape[1]
        mat = np.concatenate([np.zeros((len(mat), pad), np.uint8), mat], axis=1)
        mask = np.concatenate([np.zeros((len(mask), pad), bool), mask], axis=1)
    tail = slice(mat.shape[1] - width, None)
    mat[:, tail] = np.where(mask[:, tail], mat[:, tail], ord(" "))
    mask[:, tail] = True
    return mat, mask


def text_block(parts: list) -> bytes:
    """The rows of `parts`, each right-stripped of spaces (str.rstrip: a PFC frame enabling no
    priority ends in "enable=0x00 ") and ended by a newline, as one bytes object."""
    n = len(parts[0][0])
    mat, mask = join_cells(parts + [const_cells(n, b"\n")])
    data = mat[mask].tobytes()
    if b" \n" not in data:                     # nearly always: no row to strip
        return data
    body_mask = mask[:, :-1]
    width = body_mask.shape[1]
    rows = np.arange(n)
    while True:
        last = width - 1 - np.argmax(body_mask[:, ::-1], axis=1)
        strip = body_mask[rows, last] & (mat[rows, last] == ord(" "))
        if not strip.any():
            return mat[mask].tobytes()
        body_mask[rows[strip], last[strip]] = False
