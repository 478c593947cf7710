"""Numpy kernels of the fact collector (roceview.diagnose.facts): row keys and grouping.

A chunk's RoCE rows are grouped by an exact key (the class columns packed as the digits of one
mixed-radix number: no hashing of every row, no collisions to check); the class hash the
collector keys its classes by is then computed for the groups only, hundreds instead of 65 k rows.
"""
from __future__ import annotations

import numpy as np

_M = [np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                             0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53,
                             0x27D4EB2F165667C5, 0x94D049BB133111EB)]
_SLOTS = 1 << 16
_DIRECT = 1 << 16           # keys below this index per-group tables directly
_U64 = 1 << 64


def hash_parts(parts) -> np.ndarray:
    """The class and flow hash. Its bits are part of the output (class keys, their order), so it
    stays as it was; it runs on one row per group (on every row only when no exact key fits)."""
    with np.errstate(over="ignore"):
        h = np.zeros(len(parts[0]), dtype=np.uint64)
        for i, p in enumerate(parts):
            h ^= p.astype(np.uint64) * _M[i % len(_M)]
            h = (h ^ (h >> np.uint64(31))) * _M[(i + 3) % len(_M)]
    return h


def distinct(h: np.ndarray) -> np.ndarray:
    """Group id per row (rows with equal hash share it), dense from 0, without sorting:
    scatter row numbers into a table by hash bits, keep rows that find their own hash there,
    retry the rest with other bits. The numbering (a slot's last row wins it) is the order new
    classes are added in, so it stays as it was."""
    n = len(h)
    gid = np.full(n, -1, dtype=np.int64)
    rows = np.arange(n)
    owners = []
    shift = 48
    while len(rows):
        slot = ((h[rows] >> np.uint64(shift)) & np.uint64(_SLOTS - 1)).astype(np.int64) if shift >= 0 \
            else (h[rows] % np.uint64(_SLOTS - 1)).astype(np.int64)
        table = np.full(_SLOTS, -1, dtype=np.int64)
        table[slot] = rows
        owner = table[slot]
        ok = h[owner] == h[rows]
        mark = np.zeros(n, dtype=bool)            # the owners, in row order, without a sort
        mark[owner[ok]] = True
        used = np.flatnonzero(mark)
        remap = np.full(n, -1, dtype=np.int64)
        remap[used] = np.arange(len(owners), len(owners) + len(used))
        owners.extend(used.tolist())
        gid[rows[ok]] = remap[owner[ok]]
        rows = rows[~ok]
        shift -= 16
    return gid


def distinct_rank(h: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The id distinct() gives each group (hash h, last row `last`) over the chunk's rows: it
    depends only on the hashes and the groups' last rows, so one row per group gives the same."""
    order = np.argsort(last, kind="stable")
    rank = np.empty(len(h), dtype=np.int64)
    rank[order] = distinct(h[order])
    return rank


def mixed_radix(fields) -> tuple[np.ndarray | None, int, tuple]:
    """(key, size, bounds): `fields` (1-D arrays of unsigned ints, or 2-D arrays of such rows)
    packed as the digits of one number, digit = value - its chunk minimum, base = its chunk
    range, so that equal keys are equal fields and 0 <= key < size. Keys of two chunks with the
    same `bounds` (every field's minimum and maximum) mean the same fields. key None when size
    passes 2^64."""
    digits, size, bounds = [], 1, []
    for f in fields:
        rows = f if f.ndim == 2 else f[None]
        lows, highs = rows.min(axis=1).tolist(), rows.max(axis=1).tolist()
        bounds += lows + highs
        for row, lo, hi in zip(rows, lows, highs):
            if hi > lo:                            # a constant field tells no rows apart
                digits.append((row, lo, size))
                size *= hi - lo + 1
                if size > _U64:
                    return None, size, ()
    n = len(fields[0]) if fields[0].ndim == 1 else fields[0].shape[1]
    if not digits:
        return np.zeros(n, dtype=np.uint64), 1, tuple(bounds)
    offset = sum(lo * scale for _, lo, scale in digits) % _U64
    first = digits[0][0]
    key = np.subtract(first, np.uint64(offset), dtype=np.uint64)   # wraps: the sum lands in [0, size)
    tmp = np.empty(n, dtype=np.uint64)
    for row, _, scale in digits[1:]:
        np.multiply(row, np.uint64(scale), out=tmp, dtype=np.uint64)
        key += tmp
    return key, size, tuple(bounds)


def group_max(labels: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Per label 0 .. size - 1, the largest of the `values` (int64, -1 or more) it labels; -1 for none."""
    top = np.full(size, -1, dtype=np.int64)
    np.maximum.at(top, labels, values)
    return top


class Groups:
    """Rows grouped by key: `labels` per row (< `size`), `used` the labels present, and per used
    label its row count and last row. `exact`: the key is the fields themselves (mixed_radix), not
    a hash of them, so every field is constant within a group."""

    def __init__(self, key: np.ndarray, size: int, exact: bool = True):
        self.n, self.exact = len(key), exact
        if size <= _DIRECT:                        # the key is its own table index
            self.labels, self.size = key.view(np.int64), size
            counts = np.bincount(self.labels, minlength=size)
            self.used = np.flatnonzero(counts)
            self.counts = counts[self.used]
            self.last = self.n - 1 - self._edge(self.labels[::-1])
        else:
            self.labels, self.last = _hashed(key)
            self.size = len(self.last)
            self.used = np.arange(self.size)
            self.counts = np.bincount(self.labels, minlength=self.size)

    def sum(self, weights) -> np.ndarray:
        return np.bincount(self.labels, weights, minlength=self.size)[self.used]

    def max(self, values) -> np.ndarray:
        """Per used label, the largest of `values` (int64, -1 or more)."""
        return group_max(self.labels, values, self.size)[self.used]

    def first(self) -> np.ndarray:
        return self._edge(self.labels)

    def _edge(self, labels) -> np.ndarray:
        """Per used label, the index of its first occurrence in `labels`. Every group usually
        shows up within the first few thousand rows: those are scanned first, more if needed."""
        table = None
        start, stop = 0, min(self.n, 4096)
        while True:
            part = np.full(self.size, -1, dtype=np.int64)
            part[labels[start:stop][::-1]] = np.arange(stop - 1, start - 1, -1)   # the first wins
            table = part if table is None else np.where(table < 0, part, table)
            if stop == self.n or (table[self.used] >= 0).all():
                return table[self.used]
            start, stop = stop, min(self.n, 4 * stop)


def _hashed(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense group ids and each group's last row for keys too wide to index a table: a slot table
    by multiplicative hash; rows whose slot another key won go again with another multiplier."""
    n = len(key)
    gid = np.empty(n, dtype=np.int64)
    lasts, k, rows, attempt = [], 0, None, 0
    with np.errstate(over="ignore"):
        while True:
            sub = key if rows is None else key[rows]
            pos = np.arange(len(sub))
            slot = ((sub * _M[attempt % len(_M)]) >> np.uint64(48)).view(np.int64)
            table = np.empty(_SLOTS, dtype=np.int64)
            table[slot] = pos                      # a slot's last row owns it (numpy writes in order)
            owner = table[slot]
            ok = sub[owner] == sub
            own = np.flatnonzero(owner == pos)     # one per won slot: the winning key's last row
            remap = np.empty(_SLOTS, dtype=np.int64)
            remap[slot[own]] = np.arange(k, k + len(own))
            ids = remap[slot]
            k += len(own)
            if rows is None and ok.all():
                return ids, own
            at = pos if rows is None else rows
            gid[at[ok]] = ids[ok]
            lasts.append(at[own])
            rows = at[~ok]
            if not len(rows):
                return gid, np.concatenate(lasts)
            attempt += 1


class SortedMap:
    """uint64 keys -> int64 values in two sorted arrays, looked up with one searchsorted: with
    50 k flows a dict lookup per group (tolist, map(get), a list back to numpy) cost ~10 ms
    a 64 k-row chunk."""

    def __init__(self, dtype=np.int64):
        self.keys = np.zeros(0, dtype=np.uint64)
        self.values = np.zeros(0, dtype=dtype)

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, found): values are 0 where not found."""
        keys = np.asarray(keys, dtype=np.uint64)
        if not len(self.keys):
            return np.zeros(len(keys), dtype=self.values.dtype), np.zeros(len(keys), dtype=bool)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[pos] == keys
        return np.where(found, self.values[pos], 0), found

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """New keys (not present, distinct) with their values."""
        keys = np.concatenate([self.keys, np.asarray(keys, dtype=np.uint64)])
        values = np.concatenate([self.values, np.asarray(values).astype(self.values.dtype, copy=False)])
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], values[order]
