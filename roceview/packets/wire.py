"""A file's decoded chunks packed for the trip from a Dask worker to the driver, and back.

As decoded, the analysis projection's columns took about 4x as long to fetch as to decode
(docs/performance.md). Packed, lossless: one buffer per column for the whole file (the chunk lengths
kept, so the driver's chunks are the reader's), validity masks as bits (or nothing when every
row or no row is valid), columns with no value and no valid row as nothing, and the MAC and
16-byte address columns (few distinct values) as codes into their distinct values, or where
they are not coded, addresses sharing their first 12 bytes (IPv4) as their last 4 and integer
columns without negative values as the narrowest unsigned type that holds their largest value.
`frame` is not sent from captures: the merge numbers frames.
"""
from __future__ import annotations

import math

import numpy as np

from roceview.packets.batch import Batch

CODED = ("_src_mac", "_dst_mac", "_src_addr", "_dst_addr")
UNSENT = ("frame",)


def pack(batches: list[Batch], unsent=UNSENT, coded=CODED) -> dict:
    """coded: the columns sent as codes into their distinct values (() for none: cheaper to
    pack when the trip is short, engines.dask.partition)."""
    lengths = [b.n for b in batches]
    if not batches or not sum(lengths):
        return {"lengths": [], "cols": {}, "valid": {}}
    first = batches[0]
    cols = {name: _pack_values(name, _joined([b.cols[name] for b in batches]), unsent, coded) for name in first.cols}
    valid = {name: _pack_mask(_joined([b.mask(name) for b in batches])) for name in first.valid}
    return {"lengths": lengths, "cols": cols, "valid": valid}


def pack_split(batch: Batch, selections: list, coded=CODED) -> list[dict]:
    """pack([batch.select(rows)]) for each selection of rows (None: every row), each column
    encoded once for the whole batch and then its rows taken: the rows are gathered narrowed
    (~48 bytes a row, not ~100), and the MAC codes found once. The same encodings in every
    pack (a column narrowed for the whole batch is narrowed in each part; codes index the
    batch's distinct values): unpack gives the same rows."""
    packs = [{"lengths": [batch.n if rows is None else len(rows)], "cols": {}, "valid": {}} for rows in selections]
    for name, values in batch.cols.items():
        encoded = _pack_values(name, values, UNSENT, coded)
        for out, rows in zip(packs, selections):
            out["cols"][name] = encoded if rows is None else _taken(encoded, rows)
    for name in batch.valid:
        mask = batch.mask(name)
        whole = mask.all() or not mask.any()        # the usual column: the same in every part
        for out, rows in zip(packs, selections):
            n = batch.n if rows is None else len(rows)
            out["valid"][name] = (("ones" if mask[0] else "none"), n) if whole and n and batch.n else \
                _pack_mask(mask if rows is None else mask[rows])
    return packs


def _taken(encoded: tuple, rows: np.ndarray) -> tuple:
    kind = encoded[0]
    if kind == "zeros":
        return ("zeros", encoded[1], (len(rows),) + tuple(encoded[2][1:]))
    if kind == "raw":
        return ("raw", encoded[1][rows])
    return encoded[:-1] + (encoded[-1][rows],)          # coded, narrow, tail4: the per-row part


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _pack_values(name: str, values: np.ndarray, unsent, coded=CODED):
    if name in unsent or not (values.any() or _negative_zero(values)):
        return ("zeros", values.dtype.str, values.shape)
    if name in coded:
        from roceview.packets.table import _factorize

        codes, first = _factorize(values)
        return ("coded", values[first], codes.astype(_smallest(len(first) - 1)))
    if values.ndim == 2 and values.shape[1] == 16 and values.dtype == np.uint8:
        return _pack_address(values)
    if values.ndim == 1 and values.dtype.kind in "ui" and values.itemsize > 1 and \
            (values.dtype.kind == "u" or int(values.min()) >= 0):
        small = _smallest(int(values.max()))
        if small().itemsize < values.itemsize:
            return ("narrow", values.dtype.str, values.astype(small))
    return ("raw", np.ascontiguousarray(values))


def _negative_zero(values: np.ndarray) -> bool:
    """Whether a column of zeros holds a -0.0 (a result table's float: its CSV text is '-0...')."""
    return values.dtype.kind in "fc" and bool(np.signbit(values.real).any())


def pack_array(values: np.ndarray):
    """One array as pack() sends a column (zeros as nothing, narrowed), for unpack_array; an
    integer column whose values sit in a narrow range above a large one (a result table's
    timestamps: events' ts, a flow's first and last) as that one and the narrowed distances to
    it: the results cross to the driver after the last task, where every byte waits (a
    timeline's bucket_start goes as steps, engines.dask.partition_run._stepped). Not for parts
    (pack_split): their steps would add it back."""
    packed = _pack_values("", values, (), ())
    if packed[0] != "raw" or values.ndim != 1 or values.dtype.kind not in "ui" or values.itemsize == 1 \
            or not len(values):
        return packed
    low = int(values.min())
    small = _smallest(int(values.max()) - low)
    if small().itemsize >= values.itemsize:
        return packed
    return ("offset", values.dtype.str, low, (values - values.dtype.type(low)).astype(small))


def unpack_array(packed) -> np.ndarray:
    return _unpack_values(packed)


def _smallest(largest: int):
    return np.uint8 if largest < 1 << 8 else np.uint16 if largest < 1 << 16 else np.uint32 if largest < 1 << 32 \
        else np.uint64


def _pack_address(values: np.ndarray):
    """16-byte addresses whose first 12 bytes are one row's (IPv4 as ::ffff:a.b.c.d, the usual
    RoCEv2 GID) as those 12 bytes and 4 bytes a row: 32 of a packet's ~100 bytes were these
    columns, and every byte crosses between workers and stays in memory until its partition is
    analyzed. Two compares a row, where hashing them (coded) cost 20 % more than the decode."""
    words = np.ascontiguousarray(values).view("<u8").reshape(len(values), 2)
    low = np.uint64(0xFFFFFFFF)
    if not ((words[:, 0] == words[0, 0]).all() and ((words[:, 1] & low) == (words[0, 1] & low)).all()):
        return ("raw", np.ascontiguousarray(values))
    return ("tail4", values[0, :12].copy(), (words[:, 1] >> np.uint64(32)).astype(np.uint32))


def _pack_mask(mask: np.ndarray):
    if mask.all():
        return ("ones", len(mask))
    if not mask.any():
        return ("none", len(mask))
    return ("bits", np.packbits(mask), len(mask))


def unpack(packed: dict):
    """The chunks again, as the reader's Batches (views into one array per column)."""
    cols = {name: _unpack_values(v) for name, v in packed["cols"].items()}
    valid = {name: _unpack_mask(v) for name, v in packed["valid"].items()}
    start = 0
    for n in packed["lengths"]:
        end = start + n
        yield Batch(n, {k: v[start:end] for k, v in cols.items()}, {k: v[start:end] for k, v in valid.items()})
        start = end


def unpack_column(packed: dict, name: str) -> np.ndarray:
    """One column of a pack, every chunk's rows."""
    return unpack_array(packed["cols"][name])


def _unpack_values(packed) -> np.ndarray:
    kind = packed[0]
    if kind == "zeros":
        return np.zeros(packed[2], np.dtype(packed[1]))
    if kind == "coded":
        return packed[1][packed[2]]
    if kind == "narrow":
        return packed[2].astype(np.dtype(packed[1]))
    if kind == "offset":
        dtype = np.dtype(packed[1])
        return packed[3].astype(dtype) + dtype.type(packed[2])
    if kind == "tail4":
        out = np.empty((len(packed[2]), 16), np.uint8)
        out[:, :12] = packed[1]
        out[:, 12:] = packed[2].astype("<u4").view(np.uint8).reshape(-1, 4)
        return out
    return packed[1]


def _unpack_mask(packed) -> np.ndarray:
    kind = packed[0]
    if kind == "ones":
        return np.ones(packed[1], bool)
    if kind == "none":
        return np.zeros(packed[1], bool)
    return np.unpackbits(packed[1], count=packed[2]).view(bool)


class Packed(list):
    """A file's part (its packs, one a chunk read) as it stays on the worker that read it, sent
    to another (pickled) as one buffer a pack (Flat; chunk-sized, so heap memory malloc
    reuses): copied only when it crosses."""

    def __init__(self, packs=(), nbytes: int | None = None):
        super().__init__(packs)
        self._nbytes = _packs_nbytes(self) if nbytes is None else nbytes

    def append(self, pack) -> None:
        super().append(pack)
        self._nbytes += _pack_nbytes(pack)

    def __reduce__(self):
        return _unflattened, ([Flat(pack) for pack in self], self._nbytes)

    def nbytes(self) -> int:
        """Its arrays' bytes (dask.sizeof, registered in engines.dask.partition: as a list Dask sampled
        10 of a pack's columns, 0.47x to 1.55x of this from one call to the next), counted as
        packs are appended: the workers size a part each time it is stored (the read's result,
        its part, its arrival), and walking its ~400 arrays each time cost 0.1-0.15 CPU s a
        worker per 8 M-packet run (py-spy), in the task's thread and the event loop's."""
        return self._nbytes


def _recounted(name: str):
    """list's method `name` for Packed, counting the packs again after it (only append, what
    the reads do, counts as it goes; any other change would leave the count stale)."""
    def changed(self, *args, **kwargs):
        out = getattr(list, name)(self, *args, **kwargs)
        self._nbytes = _packs_nbytes(self)
        return self if name == "__iadd__" else out
    changed.__name__ = name
    return changed


for _name in ("extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__", "__delitem__",
              "__iadd__"):
    setattr(Packed, _name, _recounted(_name))


def array_bytes(obj) -> int:
    """The bytes of the numpy arrays (not of objects) in nested dicts, lists and tuples, as Flat
    would copy them."""
    arrays: list[np.ndarray] = []
    _hollow(obj, arrays)
    return sum(a.nbytes for a in arrays)


def _pack_nbytes(pack: dict) -> int:
    """array_bytes of one pack (pack, pack_split), without walking it as a tree: its encodings
    hold their arrays at the top (~35 arrays a pack, 16 packs a file a partition)."""
    return sum(x.nbytes for encodings in (pack["cols"], pack["valid"]) for encoded in encodings.values()
               for x in encoded if isinstance(x, np.ndarray))


def _packs_nbytes(packs) -> int:
    return sum(_pack_nbytes(p) for p in packs)


def _unflattened(flats: list, nbytes: int | None = None) -> Packed:
    return Packed((flat.value() for flat in flats), nbytes)


class Flat:
    """Nested dicts, lists and tuples of numpy arrays (a partition's pieces of a file) with
    every array copied into one buffer: Dask sends each array of a message as a frame of its
    own, and a file's part (~25 columns x 16 chunks) crossed between workers as ~400 frames,
    a sendto and a GIL hand-over between the worker's event loop and its task each (18 k futex
    waits a worker per 8 M-packet run). `value()` gives the structure back, its arrays views
    into the buffer."""

    ALIGN = 16

    def __init__(self, obj):
        arrays: list[np.ndarray] = []
        self.skeleton = _hollow(obj, arrays)
        ends = np.cumsum([-(-a.nbytes // self.ALIGN) * self.ALIGN for a in arrays]).tolist()
        self.blob = np.empty(ends[-1] if ends else 0, np.uint8)
        for a, end in zip(arrays, ends):
            if a.nbytes:
                lo = end - -(-a.nbytes // self.ALIGN) * self.ALIGN
                self.blob[lo:lo + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        self.offsets = [0] + ends[:-1]

    def value(self):
        if self.blob.ctypes.data % self.ALIGN:     # received inside a message at any address
            self.blob = self.blob.copy()           # (numpy's own allocations are aligned)
        return _filled(self.skeleton, self.blob, self.offsets)


class _Slot:
    __slots__ = ("k", "dtype", "shape")

    def __init__(self, k: int, dtype: str, shape: tuple):
        self.k, self.dtype, self.shape = k, dtype, shape

    def __reduce__(self):
        return _Slot, (self.k, self.dtype, self.shape)


def _hollow(obj, arrays: list):
    if isinstance(obj, np.ndarray) and obj.dtype.kind != "O":
        arrays.append(obj)
        return _Slot(len(arrays) - 1, obj.dtype.str, obj.shape)
    if isinstance(obj, dict):
        return {k: _hollow(v, arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_hollow(v, arrays) for v in obj)
    return obj


def _filled(obj, blob: np.ndarray, offsets: list):
    if isinstance(obj, _Slot):
        dtype = np.dtype(obj.dtype)
        n = math.prod(obj.shape)                 # np.prod: ~10 us a call, thousands a part
        lo = offsets[obj.k]
        return blob[lo:lo + n * dtype.itemsize].view(dtype).reshape(obj.shape)
    if isinstance(obj, dict):
        return {k: _filled(v, blob, offsets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_filled(v, blob, offsets) for v in obj)
    return obj
