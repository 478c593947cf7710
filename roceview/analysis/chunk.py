"""The RoCE rows of one chunk: capture-order columns, flow ids, and the grouping by PSN space.

Rows with a PSN space come first, grouped by space id `flow * 2 + space`, then the rows without
one (CNP, UD, no valid PSN), grouped by flow; capture order inside every group (one stable radix
sort of a 16-bit key). Restricted to any one flow this is the (flow, space) order the analysis is
defined in, so "the first row of a flow" means the same row. Only the PSN part (psn.py) is gathered
into that order; counters, events and the timeline read the capture-order columns, which are views
without a copy when every row of the chunk is a RoCE row.

Positions: `r` indexes the RoCE rows in capture order, `b` the batch rows (b = rows[r]), `s` the
grouped order (r = order[s]); the PSN part is s < n_psn.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.flows import address_words
from roceview.analysis.segments import PSN_MOD, group_of
from roceview.packets.batch import Batch
from roceview.kernels import backend as kernels


class ChunkRows:
    def __init__(self, an, batch: Batch, rows: np.ndarray | None, idx0: int, opcode_col: str,
                 batch_in_order: bool = False):
        self.batch, self.rows, self.idx0 = batch, rows, idx0
        self.n = batch.n if rows is None else len(rows)
        self.opcode = self.take(batch.cols[opcode_col]).astype(np.uint8, copy=False)
        self.flags = op.FLAGS.take(self.opcode)
        self.src, self.dst = address_words(batch, rows, "src"), address_words(batch, rows, "dst")
        qp = self.take(batch.cols["dest_qp"]).astype(np.uint32, copy=False)
        self.fid, self.flows_before = an.registry.lookup(self.src, self.dst, qp)
        self.n_flows = an.registry.n
        self.ts = self.take(batch.cols["ts_ns"]).astype(np.int64, copy=False)
        self.all_fid, self.copies = self.fid, None
        if an.copies is not None:
            self._drop_copies(an.copies.find(self, an.registry))
        self._group()
        self._inverse = self._sid_rows = None
        self._ts_in_order = True if batch_in_order else None    # rows of an in-order batch are too

    # ---- columns ------------------------------------------------------------------------------
    def take(self, column: np.ndarray) -> np.ndarray:
        """A batch column at the RoCE rows, capture order."""
        return column if self.rows is None else column.take(self.rows)

    def valid(self, name: str) -> np.ndarray | None:
        """Validity of a column at the RoCE rows; None when valid on every row."""
        v = self.batch.valid.get(name)
        if v is None:
            return None
        v = self.take(v)
        return None if v.all() else v

    def values(self, name: str, fill=0) -> np.ndarray:
        """A column at the RoCE rows (raw dtype), `fill` where absent or invalid."""
        if name not in self.batch.cols:
            return np.full(self.n, fill, dtype=np.int64)
        v, ok = self.take(self.batch.cols[name]), self.valid(name)
        return v if ok is None else np.where(ok, v, fill)

    def values_at(self, name: str, r: np.ndarray, dtype=np.int64, fill=0) -> np.ndarray:
        """A column at RoCE rows `r` as `dtype`, `fill` where absent or invalid."""
        if name not in self.batch.cols:
            return np.full(len(r), fill, dtype=dtype)
        b = self.batch_rows(r)
        v = self.batch.cols[name].take(b).astype(dtype)
        ok = self.batch.valid.get(name)
        if ok is not None:
            v[~ok.take(b)] = fill
        return v

    def ts_in_order(self) -> bool:
        """Timestamps never decrease over the RoCE rows (the usual capture)."""
        if self._ts_in_order is None:
            ts = self.ts
            self._ts_in_order = bool(len(ts) < 2 or (ts[1:] >= ts[:-1]).all())
        return self._ts_in_order

    def batch_rows(self, r: np.ndarray) -> np.ndarray:
        return r if self.rows is None else self.rows.take(r)

    def idx(self, r: np.ndarray) -> np.ndarray:
        """Capture-wide row index of RoCE rows `r` (a partition's batches carry theirs: `_gidx`)."""
        at = self.batch.cols.get("_gidx")
        return self.batch_rows(r).astype(np.int64) + self.idx0 if at is None else at.take(self.batch_rows(r))

    def psn_at(self, r: np.ndarray) -> np.ndarray:
        return self.values_at("psn", r) & (PSN_MOD - 1)

    def _drop_copies(self, found) -> None:
        """Second captures of frames already seen (copies.py) leave the rows analyzed; `copies`
        keeps (position, time, row index, flow, PSN, how much later, the frame repeated) of each."""
        at, later, original = found
        if len(at) == 0:
            return
        self.copies = (at, self.ts[at], self.idx(at), self.fid[at], self.psn_at(at), later, original)
        keep = np.ones(self.n, dtype=bool)
        keep[at] = False
        self.rows = np.flatnonzero(keep) if self.rows is None else self.rows[keep]
        self.n = len(self.rows)
        self.opcode, self.flags, self.src, self.dst, self.fid, self.ts = (
            a[keep] for a in (self.opcode, self.flags, self.src, self.dst, self.fid, self.ts))

    # ---- grouping ------------------------------------------------------------------------------
    def _group(self) -> None:
        n2 = 2 * self.n_flows
        if "psn" in self.batch.cols:
            in_psn = (self.flags & (op.F_REQUEST_SPACE | op.F_RESPONSE_SPACE)) != 0
            ok = self.valid("psn")
            if ok is not None:
                in_psn &= ok
        else:
            in_psn = np.zeros(self.n, dtype=bool)
        key = self.fid * 2
        key += (self.flags & op.F_RESPONSE_SPACE) != 0
        self.in_psn, self.in_psn_all = in_psn, bool(in_psn.all())
        if not self.in_psn_all:
            key = np.where(in_psn, key, self.fid + n2)
        counts = np.bincount(key, minlength=3 * self.n_flows)
        self.space_rows = counts[:n2].reshape(-1, 2)      # per flow: request, response space rows
        self.flow_rows = self.space_rows.sum(axis=1) + counts[n2:]
        self.order = _stable_order(key, 3 * self.n_flows, counts)
        sp = counts[:n2]
        self.sids = np.flatnonzero(sp)                   # PSN part: one group per space
        self.lengths = sp[self.sids]
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.n_psn = int(self.lengths.sum())
        self.ns_flows = np.flatnonzero(counts[n2:])       # the rest: one group per flow
        self.ns_lengths = counts[n2:][self.ns_flows]

    def sorted_r(self, s: np.ndarray | slice) -> np.ndarray:
        """RoCE rows at grouped positions `s`."""
        if isinstance(s, slice):
            return np.arange(self.n, dtype=np.int64)[s] if self.order is None else self.order[s]
        return s if self.order is None else self.order.take(s)

    def sorted_of(self, r: np.ndarray) -> np.ndarray:
        """Grouped positions of RoCE rows `r` (an inverse permutation, built on first use)."""
        if self.order is None:
            return r
        if self._inverse is None:
            self._inverse = np.empty(self.n, dtype=np.int64)
            self._inverse[self.order] = np.arange(self.n, dtype=np.int64)
        return self._inverse.take(r)

    def psn_part(self, column: np.ndarray) -> np.ndarray:
        """A capture-order array (length n) in grouped order, PSN part only."""
        if self.order is None:
            return column[: self.n_psn]
        return column.take(self.order[: self.n_psn])

    def sid_rows(self) -> np.ndarray:
        """Space id of every row of the PSN part."""
        if self._sid_rows is None:
            self._sid_rows = np.repeat(self.sids, self.lengths)
        return self._sid_rows

    def group_at(self, s: np.ndarray) -> np.ndarray:
        """Group index of PSN-part rows `s` (few rows: no per-row array)."""
        return group_of(self.starts, s)

    def sorted_fid(self) -> np.ndarray:
        return self.fid if self.order is None else self.fid.take(self.order)

    def groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, length, flow) of every group, PSN part then the rest, in grouped order."""
        ns_starts = self.n_psn + np.cumsum(self.ns_lengths) - self.ns_lengths
        return (np.concatenate([self.starts, ns_starts]),
                np.concatenate([self.lengths, self.ns_lengths]),
                np.concatenate([self.sids >> 1, self.ns_flows]))


def _stable_order(key: np.ndarray, n_keys: int, counts: np.ndarray) -> np.ndarray | None:
    """Stable sort permutation of `key` (values < n_keys, counts = its bincount); None when
    already in order. The C kernels' counting sort, else numpy's: it sorts 16-bit keys by radix
    (linear); wider keys take two 16-bit radix passes (LSD)."""
    head = key[:64]             # interleaved flows show it at once: no full pass to find out
    if len(key) < 2 or ((head[1:] >= head[:-1]).all() and (key[1:] >= key[:-1]).all()):
        return None
    if kernels.stable_order is not None:
        return kernels.stable_order(np.ascontiguousarray(key, dtype=np.int64), counts.astype(np.int64, copy=False))
    if n_keys <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    if n_keys <= 1 << 32:
        low = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
        high = np.argsort((key.take(low) >> 16).astype(np.uint16), kind="stable")
        return low.take(high)
    return np.argsort(key, kind="stable")
