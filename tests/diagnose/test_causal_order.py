"""Findings in causal order: a finding that explains others comes before them and names them
(`explains`); advice names the priority the capture shows."""
from __future__ import annotations

from pathlib import Path

import pytest

import roceview
from roceview.diagnose.explain import order_by_cause
from roceview.render.report import flows_text

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))


def _record(kind, severity="warning", flows="", start=0, end=10):
    return {"kind": kind, "severity": severity, "flows": flows, "start_ts": start, "end_ts": end}


def test_a_wrong_pmtu_comes_before_the_loss_it_makes_and_names_it():
    result = roceview.analyze(str(REPO / "captures" / "pmtu-4096.pcap"), pmtu=1024)
    found = result.findings_table.records()
    assert found[0]["kind"] == "pmtu_mismatch", [f["kind"] for f in found]
    assert found[0]["explains"] == "psn_reuse;timeout_retransmit"
    assert all(f["explains"] == "" for f in found[1:])


def test_an_explainer_moves_before_the_first_it_explains_whatever_the_alphabet():
    loss = _record("capture_loss", flows="a")
    other = _record("ack_unsent_psn", flows="b")
    mtu = _record("pmtu_mismatch")
    assert [r["kind"] for r in order_by_cause([other, loss, mtu])] == ["ack_unsent_psn", "pmtu_mismatch", "capture_loss"]
    assert mtu["explains"] == "capture_loss" and loss["explains"] == other["explains"] == ""


def test_an_incast_explains_only_the_congestion_of_its_own_flows():
    incast = _record("incast", flows="x;y")
    mine, theirs = _record("ecn_congestion", "critical", flows="y;z"), _record("ecn_congestion", flows="q")
    ordered = order_by_cause([mine, theirs, incast])
    assert [r["flows"] for r in ordered] == ["x;y", "y;z", "q"] and incast["explains"] == "ecn_congestion"


def test_a_storm_explains_pauses_only_in_its_own_time():
    storm = _record("pfc_storm", "critical", start=100, end=200)
    before, during = _record("pfc_pause", start=0, end=50), _record("slow_receiver", flows="f", start=150, end=300)
    order_by_cause([storm, before, during])
    assert storm["explains"] == "slow_receiver"


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_explained_kind_is_a_finding_listed_after_its_cause(sample):
    found = roceview.analyze(str(sample)).findings_table.records()
    for i, f in enumerate(found):
        for kind in filter(None, f["explains"].split(";")):
            assert kind in {g["kind"] for g in found[i + 1:]}, (f["kind"], kind)


def test_advice_names_the_priority_the_flows_were_seen_on():
    found = roceview.analyze(str(REPO / "captures" / "network-loss.pcap")).findings_table.records()
    advice = next(f["advice"] for f in found if f["kind"] == "network_loss")
    assert "rx_prio3_discards" in advice and "<p>" not in advice


def test_the_flows_line_names_a_few_and_counts_the_rest():
    assert flows_text("a;b") == "a, b"
    assert flows_text(";".join(f"f{k}" for k in range(32))) == "f0, f1, f2, f3, f4, f5 (+26 more)"
