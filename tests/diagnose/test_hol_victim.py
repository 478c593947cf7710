"""hol_victim: a flow a switch's pauses held while they were meant for another receiver's
congestion (head-of-line blocking) is a warning naming exactly those flows, with the time they
were paused, the throughput lost and the congested receiver; brief pauses, two congested
receivers, a fabric without congestion signals and pauses from a host NIC make no victim."""
from __future__ import annotations

import os
import random
import re
from functools import lru_cache

import numpy as np
import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import one
from roceview.diagnose import load_config
from roceview.diagnose.evidence_frames import finding_filter
from roceview.diagnose.pfc_victims import paused_within
from roceview.errors import BadInput
from roceview.generate import Capture, generate, write_capture
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth
from roceview.packets.names import flow_name

KIND = "hol_victim"
# seeded tries of the random tests (ROCEVIEW_FUZZ_EXAMPLES for a longer run)
TRIES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "100"))
SWITCH = "0e:5c:00:00:ff:10"            # the routed ToR's port toward 10.0.0.1, the held host
KIB = 1024


def _held(hold_ns: int, both_congested: bool, seed: int) -> Capture:
    """A routed ToR that marks ECN (Kmin 5 KB) but never pauses by itself; 10.0.0.1-4 write to
    10.0.0.5 (it sends CNPs), 10.0.0.1 also to 10.0.0.6: idle, or (both_congested) loaded by all
    four too. The switch pauses priority 3 toward 10.0.0.1 once, for hold_ns, 10 us into it all;
    the mirror is 10.0.0.1's link."""
    truth = Truth(scenario="held", seed=seed)
    sw = SwitchSettings(kmin_bytes=5_000, kmax_bytes=30_000, xoff_bytes=10_000_000, xon_bytes=0)
    net = Network(NetworkSettings(hosts=6, until_ms=50, switch=sw, routed=True), np.random.default_rng(seed), truth)
    for s in range(4):
        for target in ((4, 5) if both_congested else (4,)):
            net.connect(s, target, Workload([("WRITE", 32 * KIB)] * 6, qd=2, start_ns=5_000 + 100 * s))
    if not both_congested:
        net.connect(0, 5, Workload([("WRITE", 12 * KIB)] * 12, qd=1, gap_ns=1_000, start_ns=5_000))
    net.pause_cycles(0, 3, first_ns=15_000, period_ns=100_000, hold_ns=hold_ns, count=1)
    net.mirror_links([0])
    return Capture(*net.run(), truth)


@lru_cache(maxsize=None)
def _path(label: str, seed: int = 0) -> str:
    import tempfile

    path = f"{tempfile.mkdtemp(prefix='hol-victim-')}/{label}-{seed}.pcap"
    if label.startswith("held"):
        _, hold, both = label.split("-")
        cap = _held(int(hold), both == "both", seed)
    else:
        cap = generate(label, seed=seed)
    write_capture(cap, path)
    return path


def _victims(seed: int) -> dict[str, int]:
    """The generator's truth: each victim flow's name and the ns it was paused."""
    return {flow_name(v["src"], v["dst"], v["dest_qp"]): v["paused_ns"] for v in generate("hol-victim", seed=seed)
            .truth.victims}


@pytest.mark.parametrize("seed", [0, 1])
def test_a_flow_held_behind_another_receivers_incast_is_a_victim(seed):
    truth = _victims(seed)
    f = one(findings_of(_path("hol-victim", seed)), KIND)
    assert f["severity"] == "warning"
    assert set(f["flows"].split(";")) == set(truth), f["flows"]
    assert f["summary"].startswith(f"The switch {SWITCH} paused priority 3 for congestion toward 10.0.0.5 and held 1 flow")
    # the time paused inside the victim's span is the truth's, to the analysis's rounding
    (name, paused_ns), = truth.items()
    said = re.search(re.escape(name) + r" \(to 10\.0\.0\.6\): paused ([\d.]+) us of its", f["evidence"])
    assert said and abs(float(said.group(1)) * 1000 - paused_ns) <= 50, f["evidence"]
    assert "Gb/s while not paused" in f["evidence"] and "it could have sent in the paused time" in f["evidence"]
    assert "the same pauses held flows to 10.0.0.5 (" in f["evidence"] and "CNPs sent" in f["evidence"]
    for knob in ("ecnconfig", "dcb app add dev", "RDMA_OPTION_ID_TOS", "pfcwd start", "rx_prio3_pause_duration"):
        assert knob in f["advice"], knob


def test_its_frames_are_the_pauses_that_held_it_and_a_filter_on_the_kind_shows_them():
    import roceview

    path = _path("hol-victim", 0)
    result = roceview.analyze(path)
    f = one(result.findings_table.records(), KIND)
    e = result.events_table.data
    pauses = {fr for k, fr, fl in zip(e["kind"], e["frame"].tolist(), e["flow"])
              if k in ("pfc_pause", "pfc_resume") and fl == SWITCH}
    held = {fr for k, fr, fl in zip(e["kind"], e["frame"].tolist(), e["flow"])
            if k == "sent_while_paused" and fl in f["flows"].split(";")}
    listed = {int(x) for x in f["frames"].split(";")}
    assert pauses <= listed and listed <= pauses | held and f["frame_count"] == len(listed)
    # PFC frames carry no BTH: the filter names the kind alone, or it would hide the pauses
    assert finding_filter(f) == 'roceview.finding == "hol_victim"'


def test_pauses_long_enough_make_the_flow_to_the_idle_receiver_a_victim():
    f = one(findings_of(_path("held-15000-idle")), KIND)
    assert f["flows"].startswith("10.0.0.1>10.0.0.6:0x") and ";" not in f["flows"]
    assert "paused 15.000 us of its" in f["evidence"]


def test_a_brief_pause_under_working_congestion_control_makes_no_victim():
    found = findings_of(_path("held-2000-idle"))
    assert KIND not in kinds(found), show(found)


def test_pauses_while_both_receivers_are_congested_make_no_victim():
    found = findings_of(_path("held-15000-both"))
    assert KIND not in kinds(found), show(found)


def test_without_congestion_signals_nothing_says_whose_pauses_they_were():
    """pfc-violator: a routed ToR without ECN marking pauses the senders for two overloaded
    receivers; neither draws a CE mark or sends a CNP, no flow is called a victim."""
    found = findings_of(_path("pfc-violator"))
    assert KIND not in kinds(found), show(found)


def test_pauses_from_a_host_nic_hold_no_victim(monkeypatch):
    """A RoCE host's NIC pauses only what comes to it: taken for a host, the switch's port MAC
    makes no victim (hol-victim, where the rule fires when it is taken for a switch)."""
    from roceview.diagnose.context import Context
    from roceview.packets.names import mac_int

    as_host = {mac_int(SWITCH): {"10.0.0.5"}}
    monkeypatch.setattr(Context, "host_macs", lambda self: {**self._host_macs, **as_host})
    found = findings_of(_path("hol-victim", 0))
    assert KIND not in kinds(found), show(found)


@pytest.mark.parametrize("setting", [{"victim_paused_us": 20.0}, {"victim_paused_share": 0.5}])
def test_a_threshold_above_the_victims_pause_silences_it(setting):
    path = _path("held-15000-idle")
    assert KIND in kinds(findings_of(path, load_config(victim_paused_us=10.0, victim_paused_share=0.1)))
    assert KIND not in kinds(findings_of(path, load_config(**setting)))


@pytest.mark.parametrize("key,value", [("victim_paused_us", -1.0), ("victim_paused_us", float("nan")),
                                       ("victim_paused_share", 1.5), ("victim_paused_share", "half")])
def test_a_bad_victim_threshold_is_a_one_line_refusal(key, value):
    with pytest.raises(BadInput) as err:
        load_config(**{key: value})
    assert key in str(err.value) and "\n" not in str(err.value)


def test_the_paused_time_inside_a_span_counts_only_what_overlaps_it():
    per = np.array([[10, 20], [30, 40]], np.int64)
    lo = np.array([0, 15, 20, 41, 12, 35], np.int64)
    hi = np.array([100, 35, 30, 50, 13, 35], np.int64)
    assert paused_within(per, lo, hi).tolist() == [20, 10, 0, 0, 1, 0]
    assert paused_within(np.zeros((0, 2), np.int64), lo, hi).tolist() == [0] * 6


def _brute_paused(per: list, lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in per)


def test_random_periods_and_spans_give_the_paused_time_of_their_overlaps():
    rng = random.Random(33)
    for _ in range(TRIES):
        edges = sorted(rng.sample(range(0, 1000), 2 * rng.randint(0, 8)))
        per = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
        spans = [sorted(rng.choices(range(-50, 1050), k=2)) for _ in range(20)]
        got = paused_within(np.array(per, np.int64).reshape(-1, 2), np.array([a for a, _ in spans], np.int64),
                            np.array([b for _, b in spans], np.int64))
        assert got.tolist() == [_brute_paused(per, a, b) for a, b in spans], (per, spans)


@lru_cache(maxsize=None)
def _analysed(path: str):
    from roceview.analysis import Analyzer
    from roceview.diagnose import FactCollector
    from roceview.packets.read import iter_batches

    analyzer, facts = Analyzer(), FactCollector()
    for batch in iter_batches([path], warn=lambda m: None):
        analyzer.feed(batch)
        facts.feed(batch)
    return analyzer.finish(files=[path]), facts.finish()


def test_random_thresholds_name_the_victim_exactly_when_its_pause_meets_both():
    """The idle receiver's flow was paused 15 us of its active span: with any thresholds the
    finding names it alone when 15 us and its share reach them, and is absent otherwise."""
    from roceview.diagnose import find

    result, facts = _analysed(_path("held-15000-idle"))
    d = result.paused_flows_table.data
    i = next(i for i, name in enumerate(d["flow"]) if ">10.0.0.6:" in name)
    victim, span = d["flow"][i], int(d["last_ts"][i]) - int(d["first_ts"][i])
    rng = random.Random(34)
    for _ in range(max(10, TRIES // 5)):
        us, share = rng.uniform(0, 30), rng.uniform(0, 0.5)
        found = [f for f in find(result, load_config(victim_paused_us=us, victim_paused_share=share), facts)
                 if f["kind"] == KIND]
        expected = 15_000 >= us * 1000 and 15_000 >= share * span
        assert bool(found) == expected, (us, share, span, found)
        assert not found or found[0]["flows"] == victim
