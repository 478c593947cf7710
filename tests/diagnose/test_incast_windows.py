"""The incast rule's busiest window per receiver, vectorised (diagnose/ecn.py _busiest_windows),
against its definition as a loop over the timeline rows (the code it replaced: 21 ms for the
32 k rows of a 1 M-packet capture, and it grows with duration x flows); and the diagnoser
context's per-host indexes against the scans of every flow they replaced."""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

import roceview
from roceview.diagnose import DEFAULTS
from roceview.diagnose.context import Context
from roceview.diagnose.ecn import _busiest_windows, _data_flows

from conftest import REAL, SAMPLES, capture_files


def _reference(ctx, tl, width, senders_of):
    active: dict = defaultdict(set)
    for start, name, nbytes in zip(np.asarray(tl["bucket_start"]).tolist(), tl["flow"],
                                   np.asarray(tl["bytes"]).tolist()):
        if nbytes and name in senders_of:
            active[(ctx.flow[name]["dst_ip"], start // width)].add(name)
    out = []
    for dst in sorted({d for d, _ in active}):
        windows = [(w, fl) for (d, w), fl in active.items() if d == dst]
        w, flows = max(windows, key=lambda x: len({senders_of[n] for n in x[1]}))
        out.append((dst, w, flows))
    return out


@pytest.mark.parametrize("path", capture_files(SAMPLES) + capture_files(REAL), ids=lambda p: p.name)
def test_same_windows_as_the_loop_on_every_capture(path):
    result = roceview.analyze(str(path), warn=lambda m: None)
    ctx = Context(result, DEFAULTS, result.facts)
    senders_of = {n: f["src_ip"] for n, f in _data_flows(ctx)}
    for width in (1_000_000, 250_000, 10_000_000, 10**12):
        assert _busiest_windows(ctx, ctx.timeline, width, senders_of) == _reference(ctx, ctx.timeline, width,
                                                                                   senders_of)


@pytest.mark.parametrize("seed", range(6))
def test_same_windows_as_the_loop_on_random_timelines(seed):
    """Ties between windows, hosts that both send and receive, flows that are not data flows,
    rows without bytes, negative bucket starts."""
    rng = np.random.default_rng(seed)
    hosts = [f"10.0.0.{i}" for i in range(6)]
    flows = {}
    for i in range(40):
        src, dst = rng.choice(6, size=2, replace=False)
        flows[f"f{i}"] = {"src_ip": hosts[src], "dst_ip": hosts[dst]}
    senders_of = {n: f["src_ip"] for n, f in flows.items() if int(n[1:]) % 5}      # every 5th: no data
    n = 3000
    tl = {"flow": [f"f{i}" for i in rng.integers(0, 40, n)],
          "bucket_start": (rng.integers(-20, 200, n) * 1_000_000).astype(np.int64),
          "bytes": np.where(rng.random(n) < 0.2, 0, rng.integers(1, 5000, n))}
    ctx = SimpleNamespace(flow=flows)
    for width in (1_000_000, 7_000_000, 50_000_000):
        assert _busiest_windows(ctx, tl, width, senders_of) == _reference(ctx, tl, width, senders_of)


@pytest.mark.parametrize("path", capture_files(SAMPLES) + capture_files(REAL), ids=lambda p: p.name)
def test_context_indexes_answer_as_scans_of_every_flow(path):
    """Context.flows_between / reverse_flows / cnps_from (built once: a scan per question was
    quadratic in the flows) against the scans they replaced."""
    result = roceview.analyze(str(path), warn=lambda m: None)
    ctx = Context(result, DEFAULTS, result.facts)
    flows = ctx.flow
    for name, f in flows.items():
        assert ctx.reverse_flows(name) == [n for n, g in flows.items()
                                           if g["src_ip"] == f["dst_ip"] and g["dst_ip"] == f["src_ip"]]
    hosts = {f["src_ip"] for f in flows.values()} | {f["dst_ip"] for f in flows.values()} | {"192.0.2.99"}
    for src in hosts:
        assert ctx.cnps_from(src) == sum(f["cnp_packets"] for f in flows.values() if f["src_ip"] == src)
        for dst in hosts:
            assert ctx.cnps_from(src, dst) == sum(f["cnp_packets"] for f in flows.values()
                                                  if f["src_ip"] == src and f["dst_ip"] == dst)
            assert ctx.flows_between(src, dst) == [n for n, f in flows.items()
                                                   if f["src_ip"] == src and f["dst_ip"] == dst]
    assert any(ctx.reverse_flows(n) for n in flows) or len(flows) < 2
