"""Table text built vectorised, for the CSV and JSON writers.

A column's text is a list of "parts": pairs of a uint8 matrix (rows x width) of bytes and a bool
mask of the bytes that belong to each row's text (numbers are right-aligned, the leading
positions masked out). A block of CSV or JSON rows is the masked bytes of all parts side by
side, taken in one numpy selection. This replaces one Python format call per cell (~0.3 us
each: 0.1 s for the 32k-row timeline of a 1M-packet capture). The text forms are defined by
`roceview.analysis.tables.slow_text` (one call per cell); tests check both agree.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import Coded

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
BLOCK_BYTES = 1 << 23  # rows are assembled in blocks of about this many bytes: memory stays bounded


def const_cells(n: int, text: bytes, shown: np.ndarray | None = None):
    """The same bytes on every row; `shown` (bool per row) masks them out where False."""
    mat = np.broadcast_to(np.frombuffer(text, np.uint8), (n, len(text)))
    mask = np.ones((n, len(text)), bool) if shown is None else np.repeat(shown[:, None], len(text), axis=1)
    return mat, mask


def join_cells(parts):
    """Parts side by side, as one fresh C-ordered (matrix, mask)."""
    n = len(parts[0][0])
    width = sum(p[0].shape[1] for p in parts)
    mat, mask = np.empty((n, width), np.uint8), np.empty((n, width), bool)
    at = 0
    for m, k in parts:
        mat[:, at:at + m.shape[1]] = m
        mask[:, at:at + m.shape[1]] = k
        at += m.shape[1]
    return mat, mask


def cells_text(parts) -> list[str]:
    """The text of each row of `parts` (for checks and small uses; writers use `assemble`)."""
    if not len(parts[0][0]):
        return []
    mat, mask = join_cells(parts + [const_cells(len(parts[0][0]), b"\n")])
    return mat[mask].tobytes().decode("utf-8").split("\n")[:-1]


def _digits(u: np.ndarray, base: int = 10, min_width: int = 1):
    """Right-aligned digits of unsigned ints (lowercase hex for base 16), at least min_width."""
    u = u.astype(np.uint64, copy=False)
    top = int(u.max())
    width = max(min_width, len(f"{top:x}" if base == 16 else str(top)))
    digits = np.empty((width, len(u)), np.uint8)  # digit position major: contiguous writes
    rest, q, r, b = u.copy(), np.empty_like(u), np.empty_like(u), np.uint64(base)
    for k in range(width - 1, -1, -1):
        np.floor_divide(rest, b, out=q)
        np.subtract(rest, np.multiply(q, b, out=r), out=r)
        if base == 10:
            np.add(r, ord("0"), out=digits[k], casting="unsafe")
        else:
            digits[k] = _HEX[r]
        rest, q = q, rest
    shown = np.ones((width, len(u)), bool)  # from the first non-zero digit, and the last min_width
    seen = np.zeros(len(u), bool)
    for k in range(width - min_width):
        np.logical_or(seen, digits[k] != ord("0"), out=shown[k])
        seen = shown[k]
    return digits.T, shown.T


def _magnitude(v: np.ndarray) -> np.ndarray:
    """|v| as uint64, exact even for the most negative int64."""
    if v.dtype.kind == "u":
        return v.astype(np.uint64)
    v = v.astype(np.int64)
    neg = v < 0
    return np.where(neg, -(v + 1), v).astype(np.uint64) + neg


def _signed(v: np.ndarray, parts: list) -> list:
    neg = v < 0
    return [const_cells(len(v), b"-", neg)] + parts if neg.any() else parts


def _int_parts(v: np.ndarray, empty_negative: bool) -> list:
    if not empty_negative:
        return _signed(v, [_digits(_magnitude(v))])
    neg = v < 0  # nint: negative means no value
    mat, mask = _digits(np.where(neg, 0, v))
    mask &= ~neg[:, None]
    return [(mat, mask)]


def _ts_parts(v: np.ndarray) -> list:
    """`seconds.nnnnnnnnn` from integer ns (sign, then |ns| split: as format_ts)."""
    ns = _magnitude(v)
    sec = ns // np.uint64(1_000_000_000)
    frac = ns - sec * np.uint64(1_000_000_000)
    return _signed(v, [_digits(sec), const_cells(len(v), b"."), _digits(frac, min_width=9)])


def _qp_parts(v: np.ndarray) -> list:
    shown = v >= 0
    mat, mask = _digits(np.where(shown, v, 0), 16, 6)
    mask &= shown[:, None]
    return [const_cells(len(v), b"0x", shown), (mat, mask)]


def _float_parts(x: np.ndarray, decimals: int) -> list:
    """f"{x:.{decimals}f}", NaN empty. x * 10**d rounded to an integer gives the same digits as
    Python's exact decimal rounding unless the product is within a few ulps of a half (or huge,
    negative, infinite): those rare rows are formatted by Python."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = x * 10.0 ** decimals
        whole = np.floor(y)
        frac = y - whole
        exact = ~np.signbit(x) & (y < 2.0 ** 52) & (np.abs(frac - 0.5) > 4 * np.spacing(y))
    k = np.where(exact, whole + (frac > 0.5), 0).astype(np.uint64)
    whole = k // np.uint64(10 ** decimals)
    part = k - whole * np.uint64(10 ** decimals)
    parts = [_digits(whole)]
    if decimals:
        parts += [const_cells(len(x), b"."), _digits(part, min_width=decimals)]
    for _, mask in parts:
        mask &= exact[:, None]
    odd = np.flatnonzero(~exact & ~np.isnan(x))
    if not len(odd):
        return parts
    return [_patch(*join_cells(parts), odd, [f"{x[i]:.{decimals}f}" for i in odd.tolist()])]


def _patch(mat, mask, rows, texts):
    """Put Python-formatted texts into the given rows (right-aligned; widens when needed)."""
    data = [t.encode() for t in texts]
    width = max(mat.shape[1], *map(len, data))
    if width > mat.shape[1]:
        pad = width - mat.shape[1]
        mat = np.concatenate([np.zeros((len(mat), pad), np.uint8), mat], axis=1)
        mask = np.concatenate([np.zeros((len(mask), pad), bool), mask], axis=1)
    for r, b in zip(rows.tolist(), data):
        mask[r] = False
        mat[r, width - len(b):] = np.frombuffer(b, np.uint8)
        mask[r, width - len(b):] = True
    return mat, mask


def numeric_array(values, kind: str):
    """The column as a 1-D numeric array when the parts can format it, else None (a list
    holding None, say: `slow_text` formats that cell by cell)."""
    if kind == "str":
        return None
    v = np.asarray(values)
    return v if v.ndim == 1 and v.dtype.kind in ("iuf" if kind == "float" else "iu") else None


def column_parts(values, kind: str, decimals: int = 6) -> list | None:
    """The text of a numeric column as parts; None when `numeric_array` says no."""
    v = numeric_array(values, kind)
    if v is None:
        return None
    if not len(v):
        return [(np.zeros((0, 0), np.uint8), np.zeros((0, 0), bool))]
    if kind == "float":
        return _float_parts(v.astype(np.float64), decimals)
    if kind == "ts":
        return _ts_parts(v)
    if kind == "qp":
        return _qp_parts(v)
    return _int_parts(v, empty_negative=kind == "nint")


def distinct_strings(values):
    """(row -> distinct index as int64, the distinct values in order of first row) of a column
    of str/None values; None when a value is anything else (1, 1.0 and True would be one dict
    key) or unhashable. A Coded column gives its own codes and strings (some perhaps unused)."""
    try:
        coded = Coded.of(values)
    except TypeError:  # unhashable
        return None
    if not all(type(v) is str or v is None for v in coded.names):
        return None
    return coded.codes, coded.names


def string_cells(values, render):
    """(row -> distinct index, matrix, mask) of a column of str/None values, `render` (value ->
    text) run once per distinct value: a timeline repeats each flow id thousands of times.
    None when `distinct_strings` says no."""
    found = distinct_strings(values)
    if found is None:
        return None
    codes, distinct = found
    return (codes,) + text_matrix([render(v) for v in distinct])


def text_matrix(texts: list[str]):
    """(matrix, mask) of texts, left-aligned: row i is texts[i]."""
    data = [t.encode("utf-8") for t in texts]
    width = max(map(len, data), default=0)
    mat = np.frombuffer(b"".join(d.ljust(width, b"\0") for d in data), np.uint8).reshape(len(data), width)
    return mat, np.arange(width) < np.array([len(d) for d in data], np.int64)[:, None]


def assemble(n: int, row_bytes: int, block_parts) -> bytes:
    """The masked bytes of `block_parts(lo, hi)` for all rows, a block of rows at a time so that
    the matrices stay near BLOCK_BYTES however long the table."""
    step = max(256, BLOCK_BYTES // max(1, row_bytes))
    out = []
    for lo in range(0, n, step):
        mat, mask = join_cells(block_parts(lo, min(n, lo + step)))
        out.append(mat[mask].tobytes())
    return b"".join(out)
