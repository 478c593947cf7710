"""Per time bucket and flow: bytes, Gb/s, CE marks, CNPs, retransmitted packets.

Buckets are aligned on multiples of the bucket length since the Unix epoch. Each chunk is reduced
to (bucket, flow) sums at once; the sums are merged at the end (rows grow with duration x flows,
not with packets).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import TIMELINE_COLUMNS, Table

_FIELDS = ("bytes", "ecn_ce", "cnp_packets", "retransmitted_packets")


class Timeline:
    def __init__(self, bucket_ns: int):
        self.bucket_ns = int(bucket_ns)
        self._parts: list[tuple[np.ndarray, ...]] = []

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

    def table(self, flow_names: list[str]) -> Table:
        if not self._parts:
            return Table.empty(TIMELINE_COLUMNS)
        bucket, flow, *vals = (np.concatenate(c) for c in zip(*self._parts))
        order = np.lexsort((flow, bucket))
        bucket, flow, vals = bucket[order], flow[order], [v[order] for v in vals]
        new = np.ones(len(bucket), dtype=bool)
        new[1:] = (bucket[1:] != bucket[:-1]) | (flow[1:] != flow[:-1])
        starts = np.flatnonzero(new)
        sums = [np.add.reduceat(v, starts) for v in vals]
        data = {"bucket_start": bucket[starts] * self.bucket_ns,
                "flow": [flow_names[f] for f in flow[starts].tolist()]}
        data.update(zip(_FIELDS, sums))
        data["gbps"] = data["bytes"] * 8.0 / self.bucket_ns
        return Table(TIMELINE_COLUMNS, data)
