"""Flow registry: maps (src address, dst address, dest QP) to dense flow ids, chunk after chunk.

A flow is one direction of a queue pair. Addresses are the raw 16-byte forms of the
Batch (`_src_addr`/`_dst_addr`: IPv4 as ::ffff:a.b.c.d, GIDs as is), so a RoCEv1 GID that is
IPv4-mapped and the RoCEv2 IPv4 address of the same host are the same endpoint. Native IB
frames without a GRH have no GID: their LIDs stand in (`lid:0xNNNN`, as packets/names.py writes them).

Ids are given in order of first appearance in the capture, so they do not depend on chunking.
With the C kernels built, `new_registry()` gives the compiled index (kernels/_flowindex.c: an
open-addressing table comparing whole keys); FlowRegistry below is the numpy fallback, giving
the same ids. There, rows are matched by a 64-bit hash: a direct-mapped table indexed by the hash's top bits answers
almost every row with two gathers; rows it cannot answer (new flows, two hashes in one slot) search
the sorted hash array. A second, independent 64-bit hash is compared on every row, rows where it
differs are compared with the flow's full key, and a hash collision is resolved exactly.
"""
from __future__ import annotations


import numpy as np

from roceview.packets.names import format_address  # noqa: F401  (the analysis's own name for it)
_MULS = [np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)]


def address_words(batch, rows: np.ndarray | None, which: str) -> np.ndarray:
    """(n, 2) uint64 words of the source or destination address of the selected rows (None: all
    rows, a view without a copy). `take` on the word view copies 16 bytes per row at once, far
    faster than fancy-indexing the (n, 16) bytes."""
    raw = np.ascontiguousarray(batch.cols[f"_{which}_addr"], dtype=np.uint8)
    words = raw.view("<u8").reshape(len(raw), 2)
    return words if rows is None else words.take(rows, axis=0)


_MULS2 = [np.uint64(c) for c in (0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3,
                                  0x589965CC75374CC3, 0x1D8E4E27C47D124F, 0x9FB21C651E98DF25)]


def _hash(src: np.ndarray, dst: np.ndarray, qp: np.ndarray, muls=_MULS) -> np.ndarray:
    return _hash_words(_key_words(src, dst, qp), muls)


def _key_words(src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> list:
    """The key as contiguous uint64 columns (src 2, dst 2, qp), None for an all-zero first address
    word (IPv4-mapped addresses: its term is 0 and is skipped, same hash). Both hashes read these:
    one copy of a strided column is cheaper than two strided passes."""
    words = [None if high and _all_zero(w) else np.ascontiguousarray(w)
             for w, high in ((src[:, 0], True), (src[:, 1], False),
                             (dst[:, 0], True), (dst[:, 1], False))]
    return words + [qp.astype(np.uint64, copy=False)]


def _hash_words(words: list, muls=_MULS) -> np.ndarray:
    """One scratch buffer instead of a temporary per term (integer arrays wrap silently)."""
    h = np.multiply(words[4], muls[4])
    buf = np.empty_like(h)
    for w, mul in zip(words[:4], muls[:4]):
        if w is not None:
            h ^= np.multiply(w, mul, out=buf)
    h ^= np.right_shift(h, np.uint64(29), out=buf)
    h *= muls[5]
    return h


def _all_zero(words: np.ndarray) -> bool:
    return len(words) == 0 or words.max() == 0       # max: the cheapest reduction over uint64


# Direct-mapped tables of 1k..1M slots indexed by the hash's top bits; a hash whose slot is taken
# goes to a second table indexed by its low bits, and only a hash that finds neither (new, or
# both slots taken) is searched for in the sorted array.
_MIN_SLOT_BITS, _MAX_SLOT_BITS = 10, 20


class _Slots:
    def __init__(self, hashes: np.ndarray, ids: np.ndarray, top: bool):
        bits = int(np.clip((len(hashes) * 4).bit_length(), _MIN_SLOT_BITS, _MAX_SLOT_BITS))
        self.top, self.shift, self.mask = top, np.uint64(64 - bits), np.uint64((1 << bits) - 1)
        self.hash = np.zeros(1 << bits, dtype=np.uint64)
        self.id = np.full(1 << bits, -1, dtype=np.int64)
        slot = self.slot(hashes)
        used, first = np.unique(slot, return_index=True)   # the first hash of a slot wins
        self.hash[used], self.id[used] = hashes[first], ids[first]
        self.placed = np.zeros(len(hashes), dtype=bool)
        self.placed[first] = True

    def slot(self, h: np.ndarray) -> np.ndarray:
        s = (h >> self.shift) if self.top else (h & self.mask)
        return s.view(np.int64)                              # < 2^20: same value as int64

    def find(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, rows not answered): a slot answers only a row whose hash equals the slot's."""
        slot = self.slot(h)
        return self.id.take(slot), np.flatnonzero(self.hash.take(slot) != h)


def new_registry():
    """The compiled flow index when the C kernels are built (kernels/_flowindex.c: ~3x faster
    on a chunk), else the numpy one; both give the same ids (tests/kernels/test_flow_index.py)."""
    from roceview.kernels import backend as kernels

    return CompiledFlowRegistry(kernels.flow_ids) if kernels.flow_ids is not None else FlowRegistry()


class CompiledFlowRegistry:
    """FlowRegistry's interface over kernels/_flowindex.c: a slot table of flow ids and the
    registry columns, grown (doubled) by Python when the kernel stops for room."""

    def __init__(self, flow_ids):
        self._flow_ids = flow_ids
        self._n = np.zeros(1, dtype=np.int64)
        self._src = np.zeros((64, 2), dtype=np.uint64)
        self._dst = np.zeros((64, 2), dtype=np.uint64)
        self._qp = np.zeros(64, dtype=np.uint32)
        self._slots = np.full(256, -1, dtype=np.int64)

    n = property(lambda self: int(self._n[0]))
    src = property(lambda self: self._src[:self.n])
    dst = property(lambda self: self._dst[:self.n])
    qp = property(lambda self: self._qp[:self.n])

    def lookup(self, src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> tuple[np.ndarray, int]:
        """Flow id per row, registering new flows; returns (ids, number of flows before)."""
        before = self.n
        return self._ids(src, dst, qp, insert=True), before

    def find(self, src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> np.ndarray:
        """Flow id per key, -1 for keys never seen (nothing is registered)."""
        return self._ids(src, dst, qp, insert=False)

    def _ids(self, src, dst, qp, insert: bool) -> np.ndarray:
        src, dst = np.ascontiguousarray(src, dtype=np.uint64), np.ascontiguousarray(dst, dtype=np.uint64)
        qp = np.ascontiguousarray(qp, dtype=np.uint32)
        out = np.empty(len(qp), dtype=np.int64)
        done = 0
        while True:
            done += self._flow_ids(src[done:], dst[done:], qp[done:], insert, self._slots, self._src, self._dst,
                                   self._qp, self._n, out[done:])
            if done == len(qp):
                return out
            self._grow()

    def _grow(self) -> None:
        n = self.n
        if n == len(self._qp):                               # registry columns full: double them
            self._src, self._dst = (np.concatenate([a, np.zeros_like(a)]) for a in (self._src, self._dst))
            self._qp = np.concatenate([self._qp, np.zeros_like(self._qp)])
        if 2 * (n + 1) > len(self._slots):                   # table half full: double, insert again
            self._slots = np.full(2 * len(self._slots), -1, dtype=np.int64)
            self._n[0] = 0                                   # the same keys in id order: the same ids
            self._flow_ids(self._src[:n].copy(), self._dst[:n].copy(), self._qp[:n].copy(), True, self._slots,
                           self._src, self._dst, self._qp, self._n, np.empty(n, dtype=np.int64))

    def endpoint_names(self) -> tuple[list[str], list[str]]:
        return FlowRegistry.endpoint_names(self)


class FlowRegistry:
    def __init__(self):
        self.n = 0
        self._hashes = np.zeros(0, dtype=np.uint64)  # sorted
        self._ids = np.zeros(0, dtype=np.int64)
        self.src = np.zeros((0, 2), dtype=np.uint64)
        self.dst = np.zeros((0, 2), dtype=np.uint64)
        self.qp = np.zeros(0, dtype=np.uint32)
        self._check = np.zeros(0, dtype=np.uint64)  # second, independent hash per flow
        self._collided: dict[tuple, int] = {}
        self._slots = self._slots2 = None

    def lookup(self, src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> tuple[np.ndarray, int]:
        """Flow id per row, registering new flows; returns (ids, number of flows before)."""
        before = self.n
        qp = np.asarray(qp).astype(np.uint32, copy=False)      # QPNs are 24-bit: as the C index
        words = _key_words(src, dst, qp)
        h = _hash_words(words, _MULS)
        ids = self._find(h)
        new = ids < 0
        if new.any():
            self._register(h, src, dst, qp, np.flatnonzero(new))
            ids[new] = self._find(h[new])
        check = _hash_words(words, _MULS2)
        suspect = np.flatnonzero(self._check.take(ids) != check)
        bad = np.zeros(len(ids), dtype=bool)
        if len(suspect):  # the second hash differs: compare the full keys of those rows
            bad[suspect] = self._mismatch(ids[suspect], src[suspect], dst[suspect], qp[suspect])
        if bad.any():
            self._resolve_collisions(ids, bad, src, dst, qp)
        return ids, before

    def find(self, src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> np.ndarray:
        """Flow id per key, -1 for keys never seen (nothing is registered)."""
        qp = np.asarray(qp).astype(np.uint32, copy=False)
        ids = self._find(_hash(src, dst, qp))
        ok = np.flatnonzero(ids >= 0)
        ids[ok[self._mismatch(ids[ok], src[ok], dst[ok], qp[ok])]] = -1
        return ids

    def _find(self, h: np.ndarray) -> np.ndarray:
        if self.n == 0:
            return np.full(len(h), -1, dtype=np.int64)
        ids, miss = self._slots.find(h)
        if len(miss):
            ids2, miss2 = self._slots2.find(h[miss])
            ids[miss] = ids2
            if len(miss2):  # in neither table: a new flow, or both of its slots were taken
                miss = miss[miss2]
                ids[miss] = self._search(h[miss])
        return ids

    def _search(self, h: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
        return np.where(self._hashes[pos] == h, self._ids[pos], -1)

    def _build_slots(self) -> None:
        self._slots = _Slots(self._hashes, self._ids, top=True)
        rest = ~self._slots.placed
        self._slots2 = _Slots(self._hashes[rest], self._ids[rest], top=False)

    def _register(self, h, src, dst, qp, rows):
        _, first = np.unique(h[rows], return_index=True)
        rows = rows[np.sort(first)]  # one row per new hash, in order of appearance
        self._append(h[rows], src[rows], dst[rows], qp[rows])

    def _append(self, h, src, dst, qp) -> np.ndarray:
        new_ids = np.arange(self.n, self.n + len(h), dtype=np.int64)
        self.n += len(h)
        self.src = np.concatenate([self.src, src])
        self.dst = np.concatenate([self.dst, dst])
        self.qp = np.concatenate([self.qp, qp.astype(np.uint32)])
        self._check = np.concatenate([self._check, _hash(src, dst, qp, _MULS2)])
        hashes = np.concatenate([self._hashes, h])
        ids = np.concatenate([self._ids, new_ids])
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._ids = hashes[order], ids[order]
        self._build_slots()
        return new_ids

    def _mismatch(self, ids, src, dst, qp) -> np.ndarray:
        return ((self.src[ids] != src).any(axis=1) | (self.dst[ids] != dst).any(axis=1)
                | (self.qp[ids] != qp))

    def _resolve_collisions(self, ids, bad, src, dst, qp):
        """Rows whose hash belongs to another flow's key (astronomically rare): exact dict."""
        for r in np.flatnonzero(bad):
            key = (*src[r].tolist(), *dst[r].tolist(), int(qp[r]))
            fid = self._collided.get(key)
            if fid is None:
                fid = self._collided[key] = self.n
                self.n += 1
                self.src = np.concatenate([self.src, src[r:r + 1]])
                self.dst = np.concatenate([self.dst, dst[r:r + 1]])
                self.qp = np.concatenate([self.qp, qp[r:r + 1].astype(np.uint32)])
                self._check = np.concatenate([self._check, _hash(src[r:r + 1], dst[r:r + 1], qp[r:r + 1], _MULS2)])
            ids[r] = fid

    def endpoint_names(self) -> tuple[list[str], list[str]]:
        cache: dict[tuple, str] = {}

        def name(words):
            key = (int(words[0]), int(words[1]))
            if key not in cache:
                cache[key] = format_address(words)
            return cache[key]
        return [name(w) for w in self.src], [name(w) for w in self.dst]
