"""The operations' direct completion matching in C (_opsmatch.c) gives the numpy path's answers
(analysis/ops_direct.match_numpy) and both give a brute-force search's: per operation of a
paired space (rows and PSNs rising), its expiry, the first covering response after it, whether it
completes before its expiry, whether it is final. Random seeded cases (ROCEVIEW_FUZZ_EXAMPLES
sets how many; 300 here, a longer local run 20000): spaces in any order, responses of other
spaces between, re-reads (acknowledged PSNs going back), equal rows of responses, none at all.
A space whose rows or PSNs do not rise is refused by the C kernel (numpy answers).
ROCEVIEW_REQUIRE_CKERNEL=1 makes a missing C build a failure instead of a skip."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from test_flow_index import c_kernels  # noqa: F401 - the fixture

from roceview.analysis import ops_direct
from roceview.analysis.ops_match import LINGER_NS
from roceview.analysis.ops_set import INF
from roceview.kernels import backend as kernels

TRIALS = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "300"))


@pytest.fixture(scope="module")
def c_kernel(c_kernels):  # noqa: F811 - the imported fixture
    """The C matching (the extension's functions are built together: the flow index's fixture
    skips or fails as ROCEVIEW_REQUIRE_CKERNEL says)."""
    return c_kernels.ops_direct


class Resp:
    """ops_match.Responses' columns: grouped by sid ascending, rows rising inside a space."""

    def __init__(self, sid, cov, idx, ts):
        order = np.lexsort((idx, sid))
        self.sid, self.cov, self.idx, self.ts = (np.asarray(a, np.int64)[order] for a in (sid, cov, idx, ts))
        self.p = self.cov

    def __len__(self):
        return len(self.sid)


def random_case(rng: random.Random):
    """(responses, operations' sid, u, idx, pending, now): operations grouped by space in any
    space order, rows and PSNs rising within one; every packet on a row of its own."""
    spaces = rng.sample(range(0, 40, 2), rng.randint(1, 6))
    answered = spaces + rng.sample(range(0, 40, 2), 2)             # and spaces without operations here
    n_ops = [rng.randint(1, 30) for _ in spaces]
    n_resp = [rng.randint(0, 25) for _ in answered]
    pool = iter(rng.sample(range(3000), sum(n_ops) + sum(n_resp)))
    sid, u, idx = [], [], []
    for s, n in zip(spaces, n_ops):
        psn = rng.randint(0, 50)
        for row in sorted(next(pool) for _ in range(n)):
            psn += rng.choice((0, 1, 1, 1, 2, 5))
            sid.append(s), u.append(psn), idx.append(row)
    r_sid, r_cov, r_idx = [], [], []
    for s, n in zip(answered, n_resp):
        top = rng.randint(0, 60)
        for row in sorted(next(pool) for _ in range(n)):
            top += rng.choice((-7, -1, 0, 1, 2, 3, 8))          # re-reads: acknowledged PSNs go back
            r_sid.append(s), r_cov.append(top), r_idx.append(row)
    resp = Resp(r_sid, r_cov, r_idx, [i * 250 + rng.randint(0, 100) for i in r_idx])
    pending = rng.choice((0, 1, 2, 5, 1024))
    now = rng.randint(0, 3000) * 250 + rng.choice((0, LINGER_NS))
    return resp, *(np.array(a, np.int64) for a in (sid, u, idx)), pending, now


def brute(resp, sid, u, idx, pending, now):
    n = len(sid)
    expire, cidx, cts, final = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    for j in range(n):
        group = [i for i in range(n) if sid[i] == sid[j]]
        k = group.index(j) + pending + 1
        expire[j] = idx[group[k]] if k < len(group) else INF
        p = next((p for p in range(len(resp)) if resp.sid[p] == sid[j] and resp.idx[p] > idx[j]
                  and resp.cov[p] >= u[j]), None)
        done = p is not None and resp.idx[p] < expire[j]
        cidx[j], cts[j] = (resp.idx[p], resp.ts[p]) if done else (-1, 0)
        final[j] = expire[j] < INF or (done and cts[j] + LINGER_NS < now)
    return expire, cidx, cts, final


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_c_equals_numpy_equals_brute_force(c_kernel):
    rng = random.Random(20261206)
    for _ in range(TRIALS):
        resp, sid, u, idx, pending, now = random_case(rng)
        want = brute(resp, sid, u, idx, pending, now)
        assert same(ops_direct.match_numpy(resp, sid, u, idx, pending, now), want)
        got = c_kernel(sid, u, idx, resp.sid, resp.cov, resp.idx, resp.ts, pending, now, LINGER_NS, INF)
        assert got is not None and same(got, want), (sid, u, idx, resp.sid, resp.cov, resp.idx, pending, now)
        assert same(ops_direct.match(resp, sid, u, idx, pending, now), want)


def test_a_space_whose_psns_go_back_is_left_to_numpy(c_kernel):
    resp = Resp([4, 4], [3, 9], [5, 9], [50, 90])
    sid, u, idx = (np.array(a, np.int64) for a in ([4, 4, 4], [2, 8, 3], [1, 2, 3]))
    assert c_kernel(sid, u, idx, resp.sid, resp.cov, resp.idx, resp.ts, 1024, 0, LINGER_NS, INF) is None
    assert same(ops_direct.match(resp, sid, u, idx, 1024, 0), brute(resp, sid, u, idx, 1024, 0))


def test_no_responses_and_no_operations(c_kernel):
    empty = Resp([], [], [], [])
    sid, u, idx = (np.array(a, np.int64) for a in ([2, 2], [1, 2], [7, 8]))
    want = brute(empty, sid, u, idx, 0, 10)
    assert same(c_kernel(sid, u, idx, empty.sid, empty.cov, empty.idx, empty.ts, 0, 10, LINGER_NS, INF), want)
    assert same(ops_direct.match_numpy(empty, sid, u, idx, 0, 10), want)
    none = np.zeros(0, np.int64)
    assert all(len(a) == 0 for a in c_kernel(none, none, none, empty.sid, empty.cov, empty.idx, empty.ts, 0, 0,
                                             LINGER_NS, INF))


def stats_tables(stats) -> list:
    """Every sparse sum of an OpStats, folded: (keys, values) per table."""
    return [(s.result()[0].tolist(), {k: v.tolist() for k, v in s.result()[1].items()})
            for s in (stats.ops, stats.latency, stats.sizes)]


def test_op_sums_in_c_equal_the_numpy_passes(c_kernel, monkeypatch):
    """OpStats.add through the C kernel (_opsmatch.c rv_op_sums) and through numpy: the same
    per-QP sums, latency and size histograms; keys near and far apart (densely numbered),
    latencies from 0 to 2^62, sizes on and between the edges, none completed."""
    from roceview.analysis.ops_stats import SIZE_EDGES, OpStats

    rng = np.random.default_rng(20261206)
    batches = []
    for trial in range(max(TRIALS // 10, 5)):
        n = int(rng.integers(1, 3000))
        flow = rng.integers(0, 40, n) * (1 if trial % 3 else 100_000)
        kind = rng.integers(0, 8, n)
        nbytes = np.where(rng.random(n) < 0.3, rng.choice(SIZE_EDGES, n) + rng.integers(-1, 2, n),
                          rng.integers(0, 1 << 22, n))
        latency = np.where(rng.random(n) < 0.3, -1, rng.integers(0, 1 << rng.integers(1, 63), n))
        if trial % 7 == 0:
            latency[:] = -1
        batches.append((flow, kind, nbytes, rng.random(n) < 0.1, latency))
    with_c = OpStats()
    for b in batches:
        with_c.add(*b)
    monkeypatch.setattr(kernels, "op_sums", None)
    with_numpy = OpStats()
    for b in batches:
        with_numpy.add(*b)
    assert stats_tables(with_c) == stats_tables(with_numpy)
