"""Patterns real fabrics produce every day, generated fresh at several seeds, and what the
diagnoser must say about each: severities and numbers, not only the kinds."""
from __future__ import annotations

import pytest

from roceview.api import analyze
from roceview.generate import generate, write_capture


def _found(tmp_path, scenario: str, seed: int) -> list[dict]:
    path = tmp_path / f"{scenario}-{seed}.pcap"
    write_capture(generate(scenario, seed=seed), path)
    return analyze([str(path)], warn=lambda m: None).findings.to_dict("records")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_healthy_dcqcn_is_ecn_congestion_at_info_and_nothing_else(tmp_path, seed):
    found = _found(tmp_path, "healthy-dcqcn", seed)
    assert [(f["severity"], f["kind"]) for f in found] == [("info", "ecn_congestion")], found
    assert "answered with" in found[0]["summary"] and "CNPs" in found[0]["summary"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_requester_that_ran_out_of_rnr_retries_is_critical(tmp_path, seed):
    (rnr,) = [f for f in _found(tmp_path, "rnr-exhausted", seed) if f["kind"] == "rnr"]
    assert rnr["severity"] == "critical"
    assert "gave up after 4 RNR NAKs on PSN" in rnr["summary"] and "error state" in rnr["summary"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pauses_on_another_lossless_priority_are_info_only(tmp_path, seed):
    found = _found(tmp_path, "pfc-other-priority", seed)
    assert [(f["severity"], f["kind"]) for f in found] == [("info", "pfc_pause")], found
    assert "paused priority 5" in found[0]["summary"] and "no RoCE data, ACK or CNP was seen on priority 5" in found[0]["evidence"]


@pytest.mark.parametrize("seed", [0, 1])
def test_priority_mismatch_rests_on_the_lldp_dcbx_tlv(tmp_path, seed):
    (pm,) = [f for f in _found(tmp_path, "priority-mismatch", seed) if f["kind"] == "priority_mismatch"]
    assert pm["severity"] == "warning" and "LLDP DCBX from" in pm["evidence"] and "enables PFC on [3]" in pm["evidence"]
    assert "--pfc 0,0,0,1,0,0,0,0" in pm["advice"]
