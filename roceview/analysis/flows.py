"""Flow registry: maps (src address, dst address, dest QP) to dense flow ids, chunk after chunk.

A flow is one direction of a queue pair (issue 4). Addresses are the raw 16-byte forms of the
Batch (`_src_addr`/`_dst_addr`: IPv4 as ::ffff:a.b.c.d, GIDs as is), so a RoCEv1 GID that is
IPv4-mapped and the RoCEv2 IPv4 address of the same host are the same endpoint. Native IB
frames without a GRH have no GID: their LIDs stand in (`lid:0xNNNN`).

Ids are given in order of first appearance in the capture, so they do not depend on chunking.
Rows are matched by a 64-bit hash (sorted array + searchsorted); every row is then compared with
its flow's full key, and the rare hash collision is resolved exactly.
"""
from __future__ import annotations

import ipaddress

import numpy as np

_LID_MARK = np.uint64(0xFFFFFFFFFFFFFFFF)  # first address word of a LID-only endpoint
_MULS = [np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)]


def address_words(batch, rows: np.ndarray, which: str) -> np.ndarray:
    """(n, 2) uint64 words of the source or destination address of the selected rows."""
    raw = np.ascontiguousarray(batch.cols[f"_{which}_addr"][rows], dtype=np.uint8)
    words = raw.view("<u8").reshape(len(rows), 2).copy()
    lid_col = "slid" if which == "src" else "dlid"
    if lid_col in batch.cols:
        lid_ok = batch.mask(lid_col)[rows] & (words[:, 0] == 0) & (words[:, 1] == 0)
        if lid_ok.any():
            words[lid_ok, 0] = _LID_MARK
            words[lid_ok, 1] = batch.cols[lid_col][rows][lid_ok].astype(np.uint64)
    return words


def format_address(words: np.ndarray) -> str:
    """Text form of one endpoint: dotted IPv4 for IPv4-mapped addresses, IPv6/GID, or lid:0xNNNN."""
    if np.uint64(words[0]) == _LID_MARK:
        return f"lid:0x{int(words[1]):04x}"
    addr = ipaddress.IPv6Address(np.asarray(words, dtype="<u8").tobytes())
    return str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)


def _hash(src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = src[:, 0] * _MULS[0]
        h ^= src[:, 1] * _MULS[1]
        h ^= dst[:, 0] * _MULS[2]
        h ^= dst[:, 1] * _MULS[3]
        h ^= qp.astype(np.uint64) * _MULS[4]
        h ^= h >> np.uint64(29)
        h *= _MULS[5]
    return h


class FlowRegistry:
    def __init__(self):
        self.n = 0
        self._hashes = np.zeros(0, dtype=np.uint64)  # sorted
        self._ids = np.zeros(0, dtype=np.int64)
        self.src = np.zeros((0, 2), dtype=np.uint64)
        self.dst = np.zeros((0, 2), dtype=np.uint64)
        self.qp = np.zeros(0, dtype=np.uint32)
        self._collided: dict[tuple, int] = {}

    def lookup(self, src: np.ndarray, dst: np.ndarray, qp: np.ndarray) -> tuple[np.ndarray, int]:
        """Flow id per row, registering new flows; returns (ids, number of flows before)."""
        before = self.n
        h = _hash(src, dst, qp)
        ids = self._find(h)
        new = ids < 0
        if new.any():
            self._register(h, src, dst, qp, np.flatnonzero(new))
            ids[new] = self._find(h[new])
        bad = self._mismatch(ids, src, dst, qp)
        if bad.any():
            self._resolve_collisions(ids, bad, src, dst, qp)
        return ids, before

    def _find(self, h: np.ndarray) -> np.ndarray:
        if self.n == 0:
            return np.full(len(h), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._hashes, h), len(self._hashes) - 1)
        return np.where(self._hashes[pos] == h, self._ids[pos], -1)

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
        hashes = np.concatenate([self._hashes, h])
        ids = np.concatenate([self._ids, new_ids])
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._ids = hashes[order], ids[order]
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
            ids[r] = fid

    def endpoint_names(self) -> tuple[list[str], list[str]]:
        cache: dict[tuple, str] = {}

        def name(words):
            key = (int(words[0]), int(words[1]))
            if key not in cache:
                cache[key] = format_address(words)
            return cache[key]
        return [name(w) for w in self.src], [name(w) for w in self.dst]
