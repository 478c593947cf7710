"""pfc_violation: frames a station sent on a paused priority later than IEEE 802.3 Annex 31B's
response bound (plus two frames in flight and the capture point's margin) are a critical
finding with those frames and their XOFFs; conformant stations, and captures whose pause times
the link speed makes doubtful, are not reported."""
from __future__ import annotations

from functools import lru_cache

import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import one
from roceview.diagnose import load_config
from roceview.diagnose.pfc_violation import response_bound_ns
from roceview.errors import BadInput
from roceview.generate import generate, write_capture

KIND = "pfc_violation"


@lru_cache(maxsize=None)
def _path(name: str, seed: int) -> str:
    import tempfile

    path = f"{tempfile.mkdtemp(prefix='pfc-violation-')}/{name}-{seed}.pcap"
    write_capture(generate(name, seed=seed), path)
    return path


@pytest.mark.parametrize("seed", [0, 1])
def test_a_nic_that_keeps_sending_while_paused_is_a_critical_finding(seed):
    truth = generate("pfc-violator", seed=seed).truth
    found = findings_of(_path("pfc-violator", seed))
    f = one(found, KIND)
    assert f["severity"] == "critical"
    late = {v["src"] for v in truth.pfc_violations}
    assert f["summary"].startswith(f"{late.pop()} kept sending on priority 3 while 0e:5c:00:00:ff:10 paused it")
    assert "394 pause_quanta (IEEE 802.3 Annex 31B.3.7, the 100 Gb/s row) = 2.017 us" in f["evidence"]
    assert "pause times at an assumed 100 Gb/s link" in f["evidence"]
    assert "rx_prio3_pause" in f["advice"] and "dcb pfc show dev" in f["advice"]
    # every flow named is a flow of the violating host; frames: the late ones and their XOFFs
    assert all(name.startswith("10.0.0.1>") for name in f["flows"].split(";"))
    assert f["frame_count"] >= len({(v["dest_qp"], v["psn"]) for v in truth.pfc_violations}) // 2


@pytest.mark.parametrize("name", ["hol-victim", "ecn-pfc-inverted", "pfc-storm", "slow-receiver", "pfc-without-ecn"])
def test_stations_that_obey_pauses_are_not_reported(name):
    found = findings_of(_path(name, 3))
    assert KIND not in kinds(found), show(found)


def test_a_margin_longer_than_the_late_frames_silences_it():
    path = _path("pfc-violator", 0)
    assert KIND in kinds(findings_of(path, load_config(pause_response_margin_us=0.0)))
    assert KIND not in kinds(findings_of(path, load_config(pause_response_margin_us=50.0)))


def test_doubtful_pause_times_are_not_judged(monkeypatch):
    """When link_speed_mismatch fires the pause times (and so the delays) are doubtful."""
    import roceview.diagnose.pfc_violation as rule

    path = _path("pfc-violator", 0)
    monkeypatch.setattr(rule, "link_speed_findings", lambda ctx: [{"kind": "link_speed_mismatch"}])
    found = findings_of(path)
    assert KIND not in kinds(found), show(found)


@pytest.mark.parametrize("gbps,row,ns", [(100.0, 100.0, 2017.28), (400.0, 100.0, 2017.28), (40.0, 40.0, 1510.4),
                                         (25.0, 10.0, 3788.8), (10.0, 10.0, 3788.8), (1.0, 1.0, 1024.0),
                                         (0.01, 0.1, 57600.0)])
def test_the_response_bound_takes_the_row_at_or_below_the_speed(gbps, row, ns):
    bound, speed, _ = response_bound_ns(gbps)
    assert speed == row and bound == pytest.approx(ns)


@pytest.mark.parametrize("value", [-1.0, float("inf")])
def test_a_bad_margin_is_a_one_line_refusal(value):
    with pytest.raises(BadInput) as err:
        load_config(pause_response_margin_us=value)
    assert "pause_response_margin_us" in str(err.value) and "\n" not in str(err.value)


def test_its_display_filter_is_the_kind_alone_so_the_xoffs_show_with_the_late_frames():
    """The late frames have queue pairs, the XOFFs that began their paused periods have none: a
    filter on the finding's QPs would hide the pauses it is about."""
    from roceview.diagnose.evidence_frames import finding_filter

    f = one(findings_of(_path("pfc-violator", 0)), KIND)
    assert finding_filter(f) == 'roceview.finding == "pfc_violation"'
