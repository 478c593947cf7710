"""cnp_ignored and cnp_excess, from cc.csv: a sender whose DCQCN reaction point ignores CNPs is
named with the CNPs it ignored; the reacting senders, healthy DCQCN, incast and every sample stay
silent; CNP spacing is judged only against the minimum the user says their NICs run."""
from __future__ import annotations

from pathlib import Path

import pytest

import roceview
from roceview.diagnose import find, load_config
from roceview.generate import generate, write_capture

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))


def analyzed(tmp_path, name: str, seed: int = 0):
    cap = generate(name, seed=seed)
    path = tmp_path / f"{name}-{seed}.pcap"
    write_capture(cap, path)
    return cap, path, roceview.analyze(path)


def of_kind(records, kind: str) -> list[dict]:
    return [r for r in records if r["kind"] == kind]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_sender_that_ignores_cnps_is_named_with_the_cnps_it_ignored(tmp_path, seed):
    cap, path, result = analyzed(tmp_path, "dcqcn-ignored", seed)
    (f,) = of_kind(find(result), "cnp_ignored")
    deaf = next(q for q in cap.truth.qps if q["requester"] == "10.0.0.1")
    flow = f"10.0.0.1>10.0.0.3:0x{deaf['responder_qpn']:06x}"
    assert f["severity"] == "warning" and flow in f["flows"].split(";") and flow in f["summary"]
    assert "rp_cnp_ignored" in f["advice"] and "roce_rp/enable" in f["advice"]
    cc = result.cc_table.data
    ignored = sorted(int(fr) for fl, fr, v in zip(cc["flow"], cc["cnp_frame"], cc["ignored"]) if fl == flow and v == "true")
    listed = [int(x) for x in f["frames"].split(";")]
    assert f["frame_count"] == len(ignored) >= 3 and set(listed) <= set(ignored)
    # the truth: no CNP to that sender cut its rate
    assert not any(c["cut"] for c in cap.truth.cnps if c["qpn"] == deaf["requester_qpn"])


@pytest.mark.parametrize("name", ["dcqcn-reaction", "dcqcn-slow", "cnp-excess", "healthy-dcqcn", "incast"])
def test_senders_that_react_give_no_cnp_ignored(tmp_path, name):
    _, _, result = analyzed(tmp_path, name)
    assert not of_kind(find(result), "cnp_ignored")


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_no_sample_gives_a_cnp_finding(path):
    assert not {f["kind"] for f in find(roceview.analyze(path))} & {"cnp_ignored", "cnp_excess"}


def test_cnp_spacing_is_judged_only_against_the_minimum_configured(tmp_path):
    _, _, result = analyzed(tmp_path, "cnp-excess")
    assert not of_kind(find(result), "cnp_excess")                     # mlx5's default 0: not judged
    found = of_kind(find(result, load_config(min_time_between_cnps_us=4.0)), "cnp_excess")
    assert found and all("min_time_between_cnps" in f["advice"] for f in found)
    _, _, healthy = analyzed(tmp_path, "dcqcn-reaction")               # one CNP per QP per 4 us
    assert not of_kind(find(healthy, load_config(min_time_between_cnps_us=4.0)), "cnp_excess")


def test_the_finding_filter_selects_the_ignored_cnps(tmp_path):
    from helpers.cli import run

    _, path, result = analyzed(tmp_path, "dcqcn-ignored")
    (f,) = of_kind(find(result), "cnp_ignored")
    code, out, err = run("dissect", path, "-Y", 'roceview.finding == "cnp_ignored"', "-T", "fields", "-e", "frame.number")
    assert code == 0, err
    assert len(out.split()) == f["frame_count"] and {int(x) for x in f["frames"].split(";")} <= {int(x) for x in out.split()}


def _write(tmp_path, cap, name: str):
    path = tmp_path / f"{name}.pcap"
    write_capture(cap, path)
    return roceview.analyze(path)


def test_small_rate_cuts_of_a_healthy_sender_are_not_ignored_cnps(tmp_path, monkeypatch):
    """With CNPs spaced out a DCQCN alpha stays small (NVIDIA's defaults: about 0.1), and each cut
    is a few %: below what one CNP's spacing shows, yet the rate falls from one CNP to the next."""
    from roceview.generate import dcqcn

    init = dcqcn.ReactionPoint.__init__

    def small_alpha(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.g, self.alpha = 1 / 256, 0.1
    monkeypatch.setattr(dcqcn.ReactionPoint, "__init__", small_alpha)
    cap = generate("dcqcn-reaction", seed=0)
    cuts = [c for c in cap.truth.cnps if c["cut"]]
    assert cuts and all(c["rate_after_gbps"] > 0.9 * c["rate_before_gbps"] for c in cuts)     # each < 10 %
    assert not of_kind(find(_write(tmp_path, cap, "small-alpha")), "cnp_ignored")


def test_qps_sharing_their_senders_link_are_not_judged_deaf(tmp_path):
    """Eight QPs per sender host, each paced by its share of the link, not by its limiter: a cut of
    the limiter to a rate still above that share changes nothing on the wire."""
    from roceview.generate.network import Network, NetworkSettings
    from roceview.generate.qp import QpSettings, Workload
    from roceview.generate.scenario import Scenario
    from roceview.generate.scenarios import SCENARIOS

    def build(rng, scale, truth):
        net = Network(NetworkSettings(hosts=3, until_ms=50, prop_ns=20), rng, truth)
        for host in (0, 1):
            for _ in range(8):
                net.connect(host, 2, Workload([("WRITE", 64 * 1024)] * 12, qd=4, start_ns=int(rng.integers(0, 500))),
                            QpSettings(rp_reaction_ns=2000))
        return net, [0, 1], [2]

    SCENARIOS["shared-links"] = Scenario("shared-links", "eight QPs per sender", build, "sender", ())
    try:
        cap = generate("shared-links", seed=0)
    finally:
        del SCENARIOS["shared-links"]
    assert sum(c["cut"] for c in cap.truth.cnps) > 10
    assert not of_kind(find(_write(tmp_path, cap, "shared-links")), "cnp_ignored")
