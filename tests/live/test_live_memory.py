"""Memory of an endless live capture: the analysis keeps every RTT sample for exact
percentiles (analyze); live bounds them with RttMatcher.keep_newest, each flow's newest kept."""
import numpy as np

from roceview.analysis.rtt import RttMatcher


def test_keep_newest_bounds_the_samples_and_keeps_each_flows_newest():
    rtt = RttMatcher()
    for chunk in range(10):                         # 10 chunks of 1,000 samples over 4 flows
        flow = np.repeat(np.arange(4), 250)
        rtt.sample_flow.append(flow)
        rtt.sample_ns.append(chunk * 1000 + np.tile(np.arange(250), 4))
    rtt.keep_newest(4000)
    flow, ns = np.concatenate(rtt.sample_flow), np.concatenate(rtt.sample_ns)
    assert len(flow) == 2000                          # limit // 2, shared by the 4 flows
    for f in range(4):
        assert sorted(ns[flow == f].tolist()) == [c * 1000 + i for c in (8, 9) for i in range(250)]


def test_keep_newest_leaves_fewer_samples_alone():
    rtt = RttMatcher()
    rtt.sample_flow.append(np.zeros(10, np.int64))
    rtt.sample_ns.append(np.arange(10))
    rtt.keep_newest(10)
    assert rtt.percentiles(1)[0][0] == 4              # nearest rank of 10 samples: the 5th
