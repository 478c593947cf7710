"""op_stats from its bounded structures: the latency percentiles are within 0.2 % of the exact
nearest-rank sample (never above the exact maximum), counts, bytes and the size histogram exact,
whatever order and grouping the operations come in. Seeded random trials
(ROCEVIEW_FUZZ_EXAMPLES, default 40; a longer local run: 2000)."""
from __future__ import annotations

import math
import os
import random

import numpy as np

from roceview.analysis.ops_classes import N_OPS
from roceview.analysis.ops_stats import (
    SIZE_EDGES,
    OpStats,
    bucket_middle,
    latency_bucket,
)

TRIALS = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "40"))


def exact_rank(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(len(ordered) * p / 100.0), 1) - 1]


def trial(rng: random.Random) -> None:
    n_flows = rng.randint(1, 6)
    n = rng.randint(1, 400)
    flow = [rng.randrange(n_flows) for _ in range(n)]
    kind = [rng.randrange(N_OPS) for _ in range(n)]
    scale = rng.choice((1, 100, 10_000, 10_000_000, 1 << 40))
    latency = [rng.randrange(scale * 3) if rng.random() > 0.2 else -1 for _ in range(n)]
    nbytes = [rng.choice((0, 8, 64, 65, 4096, 4097, 1 << 20, (1 << 20) + 1, rng.randrange(1 << 24))) for _ in range(n)]
    st = OpStats()
    cuts = sorted({0, n, *(rng.randrange(n + 1) for _ in range(rng.randint(0, 8)))})
    for lo, hi in zip(cuts, cuts[1:]):                     # fed in parts, as operations become final
        st.add(np.array(flow[lo:hi], np.int64), np.array(kind[lo:hi], np.int64), np.array(nbytes[lo:hi], np.int64),
               np.zeros(len(flow[lo:hi]), bool), np.array(latency[lo:hi], np.int64))
    names = [f"f{i}" for i in range(n_flows)]
    table = st.table(names)
    d = table.data
    for i in range(len(table)):
        f, k = int(d["flow"][i][1:]), ["SEND", "SEND_IMM", "SEND_INV", "WRITE", "WRITE_IMM", "READ", "CMP_SWAP",
                                       "FETCH_ADD", "FLUSH", "ATOMIC_WRITE"].index(d["op"][i])
        rows = [j for j in range(n) if flow[j] == f and kind[j] == k]
        lat = [latency[j] for j in rows if latency[j] >= 0]
        assert int(d["operations"][i]) == len(rows) and int(d["completed"][i]) == len(lat)
        assert int(d["bytes"][i]) == sum(nbytes[j] for j in rows)
        sizes = np.bincount(np.searchsorted(SIZE_EDGES, [nbytes[j] for j in rows]), minlength=9)
        assert [int(d[c][i]) for c in table.columns[9:]] == sizes.tolist()
        if not lat:
            assert math.isnan(d["latency_p50_us"][i]) and math.isnan(d["latency_max_us"][i])
            continue
        assert round(d["latency_max_us"][i] * 1000) == max(lat)
        for p, col in ((50, "latency_p50_us"), (99, "latency_p99_us")):
            want, got = exact_rank(lat, p), round(d[col][i] * 1000)
            assert got <= max(lat) and abs(got - want) <= want / 512 + 1, (p, got, want)


def test_percentiles_counts_and_sizes_against_exact_values():
    rng = random.Random(20261207)
    for _ in range(TRIALS):
        trial(rng)


def test_buckets_are_exact_below_512_ns_and_at_most_1_in_256_wide_above():
    ns = np.array(sorted({0, 1, 511, 512, 513, 1023, 1024, 4095, 10**6, 10**9 + 7, (1 << 45) + 12345}), np.int64)
    b = latency_bucket(ns)
    assert (np.diff(latency_bucket(np.arange(0, 1 << 16))) >= 0).all()     # monotone
    mid = bucket_middle(b)
    assert (mid[ns < 512] == ns[ns < 512]).all()
    assert (np.abs(mid - ns) <= ns / 512 + 1).all()
