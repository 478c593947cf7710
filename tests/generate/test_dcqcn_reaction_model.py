"""The generator's DCQCN reaction point: a cut lands its reaction delay after the CNP, an RP that
ignores CNPs keeps its rate, and the capture shows each sender's packets spaced as its rate
limiter paced them (the truth the congestion-control analysis is measured against)."""
from __future__ import annotations

import numpy as np
import pytest

import roceview
from roceview.generate import generate, write_capture
from roceview.generate.dcqcn import ReactionPoint
from roceview.generate.scenarios_cc import REACTION_NS, SLOW_REACTION_NS
from roceview.generate.simulator import PS_PER_US

CNP = 0x81


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    out = {}
    for name in ("dcqcn-reaction", "dcqcn-ignored", "dcqcn-slow", "cnp-excess"):
        cap = generate(name, seed=3)
        path = tmp_path_factory.mktemp("cc") / f"{name}.pcap"
        write_capture(cap, path)
        out[name] = (cap.truth, roceview.read_packets(str(path)))
    return out


def _requester_qpn(truth, ip: str) -> int:
    return next(q["requester_qpn"] for q in truth.qps if q["requester"] == ip)


def _rates(packets, src: str):
    """(ts, Gb/s) of each of the sender's data packets after the first: its wire bits (frame,
    FCS, preamble, inter-frame gap) over the time since the one before."""
    d = packets[(packets.src_ip == src) & (packets.opcode != CNP)]
    ts, bits = d.ts_ns.to_numpy(), (d.wire_len.to_numpy() + 24) * 8
    return ts[1:], bits[1:] / np.maximum(np.diff(ts), 1)


def test_a_reaction_point_cuts_its_delay_after_the_cnp_and_not_before():
    rp = ReactionPoint(line_gbps=100.0, reaction_ps=5 * PS_PER_US)
    outcome = rp.on_cnp(10 * PS_PER_US)
    assert outcome["cut_ps"] == 15 * PS_PER_US and outcome["rate_after_gbps"] == 50.0
    assert rp.rate(14 * PS_PER_US) == 100.0 and rp.rate(15 * PS_PER_US) == 50.0
    ignoring = ReactionPoint(line_gbps=100.0, reacts=False)
    assert ignoring.on_cnp(0)["cut_ps"] is None and ignoring.rate(1) == 100.0 and ignoring.cuts == 0


def test_cuts_waiting_at_once_each_land_at_their_time():
    """A reaction delay longer than the rate-reduce period: several cuts wait together; until
    the first lands the rate is the line rate, then each lands in turn, none below its own."""
    rp = ReactionPoint(line_gbps=100.0, reaction_ps=50 * PS_PER_US)
    outcomes = [rp.on_cnp(t * PS_PER_US) for t in (0, 5, 10)]
    assert [o["cut_ps"] for o in outcomes] == [50 * PS_PER_US, 55 * PS_PER_US, 60 * PS_PER_US]
    assert rp.rate(49 * PS_PER_US) == 100.0 and rp.rate(50 * PS_PER_US) == outcomes[0]["rate_after_gbps"]
    for o in outcomes:
        assert rp.rate(o["cut_ps"]) == pytest.approx(o["rate_after_gbps"])
        assert rp.rate(o["cut_ps"] + PS_PER_US) > o["rate_after_gbps"]      # recovering, never dipping


@pytest.mark.parametrize("name,delay_ns", [("dcqcn-reaction", REACTION_NS), ("dcqcn-slow", SLOW_REACTION_NS)])
def test_every_cut_lands_the_reaction_delay_after_its_cnp(captures, name, delay_ns):
    truth, _ = captures[name]
    cuts = [c for c in truth.cnps if c["cut"]]
    assert len(cuts) >= 4
    assert all(c["cut_ts_ns"] - c["ts_ns"] == delay_ns for c in cuts)
    assert all(c["rate_after_gbps"] < c["rate_before_gbps"] for c in cuts)


def test_a_reaction_point_that_ignores_cnps_keeps_its_line_rate(captures):
    truth, packets = captures["dcqcn-ignored"]
    deaf = _requester_qpn(truth, "10.0.0.1")
    mine = [c for c in truth.cnps if c["qpn"] == deaf]
    assert len(mine) >= 4 and not any(c["cut"] for c in mine)
    assert {c["rate_after_gbps"] for c in mine} == {100.0}
    assert any(c["cut"] for c in truth.cnps if c["qpn"] != deaf)
    ts, rate = _rates(packets, "10.0.0.1")
    assert np.median(rate) > 95         # paced at line rate all along (window stalls aside)


def test_the_capture_shows_each_cut_in_the_senders_spacing(captures):
    """After a cut of at least 20 %, the sender's packets leave slower than before the CNP. The
    mirror stamps a packet at the far end of the sender's link: those sent before the cut are
    seen up to one propagation delay (500 ns) after it."""
    truth, packets = captures["dcqcn-reaction"]
    seen = 0
    for ip in ("10.0.0.1", "10.0.0.2"):
        qpn = _requester_qpn(truth, ip)
        ts, rate = _rates(packets, ip)
        for c in truth.cnps:
            if c["qpn"] != qpn or not c["cut"] or c["rate_after_gbps"] > 0.8 * c["rate_before_gbps"]:
                continue
            after = rate[(ts > c["cut_ts_ns"] + 700) & (ts < c["cut_ts_ns"] + 3_000)]
            if len(after) >= 2:      # still sending right after the cut
                assert np.median(after) < 0.9 * c["rate_before_gbps"], c
                seen += 1
    assert seen >= 3


def test_cnps_come_no_closer_than_the_minimum_spacing_unless_the_np_allows_it(captures):
    def closest(name: str) -> int:
        _, packets = captures[name]
        cnps = packets[packets.opcode == CNP]
        return min(int(np.diff(g.ts_ns.to_numpy()).min(initial=10**9)) for _, g in cnps.groupby("dest_qp"))

    assert closest("dcqcn-reaction") >= 4_000 - 100          # one per QP per 4 us (capture jitter aside)
    assert closest("cnp-excess") < 1_000
