"""Per time bucket and flow: bytes, Gb/s, CE marks, CNPs, retransmitted packets.

Buckets are aligned on multiples of the bucket length since the Unix epoch. Each chunk is reduced
to (bucket, flow) sums at once; the sums are merged at the end (rows grow with duration x flows,
not with packets).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import TIMELINE_COLUMNS, Table

_FIELDS = ("bytes", "ecn_ce", "cnp_packets", "retransmitted_packets")
MAX_ROWS = 2_000_000     # a long capture with many flows would otherwise outgrow memory


class Timeline:
    """Rows grow with duration x flows: past MAX_ROWS the buckets are merged into buckets twice
    as long (as often as needed), so memory stays bounded whatever the capture's length;
    `bucket_ns` then says the length actually used."""

    def __init__(self, bucket_ns: int, max_rows: int = MAX_ROWS):
        self.bucket_ns = self.requested_ns = int(bucket_ns)
        self.max_rows = max_rows
        self._parts: list[tuple[np.ndarray, ...]] = []
        self._rows = 0

    def feed(self, ts: np.ndarray, flow: np.ndarray, values: dict[str, np.ndarray], n_flows: int) -> None:
        if len(ts) == 0:
            return
        bucket = ts // self.bucket_ns
        b0 = int(bucket.min())
        width = int(bucket.max()) - b0 + 1
        if width * n_flows <= (1 << 22):
            key = (bucket - b0) * n_flows + flow
            size = width * n_flows
            present = np.bincount(key, minlength=size) > 0
            keys = np.flatnonzero(present)
            sums = [np.bincount(key, values[f], minlength=size)[keys] for f in _FIELDS]
        else:
            uniq, inv = np.unique((bucket - b0) * n_flows + flow, return_inverse=True)
            keys = uniq
            sums = [np.bincount(inv.reshape(-1), values[f], minlength=len(uniq)) for f in _FIELDS]
        self._parts.append((keys // n_flows + b0, keys % n_flows,
                            *[np.rint(s).astype(np.int64) for s in sums]))
        self._rows += len(keys)
        if self._rows > self.max_rows:
            self._bound()

    def _merged(self, factor: int = 1) -> tuple[np.ndarray, ...]:
        """All parts as one: (bucket, flow) sums, buckets first divided by `factor`."""
        bucket, flow, *vals = (np.concatenate(c) for c in zip(*self._parts))
        bucket = bucket // factor
        order = np.lexsort((flow, bucket))
        bucket, flow, vals = bucket[order], flow[order], [v[order] for v in vals]
        new = np.ones(len(bucket), dtype=bool)
        new[1:] = (bucket[1:] != bucket[:-1]) | (flow[1:] != flow[:-1])
        starts = np.flatnonzero(new)
        return (bucket[starts], flow[starts], *[np.add.reduceat(v, starts) for v in vals])

    def _bound(self) -> None:
        merged = self._merged()
        while len(merged[0]) > self.max_rows // 2:
            self._parts, self.bucket_ns = [merged], self.bucket_ns * 2
            merged = self._merged(2)
        self._parts, self._rows = [merged], len(merged[0])

    def table(self, flow_names: list[str]) -> Table:
        if not self._parts:
            return Table.empty(TIMELINE_COLUMNS)
        bucket, flow, *sums = self._merged()
        data = {"bucket_start": bucket * self.bucket_ns,
                "flow": [flow_names[f] for f in flow.tolist()]}
        data.update(zip(_FIELDS, sums))
        data["gbps"] = data["bytes"] * 8.0 / self.bucket_ns
        return Table(TIMELINE_COLUMNS, data)
