"""pfc_before_ecn: a switch that pauses a priority before ECN marks its traffic (XOFF below Kmin)
is reported, with the XOFFs before the first CE evidence and that evidence as its frames; a switch
that marks first, and every generator scenario with pauses, is not."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import SWITCH_MAC, Cap, one
from roceview.analysis import Analyzer
from roceview.diagnose import FactCollector, find, load_config
from roceview.errors import BadInput
from roceview.generate import Capture, generate, write_capture
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth
from roceview.packets.read import iter_batches

KIND = "pfc_before_ecn"
INVERTED = SwitchSettings(kmin_bytes=45_000, kmax_bytes=300_000, pmax=0.05, xoff_bytes=8_000, xon_bytes=4_000)
ORDERED = SwitchSettings(kmin_bytes=5_000, kmax_bytes=20_000, xoff_bytes=40_000, xon_bytes=20_000)
PAUSING_SCENARIOS = ("incast", "pfc-storm", "pfc-pause-train", "slow-receiver", "pfc-without-ecn", "cnp-missing",
                     "priority-mismatch", "pfc-other-priority", "healthy-dcqcn", "dcqcn-reaction", "dcqcn-ignored")


def _incast(sw: SwitchSettings, seed: int, senders: int = 6, mirror: str = "sender", routed: bool = False) -> Capture:
    """`senders` hosts write 8 x 16 KB each to one receiver through a switch with `sw`; the
    mirror on the senders' links sees the switch's pauses and the CNPs coming back, no CE."""
    truth = Truth(scenario="incast-thresholds", seed=seed)
    settings = NetworkSettings(hosts=senders + 1, until_ms=50, switch=sw, routed=routed)
    net = Network(settings, np.random.default_rng(seed), truth)
    for s in range(senders):
        net.connect(s, senders, Workload([("WRITE", 16_000)] * 8, qd=4, start_ns=int(net.rng.integers(0, 300))))
    net.mirror_links(range(senders) if mirror == "sender" else [senders])
    return Capture(*net.run(), truth)


@lru_cache(maxsize=None)
def _path(label: str, seed: int, mirror: str = "sender", tmp=None) -> str:
    import tempfile

    folder = tempfile.mkdtemp(prefix="pfc-before-ecn-")
    path = f"{folder}/{label}-{seed}-{mirror}.pcap"
    write_capture(_incast(INVERTED if label == "inverted" else ORDERED, seed, mirror=mirror), path)
    return path


def _result(path):
    analyzer, facts = Analyzer(), FactCollector()
    for batch in iter_batches([str(path)], warn=lambda m: None):
        analyzer.feed(batch)
        facts.feed(batch)
    return analyzer.finish(files=[str(path)]), facts.finish()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_switch_pausing_before_it_marks_is_reported_with_its_xoffs_and_first_cnp(seed):
    found = findings_of(_path("inverted", seed))
    f = one(found, KIND)
    assert f["severity"] == "warning"
    assert "paused priority 3 before ECN marked" in f["summary"] and "before the first CE evidence" in f["summary"]
    assert "first XOFF from 0e:5c:00:00:ff:1" in f["evidence"] and "first CNP (10.0.0." in f["evidence"]
    assert "CNPs only" in f["evidence"] and "pause times at an assumed 100 Gb/s link" in f["evidence"]
    assert "rx_prio3_pause" in f["advice"] and "np_ecn_marked_roce_packets" in f["advice"]
    # the flow is the data flow the first CNP answers: a sender's flow into the receiver
    assert f["flows"].count(">10.0.0.7:0x") == len(f["flows"].split(";")) >= 1
    result, facts = _result(_path("inverted", seed))
    d = result.events_table.data
    kind, ts, frame = np.asarray(d["kind"], object), np.asarray(d["ts"]), np.asarray(d["frame"])
    xoff_ts, xoff_frames = ts[kind == "pfc_pause"], frame[kind == "pfc_pause"]
    cnp_at = np.flatnonzero(kind == "cnp")[np.argmin(ts[kind == "cnp"])]
    frames = [int(x) for x in f["frames"].split(";")]
    assert frames[0] == int(xoff_frames[np.argmin(xoff_ts)])   # the first XOFF
    assert int(frame[cnp_at]) in frames                        # the first CE evidence
    assert f["frame_count"] == int((xoff_ts < ts[cnp_at]).sum()) + 1   # every XOFF before it, and it


def test_a_routed_switch_whose_ports_each_send_one_receivers_replies_is_still_a_switch(tmp_path):
    """Routed, the mirror of each sender's link sees the receiver's ACKs and CNPs come from that
    link's switch port: one address from several MACs, none of them the receiver's NIC."""
    path = tmp_path / "routed.pcap"
    write_capture(_incast(INVERTED, 0, routed=True), path)
    found = findings_of(path)
    assert "paused priority 3 before ECN marked" in one(found, KIND)["summary"]
    assert not [f for f in found if f["kind"] == "pfc_pause" and "host NIC" in f["summary"]], show(found)


@pytest.mark.parametrize("mirror", ["sender", "receiver"])
def test_a_switch_that_marks_before_it_pauses_is_not_reported(mirror):
    found = findings_of(_path("ordered", 0, mirror))
    assert KIND not in kinds(found), show(found)
    if mirror == "sender":
        assert "pfc_pause" in kinds(found)      # it does pause: the rule had something to judge


@pytest.mark.parametrize("name", PAUSING_SCENARIOS)
def test_no_scenario_with_pauses_or_marks_is_reported(name, tmp_path):
    path = tmp_path / f"{name}.pcap"
    write_capture(generate(name, seed=5), path)
    found = findings_of(path)
    assert KIND not in kinds(found), show(found)


def test_a_lag_allowance_longer_than_the_inversion_silences_it():
    path = _path("inverted", 0)
    assert KIND in kinds(findings_of(path, load_config(ce_evidence_lag_us=10.0)))
    assert KIND not in kinds(findings_of(path, load_config(ce_evidence_lag_us=100.0)))


def test_episodes_not_wholly_covered_by_the_kept_events_are_not_judged():
    result, facts = _result(_path("inverted", 0))
    assert KIND in {f["kind"] for f in find(result, facts=facts)}
    result.summary["events_not_listed"] = {"cnp": 1}      # CNPs past the last kept one were dropped
    assert KIND not in {f["kind"] for f in find(result, facts=facts)}


def _episode_without_marks(gap_us: float = 100.0) -> Cap:
    """CE-marked writes answered by CNPs at first; 300 us later the switch pauses priority 3
    twice while the same flow sends ECT data that nobody marks."""
    c = Cap()
    for i in range(4):
        c.req(0, 1, i, ecn=3).ack(1, 0, i).cnp(1, 0)
    c.at(300_000)
    c.pfc(0xFFFF)
    for i in range(4, 8):
        c.req(0, 1, i).ack(1, 0, i)
    c.pfc(0).at(2_000).pfc(0xFFFF)
    for i in range(8, 12):
        c.req(0, 1, i).ack(1, 0, i)
    return c.pfc(0)


def test_pauses_with_no_ce_while_ecn_acts_elsewhere_are_reported(tmp_path):
    found = _episode_without_marks().findings(tmp_path)
    f = one(found, KIND)
    assert "with no CE evidence in that episode" in f["summary"]
    assert "no CE mark and no CNP on the priority while ECN-capable RoCE ran on it" in f["evidence"]
    assert f["frame_count"] == 2 and "pfc_without_ecn" not in kinds(found)     # the two XOFFs; no double report


def test_a_gap_shorter_than_the_pauses_apart_splits_them_into_two_episodes(tmp_path):
    found = _episode_without_marks().findings(tmp_path, load_config(congestion_gap_us=0.5))
    assert "in 2 congestion episodes" in one(found, KIND)["summary"]


def test_pauses_without_any_ce_in_the_capture_are_left_to_pfc_without_ecn(tmp_path):
    c = Cap()
    c.pfc(0xFFFF, mac=SWITCH_MAC)
    for i in range(6):
        c.req(0, 1, i).ack(1, 0, i)
    found = c.pfc(0).findings(tmp_path)
    assert "pfc_without_ecn" in kinds(found) and KIND not in kinds(found)


@pytest.mark.parametrize("key,value", [("congestion_gap_us", 0), ("congestion_gap_us", -1.0),
                                       ("ce_evidence_lag_us", -0.5), ("ce_evidence_lag_us", float("nan"))])
def test_bad_episode_settings_are_one_line_refusals(key, value):
    with pytest.raises(BadInput) as err:
        load_config(**{key: value})
    assert key in str(err.value) and "\n" not in str(err.value)
