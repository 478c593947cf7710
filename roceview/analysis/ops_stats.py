"""Per-QP statistics of the operations (`op_stats`, `read_depth`), from structures bounded by the
queue pairs, not the messages: every operation counts here, also past the ops table's row budget.

Per (flow, operation): operations, completed, retransmitted, bytes, the latency's maximum (exact)
and a latency histogram, log-linear: values below 512 ns each have a bucket of their own, above
that 256 buckets per power of two (a bucket is at most 1/256 of its values wide). Percentiles are
nearest-rank over the histogram, reported as the middle of the rank's bucket (never above the
maximum): within 0.2 % of the exact nearest-rank sample. A message-size histogram in powers of
four from 64 bytes. Per (flow, depth): the time the requester had that many RDMA READ / atomic
operations in flight (its READ depth), for `read_depth_limited`.

All are sparse sums keyed by integers, gathered in a buffer and folded (sorted, summed per key) only when the
buffer outgrows what it folds into, so the cost per operation stays constant.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.ops_classes import N_OPS, OP_NAMES
from roceview.analysis.tables import OP_STATS_COLUMNS, READ_DEPTH_COLUMNS, Table
from roceview.kernels import backend as kernels

SUB_BITS = 8                         # 2^8 buckets per power of two above EXACT_BELOW
EXACT_BELOW = 1 << (SUB_BITS + 1)    # 512 ns: a bucket per nanosecond
N_LAT = 64 << SUB_BITS               # buckets up to 2^63 ns
SIZE_EDGES = np.array([64, 256, 1024, 4096, 16384, 65536, 262144, 1048576], dtype=np.int64)
SIZE_COLUMNS = ("size_le_64", "size_le_256", "size_le_1k", "size_le_4k", "size_le_16k", "size_le_64k",
                "size_le_256k", "size_le_1m", "size_gt_1m")
# each bucket as the report and the TUI name it: at most the edge, the last above the last edge
SIZE_LABELS = ("<=64", "<=256", "<=1k", "<=4k", "<=16k", "<=64k", "<=256k", "<=1M", ">1M")
N_SIZES = len(SIZE_COLUMNS)
MAX_DEPTH = 256                      # depths above are counted as 256


_POWERS = np.int64(1) << np.arange(63, dtype=np.int64)


def latency_bucket(ns: np.ndarray) -> np.ndarray:
    """Histogram bucket of each latency (ns >= 0)."""
    ns = np.maximum(np.asarray(ns, dtype=np.int64), 0)
    bits = np.searchsorted(_POWERS, ns, side="right")       # bit length: a 6-step binary search
    shift = np.maximum(bits - (SUB_BITS + 1), 0)
    return (shift << SUB_BITS) + (ns >> shift)


def bucket_middle(bucket: np.ndarray) -> np.ndarray:
    """The middle of each bucket, a whole ns (the lower of two)."""
    bucket = np.asarray(bucket, dtype=np.int64)
    shift = np.maximum((bucket >> SUB_BITS) - 1, 0)
    low = (bucket - (shift << SUB_BITS)) << shift
    return (low + ((1 << shift) - 1) // 2).astype(np.float64)


def size_bucket(nbytes: np.ndarray) -> np.ndarray:
    """The SIZE_EDGES bucket of each size: the first edge at or above it (8 edges: a binary
    search is 3 steps, faster than any arithmetic on the values)."""
    return np.searchsorted(SIZE_EDGES, np.asarray(nbytes, dtype=np.int64), side="left")


class SparseSums:
    """Sums (and maxima) of int64 values keyed by int64 keys; memory bounded by distinct keys."""

    def __init__(self, sums: tuple = (), maxima: tuple = ()):
        self.sum_names, self.max_names = sums, maxima
        self.keys = np.zeros(0, dtype=np.int64)
        self.values = {n: np.zeros(0, dtype=np.int64) for n in sums + maxima}
        self._buf: list[tuple[np.ndarray, dict]] = []
        self._buffered = 0

    def add(self, keys: np.ndarray, **values) -> None:
        if len(keys) == 0:
            return
        self._buf.append((np.asarray(keys, dtype=np.int64), {n: np.asarray(values[n], dtype=np.int64)
                                                             for n in self.values}))
        self._buffered += len(keys)
        if self._buffered > max(len(self.keys), 1 << 16):
            self.fold()

    def fold(self) -> None:
        if not self._buf:
            return
        keys = np.concatenate([self.keys] + [k for k, _ in self._buf])
        cols = {n: np.concatenate([self.values[n]] + [v[n] for _, v in self._buf]) for n in self.values}
        self._buf, self._buffered = [], 0
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        self.keys = keys[first]
        for n in self.sum_names:
            self.values[n] = np.add.reduceat(cols[n][order], first) if len(first) else cols[n][:0]
        for n in self.max_names:
            self.values[n] = np.maximum.reduceat(cols[n][order], first) if len(first) else cols[n][:0]

    def drop(self, keep: np.ndarray) -> None:
        """Keep only the keys where `keep(keys)` is true (a withdrawn pairing's latencies)."""
        self.fold()
        m = keep(self.keys)
        self.keys = self.keys[m]
        self.values = {n: v[m] for n, v in self.values.items()}

    def result(self) -> tuple[np.ndarray, dict]:
        self.fold()
        return self.keys, self.values


def compact(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys, ascending; each key's index among them): by a bincount over the
    keys' range when that is small, else a sort (np.unique imports numpy.ma)."""
    lo, hi = int(keys.min()), int(keys.max())
    span = hi - lo + 1
    if span <= 4 * len(keys) + 4096:
        present = np.flatnonzero(np.bincount(keys - lo, minlength=span))
        index = np.zeros(span, dtype=np.int64)
        index[present] = np.arange(len(present))
        return present + lo, index[keys - lo]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]]
    inv = np.empty(len(keys), dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return ordered[new], inv


class OpStats:
    """The per-QP statistics, fed the operations as they become final."""

    def __init__(self):
        self.ops = SparseSums(("operations", "completed", "retransmitted_ops", "bytes"), ("latency_max",))
        self.latency = SparseSums(("n",))               # key: (flow * N_OPS + op) * N_LAT + bucket
        self.sizes = SparseSums(("n",))                 # key: (flow * N_OPS + op) * N_SIZES + bucket
        self.depth = SparseSums(("time_ns", "reads"))   # key: flow * (MAX_DEPTH + 1) + depth

    def add(self, flow, kind, nbytes, retransmitted, latency) -> None:
        """Final operations: latency < 0 where there is none. Summed per key here first (a
        chunk's operations fall on few flows), the sparse sums get a row per key."""
        if not len(flow):
            return
        key = np.asarray(flow, np.int64) * N_OPS + np.asarray(kind, np.int64)
        lo = int(key.min())
        span = int(key.max()) - lo + 1
        if span > 4 * len(key) + 4096:                     # keys far apart: numbered densely first
            keys, inv = compact(key)
            lo, span = 0, len(keys)
        else:
            keys, inv = None, key - lo
        name = (lambda dense: dense + lo) if keys is None else keys.__getitem__
        if kernels.op_sums is not None:
            self._add_c(inv, span, name, nbytes, retransmitted, latency)
        else:
            self._add_numpy(key, inv, span, name, nbytes, retransmitted, latency)

    def _add_c(self, inv, span, name, nbytes, retransmitted, latency) -> None:
        """add()'s sums in one pass of the C kernel (_opsmatch.c)."""
        count, completed, retrans, nb, top, sizes, lkey, lcount = kernels.op_sums(
            inv, span, np.ascontiguousarray(nbytes, np.int64), np.ascontiguousarray(retransmitted, np.bool_),
            np.ascontiguousarray(latency, np.int64), SIZE_EDGES, SUB_BITS, N_LAT)
        present = np.flatnonzero(count)
        self.ops.add(name(present), operations=count[present], completed=completed[present],
                     retransmitted_ops=retrans[present], bytes=nb[present], latency_max=top[present])
        sizes = sizes.reshape(-1)
        at = np.flatnonzero(sizes)
        self.sizes.add(name(at // N_SIZES) * N_SIZES + at % N_SIZES, n=sizes[at])
        if len(lkey):
            self.latency.add(name(lkey // N_LAT) * N_LAT + lkey % N_LAT, n=lcount)

    def _add_numpy(self, key, inv, span, name, nbytes, retransmitted, latency) -> None:
        """add()'s sums in numpy passes (without the C kernel)."""
        done = latency >= 0
        any_done = bool(done.any())
        counts = np.bincount(inv, minlength=span)
        present = np.flatnonzero(counts)
        zeros = np.zeros(len(present), np.int64)
        top = np.full(span, -1, dtype=np.int64)
        if any_done:
            np.maximum.at(top, inv[done], latency[done])
        flagged = lambda m: np.bincount(inv[m], minlength=span)[present] if m.any() else zeros
        self.ops.add(name(present), operations=counts[present],
                     completed=flagged(done) if any_done else zeros, retransmitted_ops=flagged(np.asarray(retransmitted)),
                     bytes=np.bincount(inv, np.asarray(nbytes, np.float64), minlength=span)[present].astype(np.int64),
                     latency_max=top[present])
        sizes = np.bincount(inv * N_SIZES + size_bucket(nbytes), minlength=span * N_SIZES)
        at = np.flatnonzero(sizes)
        group = at // N_SIZES
        self.sizes.add(name(group) * N_SIZES + at % N_SIZES, n=sizes[at])
        if any_done:                                        # (sorted: fewer passes than compact's)
            lkeys = np.sort(key[done] * N_LAT + latency_bucket(latency[done]))
            first = np.flatnonzero(np.r_[True, lkeys[1:] != lkeys[:-1]])
            self.latency.add(lkeys[first], n=np.diff(np.r_[first, len(lkeys)]))

    def add_grouped(self, flow: np.ndarray, starts: np.ndarray, kind: np.ndarray, nbytes: np.ndarray) -> None:
        """Final operations without completion nor resend, grouped by flow (`flow` per group,
        `starts` the groups' first rows), of one kind within each group: summed per group."""
        n = len(kind)
        lengths = np.diff(np.r_[starts, n])
        keys = flow * N_OPS + kind[starts]
        zeros = np.zeros(len(starts), np.int64)
        self.ops.add(keys, operations=lengths, completed=zeros, retransmitted_ops=zeros,
                     bytes=np.add.reduceat(nbytes, starts), latency_max=zeros - 1)
        gid = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
        sizes = np.bincount(gid * N_SIZES + size_bucket(nbytes), minlength=len(starts) * N_SIZES)
        at = np.flatnonzero(sizes)
        self.sizes.add(keys[at // N_SIZES] * N_SIZES + at % N_SIZES, n=sizes[at])

    def add_depth(self, flow, depth, time_ns, reads) -> None:
        self.depth.add(np.asarray(flow, np.int64) * (MAX_DEPTH + 1) + np.minimum(depth, MAX_DEPTH),
                       time_ns=time_ns, reads=reads)

    def forget(self, flows: np.ndarray) -> None:
        """Drop the latencies of these requester flows (their pairing was withdrawn)."""
        if len(flows):
            self.latency.drop(lambda k: ~np.isin(k // (N_OPS * N_LAT), flows))
            self.ops.fold()
            gone = np.isin(self.ops.keys // N_OPS, flows)
            self.ops.values["completed"][gone] = 0
            self.ops.values["latency_max"][gone] = -1

    def table(self, names: list[str]) -> Table:
        keys, v = self.ops.result()
        flow, kind = keys // N_OPS, keys % N_OPS
        order = np.lexsort((kind, flow))                # flows in qps.csv order, then the operation
        keys, flow, kind = keys[order], flow[order], kind[order]
        data = {"flow": [names[f] for f in flow.tolist()], "op": [OP_NAMES[k] for k in kind.tolist()]}
        for n in ("operations", "completed", "retransmitted_ops", "bytes"):
            data[n] = v[n][order]
        p50, p99 = self._percentiles(keys, v["completed"][order], (50, 99))
        top = v["latency_max"][order].astype(np.float64)
        data["latency_p50_us"] = np.minimum(p50, top) / 1000.0
        data["latency_p99_us"] = np.minimum(p99, top) / 1000.0
        data["latency_max_us"] = np.where(top >= 0, top, np.nan) / 1000.0
        skeys, sv = self.sizes.result()
        grid = np.zeros((len(keys), N_SIZES), dtype=np.int64)
        row = np.searchsorted(keys, skeys // N_SIZES)
        ok = row < len(keys)
        ok[ok] = keys[row[ok]] == skeys[ok] // N_SIZES
        grid[row[ok], skeys[ok] % N_SIZES] = sv["n"][ok]
        for i, name in enumerate(SIZE_COLUMNS):
            data[name] = grid[:, i]
        return Table(OP_STATS_COLUMNS, data)

    def _percentiles(self, keys: np.ndarray, completed: np.ndarray, pcts) -> list[np.ndarray]:
        """Nearest-rank percentiles per key (NaN without a completed operation), bucket middles."""
        out = [np.full(len(keys), np.nan) for _ in pcts]
        lkeys, lv = self.latency.result()
        if not len(lkeys):
            return out
        group = lkeys // N_LAT
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        cum = np.cumsum(lv["n"])
        before = np.r_[0, cum[starts[1:] - 1]] if len(starts) else cum[:0]
        total = np.add.reduceat(lv["n"], starts)
        row = np.searchsorted(keys, group[starts])
        for res, p in zip(out, pcts):
            rank = np.maximum(np.ceil(total * (p / 100.0)).astype(np.int64), 1)
            at = np.searchsorted(cum, before + rank, side="left")          # the rank's bucket
            res[row] = bucket_middle(lkeys[at] % N_LAT)
        return out

    def depth_table(self, names: list[str]) -> Table:
        keys, v = self.depth.result()
        flow, depth = keys // (MAX_DEPTH + 1), keys % (MAX_DEPTH + 1)
        return Table(READ_DEPTH_COLUMNS, {"flow": [names[f] for f in flow.tolist()], "depth": depth,
                                          "time_ns": v["time_ns"], "reads": v["reads"]})
