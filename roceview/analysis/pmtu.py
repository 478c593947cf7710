"""Path MTU per path, inferred from the traffic (issue 4: FIRST/MIDDLE payloads, 256..4096).

A fabric can mix MTUs (a 4096 storage network beside 1024 legacy hosts), so the evidence is
kept per pair of endpoints, either direction: READ responses travel back over the READ's path.
A row uses the largest FIRST/MIDDLE payload seen so far on its path; rows before the first such
packet of their path use the path's first one in the chunk, else the largest seen anywhere,
else FALLBACK. Only the per-path maxima are carried between chunks.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcodes as op
from roceview.analysis.segments import group_bounds, seg_running_max

FALLBACK_PMTU = 1024  # no FIRST/MIDDLE packet shows the path MTU (RoCE default on 1500-byte links)


def is_pmtu(payload: np.ndarray) -> np.ndarray:
    """256, 512, 1024, 2048 or 4096 (IBTA path MTUs)."""
    return (payload >= 256) & (payload <= 4096) & ((payload & (payload - 1)) == 0)


def _path_keys(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """One uint64 per unordered endpoint pair ((n, 2) uint64 address words each)."""
    swap = (src[:, 0] > dst[:, 0]) | ((src[:, 0] == dst[:, 0]) & (src[:, 1] > dst[:, 1]))
    lo, hi = np.where(swap[:, None], dst, src), np.where(swap[:, None], src, dst)
    with np.errstate(over="ignore"):
        h = lo[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ lo[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= hi[:, 0] * np.uint64(0x165667B19E3779F9) ^ hi[:, 1] * np.uint64(0xD6E8FEB86659FD93)
        h ^= h >> np.uint64(29)
    return h


class PathMtu:
    def __init__(self, given: int | None = None):
        self.given = given
        self.by_path: dict[int, int] = {}
        self.seen = 0                                   # largest anywhere (0: none yet)
        self.pending: set[int] = set()                  # paths of held READs still without evidence

    def hold(self, batch, opcode_col: str, roce: np.ndarray, holding: bool) -> bool:
        """Whether the Analyzer must hold this chunk (and those before it) until a later chunk
        shows the path MTU of a READ request's path: a READ's PSN span depends on it."""
        if self.given or opcode_col not in batch.cols:
            return holding
        opcode = batch.cols[opcode_col]
        if not self.pending and not op.may_be_read_request(opcode).any():
            return holding                              # the usual case: a cheap test suffices
        reads = op.OPCLASS[opcode] == op.READ_REQUEST
        if not self.pending and not reads.any():
            return holding
        valid = batch.mask(opcode_col) & roce[batch.cols["_proto"]]
        payload = batch.cols.get("payload_len")
        fm = valid & op.FIRST_OR_MIDDLE[opcode]
        fm = fm & batch.mask("payload_len") & is_pmtu(payload.astype(np.int64)) if payload is not None else fm & False
        reads &= valid
        keys = self._keys(batch, reads | fm)
        self.pending |= set(keys[reads[reads | fm]].tolist()) - set(self.by_path)
        self.pending -= set(keys[fm[reads | fm]].tolist())
        return holding or bool(self.pending)

    @staticmethod
    def _keys(batch, rows: np.ndarray) -> np.ndarray:
        words = [np.ascontiguousarray(batch.cols[c][rows]).view("<u8").reshape(-1, 2) for c in ("_src_addr", "_dst_addr")]
        return _path_keys(*words)

    def per_row(self, src, dst, payload: np.ndarray, opcode: np.ndarray) -> np.ndarray:
        """The path MTU for every row (only READ requests use it: their PSN span). Only FIRST/MIDDLE
        packets and READ requests are looked at, so a caller may pass just those rows."""
        if self.given:
            return np.full(len(payload), int(self.given), dtype=np.int64)
        out = np.full(len(payload), self.seen or FALLBACK_PMTU, dtype=np.int64)
        evidence = op.FIRST_OR_MIDDLE[opcode] & is_pmtu(payload)
        need = np.flatnonzero(evidence | (op.OPCLASS[opcode] == op.READ_REQUEST))
        if len(need):
            out[need] = self._rows(src[need], dst[need], np.where(evidence[need], payload[need], 0))
        return out

    def _rows(self, src, dst, ev: np.ndarray) -> np.ndarray:
        ev = ev.astype(np.int64)
        paths, inv = np.unique(_path_keys(src, dst), return_inverse=True)
        inv = inv.reshape(-1)
        order = np.argsort(inv, kind="stable")
        starts, lengths, gid = group_bounds(inv[order])
        init = np.array([self.by_path.get(int(p), 0) for p in paths], dtype=np.int64)
        before, final = seg_running_max(ev[order], starts, lengths, gid, init)
        running = np.empty_like(ev)
        running[order] = np.maximum(before, ev[order])
        first = np.zeros(len(paths), dtype=np.int64)      # the path's first evidence in the chunk
        has = np.flatnonzero(ev[order] > 0)
        first[gid[has[::-1]]] = ev[order][has[::-1]]
        for p, m in zip(paths.tolist(), final.tolist()):
            if m > 0:
                self.by_path[p] = m
        self.seen = max(self.seen, int(final.max(initial=0)))
        fill = np.where(first > 0, first, self.seen or FALLBACK_PMTU)[inv]
        return np.where(running > 0, running, fill)
