"""Every generator scenario: the diagnoser reports the fault's kinds and none of the forbidden
ones (lists from roceview.generate.SCENARIOS), on the committed sample and on fresh seeds; the
clean scenario has nothing at warning or above."""
from __future__ import annotations

import pytest

from helpers.diagnose import SEVERE, findings_of, kinds, show
from roceview.generate import SCENARIOS, generate, write_capture
from conftest import SAMPLES

NAMES = sorted(SCENARIOS)


def _check(name: str, findings) -> None:
    sc = SCENARIOS[name]
    found = kinds(findings)
    assert set(sc.expected) <= found, f"{name}: missing {set(sc.expected) - found}\n{show(findings)}"
    assert not found & set(sc.forbidden), f"{name}: forbidden {found & set(sc.forbidden)}\n{show(findings)}"
    if not sc.expected:
        assert not kinds(findings, SEVERE), f"{name}: clean capture has warnings\n{show(findings)}"


@pytest.mark.parametrize("name", NAMES)
def test_sample_capture_reports_expected_kinds_and_no_forbidden_ones(name):
    path = SAMPLES / f"{name}.pcap"
    if not path.exists():
        pytest.skip(f"no sample {path.name}")
    _check(name, findings_of(path))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_fresh_capture_reports_expected_kinds_and_no_forbidden_ones(name, seed, tmp_path):
    path = tmp_path / f"{name}-{seed}.pcapng"
    write_capture(generate(name, seed=seed), path)
    _check(name, findings_of(path))


@pytest.mark.parametrize("name", ["network-loss", "pfc-storm", "incast"])
def test_findings_do_not_depend_on_chunk_size(name, tmp_path):
    path = tmp_path / f"{name}.pcap"
    write_capture(generate(name, seed=4), path)
    whole = findings_of(path)
    assert findings_of(path, chunk=37) == whole


def test_network_loss_evidence_names_delays_and_go_back_n(tmp_path):
    sender, receiver = tmp_path / "s.pcap", tmp_path / "r.pcap"
    write_capture(generate("network-loss", seed=0), sender)
    write_capture(generate("network-loss-receiver-side", seed=0), receiver)
    (s,) = [f for f in findings_of(sender) if f["kind"] == "network_loss"]
    (r,) = [f for f in findings_of(receiver) if f["kind"] == "network_loss"]
    assert "NAK-to-retransmission delay" in s["evidence"] and "by go-back-N after the NAKs" in s["evidence"]
    assert "without a gap" in s["evidence"]
    assert "NAK generation delay" in r["evidence"] and "gap" in r["evidence"]
    assert s["severity"] == r["severity"] == "warning"  # everything was recovered


def test_pfc_storm_is_critical_and_names_the_watchdog(tmp_path):
    path = tmp_path / "storm.pcap"
    write_capture(generate("pfc-storm", seed=0), path)
    (storm,) = [f for f in findings_of(path) if f["kind"] == "pfc_storm"]
    assert storm["severity"] == "critical"
    assert "tx_pause_storm_error_events" in storm["advice"] and "watchdog" in storm["advice"]
    assert storm["end_ts"] - storm["start_ts"] >= 100_000_000


def test_api_analyze_fills_findings_through_the_diagnoser(tmp_path):
    import roceview.api

    path = tmp_path / "rnr.pcap"
    write_capture(generate("rnr", seed=0), path)
    result = roceview.api.analyze(str(path), warn=lambda m: None)
    assert "rnr" in set(result.findings["kind"])
    assert result.worst_severity() == "warning"
