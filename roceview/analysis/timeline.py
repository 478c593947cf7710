"""Per time bucket and flow: bytes, Gb/s, CE marks, CNPs, retransmitted packets.

Buckets are aligned on multiples of the bucket length since the Unix epoch. Each chunk is reduced
to (bucket, flow) sums at once; the sums are merged at the end (rows grow with duration x flows,
not with packets).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import TIMELINE_COLUMNS, Coded, Table

FIELDS = ("bytes", "ecn_ce", "cnp_packets", "retransmitted_packets")     # summed; gbps from bytes
MAX_ROWS = 2_000_000     # a long capture with many flows would otherwise outgrow memory
GRID_CELLS_A_ROW = 4     # grid_places' grid at most this many cells a row (else the rows are sorted)


class Rows:
    """A 0/1 value given by the rows where it is 1 (cheaper than a weight per row when few are)."""

    def __init__(self, positions: np.ndarray):
        self.positions = positions


def _sums(key: np.ndarray, value, size: int) -> np.ndarray:
    if value is None:
        return np.zeros(size, dtype=np.int64)
    if isinstance(value, Rows):
        return np.bincount(key[value.positions], minlength=size)
    return np.bincount(key, value, minlength=size)


def _present(key: np.ndarray, weights, weight_sums: np.ndarray, size: int) -> np.ndarray:
    """(bucket, flow) keys with rows: where the byte sum is positive when every row weighs > 0."""
    if isinstance(weights, np.ndarray) and len(weights) and weights.min() > 0:
        return weight_sums > 0
    return np.bincount(key, minlength=size) > 0


def _by_bucket_and_flow(bucket: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """The order by (bucket, flow). Each part is already in that order and the parts follow
    each other in time, so one stable sort of a combined key meets a few long sorted runs
    (timsort merges them): about 4x as fast as lexsort (docs/performance.md)."""
    if not len(bucket):
        return np.zeros(0, dtype=np.int64)
    lo, span, flows = int(bucket.min()), int(bucket.max()) - int(bucket.min()) + 1, int(flow.max()) + 1
    if span * flows >= 1 << 62:
        return np.lexsort((flow, bucket))
    key = bucket - lo          # (bucket - lo) * flows + flow, in place: 2 M rows are 16 MB a copy
    key *= flows
    key += flow
    return np.argsort(key, kind="stable")


def _joined(columns: list, i: int) -> np.ndarray:
    """Column i of every part as one array; the parts' arrays are let go."""
    joined, columns[i] = np.concatenate(columns[i]), None
    return joined


def sorted_sums(bucket: np.ndarray, flow: np.ndarray, columns: list) -> tuple[np.ndarray, ...]:
    """Timeline._merged's rows by sorting them (a grid much larger than the rows: flows active
    at different times of a long capture)."""
    order = _by_bucket_and_flow(bucket, flow)
    bucket, flow = bucket[order], flow[order]
    new = np.ones(len(bucket), dtype=bool)
    new[1:] = (bucket[1:] != bucket[:-1]) | (flow[1:] != flow[:-1])
    starts = np.flatnonzero(new)
    sums = [np.add.reduceat(_joined(columns, i)[order], starts) for i in range(2, len(columns))]
    return (bucket[starts], flow[starts], *sums)


def grid_cells(buckets: list[np.ndarray], flows: list[np.ndarray], rows: int) -> tuple[int, int, int] | None:
    """Each row's cell of a (bucket, flow) grid, written over its bucket in place ((bucket -
    first) << bits of a flow | flow): (the grid's size, the first bucket, the bits), or None,
    the buckets untouched, where the grid would be much larger than the rows (flows active at
    different times of a long capture: the rows are sorted then)."""
    low, shift = min(int(b.min()) for b in buckets), max(int(f.max()) for f in flows).bit_length()
    size = (max(int(b.max()) for b in buckets) - low + 1) << shift
    if size > GRID_CELLS_A_ROW * rows + (1 << 16):
        return None
    for b, f in zip(buckets, flows):
        b -= low
        b <<= shift
        b |= f
    return size, low, shift


def cell_rows(at: np.ndarray, grid: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, flow) of cells `at` of a grid (grid_cells), the buckets written over `at`."""
    _, low, shift = grid
    flow = at & ((1 << shift) - 1)
    at >>= shift
    at += low
    return at, flow


def grid_places(cells: list[np.ndarray], size: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Rows placed in the order of their cells of a grid of `size` cells (`cells`: each set of
    rows' own) without a sort: (the cells with rows, in order; each row's place, the count of
    cells with rows before its own). Rows sharing a cell share a place."""
    present = np.zeros(size, bool)
    for c in cells:
        present[c] = True
    at = np.flatnonzero(present)
    index = np.cumsum(present, dtype=np.int32 if size < 1 << 31 else np.int64)
    index -= 1
    return at, [index[c] for c in cells]


def placed(places: list[np.ndarray], values: list[np.ndarray], n: int, distinct: bool = False) -> np.ndarray:
    """n sums of values at their places (grid_places): a copy where no two rows share a place.
    distinct: no two rows of one set share a place (a Timeline's parts, each of distinct
    (bucket, flow) rows), so a set adds in with one indexed add: np.add.at took 8x as long
    (docs/performance.md)."""
    out = np.zeros(n, np.result_type(*values))
    shared = n < sum(len(p) for p in places)
    for place, v in zip(places, values):
        if not v.any():                     # mostly: ECN marks, CNPs, retransmissions are rare
            continue
        if not shared:
            out[place] = v
        elif distinct:
            out[place] += v
        else:
            np.add.at(out, place, v)
    return out


def as_table(bucket: np.ndarray, flow: np.ndarray, sums: list[np.ndarray], flow_names: list[str],
             bucket_ns: int) -> Table:
    """The timeline table of (bucket, flow) rows and their sums of FIELDS (gbps from bytes):
    Timeline.table's, and the Dask client's merge of the partitions' (partition_merge)."""
    data = {"bucket_start": bucket * bucket_ns, "flow": Coded(flow, flow_names), **dict(zip(FIELDS, sums))}
    data["gbps"] = data["bytes"] * 8.0 / bucket_ns
    return Table(TIMELINE_COLUMNS, data)


def _can_merge(bucket: np.ndarray) -> bool:
    """Whether doubling the buckets merges any rows (`bucket`: in order, as _merged leaves it).
    Doubling merges a flow's rows only: once all rows share one bucket (more flows than
    max_rows // 2) it can merge no more and the flows keep a row each; nor once they are in
    buckets -1 and 0 (times either side of the epoch), which halving keeps apart for ever
    (else _bound would double them without end)."""
    first, last = int(bucket[0]), int(bucket[-1])
    return first != last and not (first == -1 and last == 0)


class Timeline:
    """Rows grow with duration x flows: past MAX_ROWS the buckets are merged into buckets twice
    as long (as often as needed), so memory stays bounded whatever the capture's length;
    `bucket_ns` then says the length actually used.

    `parts` (each fed chunk's distinct (bucket, flow) rows and sums, not yet merged) and `rows`
    (their count) are read by the Dask engine's RecordingTimeline to replay the doublings."""

    def __init__(self, bucket_ns: int, max_rows: int = MAX_ROWS):
        self.bucket_ns = self.requested_ns = int(bucket_ns)
        self.max_rows = max_rows
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.rows = 0

    def feed(self, ts: np.ndarray, flow: np.ndarray, values: dict, n_flows: int,
             in_order: bool = False) -> np.ndarray:
        """values per field: weights per row, `Rows` (1 at those rows, 0 elsewhere) or None (0);
        in_order: ts never decreases. Returns the chunk's sum of values["bytes"] per flow
        (float64, exact integers), so the caller's byte counter needs no pass of its own."""
        if len(ts) == 0:
            return np.zeros(n_flows)
        lo, hi = (int(ts[0]), int(ts[-1])) if in_order else (int(ts.min()), int(ts.max()))
        b0 = lo // self.bucket_ns
        width = hi // self.bucket_ns - b0 + 1
        if width * n_flows <= (1 << 22):
            key = self._bucket_index(ts, b0, width, in_order)
            key *= n_flows
            key += flow
            size = width * n_flows
            sums = [_sums(key, values[f], size) for f in FIELDS]
            keys = np.flatnonzero(_present(key, values["bytes"], sums[0], size))
            sums = [s[keys] for s in sums]
        else:
            uniq, inv = np.unique((ts // self.bucket_ns - b0) * n_flows + flow, return_inverse=True)
            keys = uniq
            sums = [_sums(inv.reshape(-1), values[f], len(uniq)) for f in FIELDS]
        flow_bytes = np.bincount(keys % n_flows, sums[0], minlength=n_flows)
        self.parts.append((keys // n_flows + b0, keys % n_flows,
                            *[np.rint(s).astype(np.int64) for s in sums]))
        self.rows += len(keys)
        if self.rows > self.max_rows:
            self._bound()
        return flow_bytes

    def _bucket_index(self, ts: np.ndarray, b0: int, width: int, in_order: bool) -> np.ndarray:
        """ts // bucket_ns - b0 per row; in time order from the bucket edges (no division)."""
        if not in_order:
            return ts // self.bucket_ns - b0
        edges = np.searchsorted(ts, (b0 + np.arange(1, width, dtype=np.int64)) * self.bucket_ns)
        counts = np.diff(edges, prepend=0, append=len(ts))
        return np.repeat(np.arange(width, dtype=np.int64), counts)

    def _merged(self, factor: int = 1) -> tuple[np.ndarray, ...]:
        """All parts as one: (bucket, flow) sums, buckets first divided by `factor`. Takes the
        parts (the caller puts the result back). The rows are placed part by part on a (bucket,
        flow) grid (grid_places), each column let go once placed. Concatenated first, the
        columns were copied once more, into pages new to the process, which cost almost half
        of a Dask step's time (docs/performance.md). Sorted only where the grid would be much
        larger than the rows."""
        columns = [list(c) for c in zip(*self.parts)]
        self.parts = []
        if factor != 1:
            columns[0] = [b // factor for b in columns[0]]
        rows = sum(len(b) for b in columns[0])
        grid = grid_cells(columns[0], columns[1], rows) if rows else None
        if grid is None:
            bucket, flow = _joined(columns, 0), _joined(columns, 1)
            return sorted_sums(bucket, flow, columns)
        columns[1] = None               # the bucket is the row's cell now
        at, places = grid_places(columns[0], grid[0])
        columns[0] = None
        sums = []
        for i in range(2, len(columns)):
            sums.append(placed(places, columns[i], len(at), distinct=factor == 1))
            columns[i] = None
        return (*cell_rows(at, grid), *sums)

    def _bound(self) -> None:
        self.parts = [self._merged()]          # (no other reference: _merged lets each go)
        while len(self.parts[0][0]) > self.max_rows // 2 and _can_merge(self.parts[0][0]):
            self.bucket_ns *= 2
            self.parts = [self._merged(2)]
        self.rows = len(self.parts[0][0])

    def table(self, flow_names: list[str]) -> Table:
        if not self.parts:
            return Table.empty(TIMELINE_COLUMNS)
        merged = self._merged()
        self.parts = [merged]     # the same sums, held once (rows unchanged: _bound as before)
        bucket, flow, *sums = merged
        return as_table(bucket, flow, sums, flow_names, self.bucket_ns)
