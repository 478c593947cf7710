"""The PFC forensics scenarios make their faults, read back from the frames the model wrote (parsed
here, not by the analyzer) and checked against the model's truth: ECN before PFC on the healthy
thresholds and PFC first on the inverted ones, a NIC's frames on a priority it should have held
paused, a flow held behind another receiver's incast, and a routed ToR's addressing (the MACs of
the link each copy was captured on)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from roceview.generate import SCENARIOS, generate
from roceview.generate.network import Network, NetworkSettings, host_mac, switch_mac
from roceview.generate.qp import Workload
from roceview.generate.scenarios_pfc import RESPONSE_BOUND_QUANTA, VIOLATOR_LAG_NS
from roceview.generate.simulator import pause_quanta_ps
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth

CNP = 0x81
BOUND_NS = pause_quanta_ps(RESPONSE_BOUND_QUANTA, 100.0) // 1000
SEEDS = (0, 1, 2)
SCALE = 0.5          # the scenarios keep the fewest messages their fault needs


def parse(cap) -> list[dict]:
    """Each frame's Ethernet addresses and, for the PFC and RoCEv2 ones, what the tests need."""
    out = []
    for data, ts in zip(cap.frame_list(), cap.ts_ns.tolist()):
        row = {"ts": ts, "dst_mac": data[:6], "src_mac": data[6:12], "kind": "other"}
        if data[12:14] == b"\x88\x08":
            row.update(kind="pfc", quanta=struct.unpack("!8H", data[18:34]))
        elif data[12:14] == b"\x81\x00" and data[16:18] == b"\x08\x00":
            ip = data[18:38]
            bth = data[46:58]
            row.update(kind="roce", pcp=data[14] >> 5, ecn=ip[1] & 3, ttl=ip[8],
                       src=".".join(map(str, ip[12:16])), dst=".".join(map(str, ip[16:20])),
                       opcode=bth[0], dest_qp=int.from_bytes(bth[5:8], "big"),
                       psn=int.from_bytes(bth[9:12], "big"))
        out.append(row)
    return out


def first_ts(rows, kind: str, **match) -> int | None:
    return next((r["ts"] for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())), None)


def test_the_pfc_scenarios_are_registered_with_their_findings():
    assert SCENARIOS["ecn-before-pfc"].expected == ("ecn_congestion",)
    assert "pfc_before_ecn" in SCENARIOS["ecn-before-pfc"].forbidden
    assert {"pfc_before_ecn", "pfc_pause"} <= set(SCENARIOS["ecn-pfc-inverted"].expected)
    assert set(SCENARIOS["pfc-violator"].expected) == {"pfc_violation", "pfc_pause"}
    assert {"hol_victim", "pfc_pause"} <= set(SCENARIOS["hol-victim"].expected)
    for name in ("clean", "incast", "pfc-without-ecn", "slow-receiver", "pfc-storm"):
        assert {"pfc_before_ecn", "pfc_violation", "hol_victim"} <= set(SCENARIOS[name].forbidden)


@pytest.mark.parametrize("seed", SEEDS)
def test_healthy_thresholds_mark_and_notify_before_the_first_pause(seed):
    cap = generate("ecn-before-pfc", seed=seed, scale=SCALE)
    t, rows = cap.truth, parse(cap)
    assert t.counters["pfc_xoff_sent"] > 0, "the incast never reached XOFF"
    assert t.firsts["ce_marked"] < t.firsts["cnp_sent"] < t.firsts["pfc_xoff_sent"]
    # at the senders' links: the CNPs come back well before the switch's first XOFF
    first_cnp, first_pfc = first_ts(rows, "roce", opcode=CNP), first_ts(rows, "pfc")
    assert first_cnp is not None and first_pfc is not None
    assert first_pfc - first_cnp > 5_000


@pytest.mark.parametrize("seed", SEEDS)
def test_inverted_thresholds_pause_before_the_first_mark_and_marks_still_follow(seed):
    cap = generate("ecn-pfc-inverted", seed=seed, scale=SCALE)
    t, rows = cap.truth, parse(cap)
    assert t.firsts["pfc_xoff_sent_switch"] < t.firsts["ce_marked"]
    assert t.counters["ce_marked"] > 0 and t.counters["cnps_sent"] > 0
    first_cnp, first_pfc = first_ts(rows, "roce", opcode=CNP), first_ts(rows, "pfc")
    assert first_pfc < first_cnp


def paused_periods(rows, mac: bytes, prio: int = 3) -> list[tuple[int, int, int]]:
    """(XOFF ts, end ts) of each continuous paused period `mac` announced, read from its PFC frames
    as 802.1Qbb has them (the pause runs from the frame, a later frame replaces it)."""
    periods, start, until = [], None, 0
    for r in rows:
        if r["kind"] != "pfc" or r["src_mac"] != mac:
            continue
        if start is not None and until <= r["ts"]:
            periods.append((start, until))
            start = None
        q = r["quanta"][prio]
        if q == 0:
            if start is not None:
                periods.append((start, r["ts"]))
            start = None
            continue
        start = r["ts"] if start is None else start
        until = r["ts"] + pause_quanta_ps(q, 100.0) // 1000
    return periods + ([(start, until)] if start is not None else [])


@pytest.mark.parametrize("seed", SEEDS)
def test_the_violators_frames_are_in_the_capture_inside_a_pause_past_the_bound(seed):
    cap = generate("pfc-violator", seed=seed, scale=SCALE)
    rows, violations = parse(cap), cap.truth.pfc_violations
    assert violations, "10.0.0.1's NIC was never paused while it had something to send"
    periods = paused_periods(rows, switch_mac(0))
    sent = {(r["dest_qp"], r["psn"], r["ts"]) for r in rows if r["kind"] == "roce" and r["src_mac"] == host_mac(0)}
    for v in violations:
        assert v["src"] == "10.0.0.1" and v["priority"] == 3
        assert (v["dest_qp"], v["psn"], v["ts_ns"]) in sent
        assert BOUND_NS < v["delay_ns"] <= VIOLATOR_LAG_NS
        # the capture shows it inside a period the switch's port began with that XOFF, past the bound
        # (or just after the period's XON, when it was sent as the XON was on its way)
        start, end = next((s, e) for s, e in periods if s <= v["ts_ns"] < e + 2_000)
        assert start == v["pause_ts_ns"] and v["ts_ns"] - start == v["capture_delay_ns"] > BOUND_NS
        assert v["in_captured_pause"] == (v["ts_ns"] < end)
    assert any(v["in_captured_pause"] for v in violations)


def test_a_compliant_nic_sends_nothing_on_a_paused_priority_past_the_bound():
    """The same incast and pauses without the violator's lag: the watch finds no violation."""
    truth = Truth()
    sw = SwitchSettings(ecn_marking=False, xoff_bytes=24_000, xon_bytes=12_000)
    net = Network(NetworkSettings(hosts=3, until_ms=50, switch=sw, routed=True), np.random.default_rng(0), truth)
    for s in (0, 1):
        net.connect(s, 2, Workload([("WRITE", 32 * 1024)] * 4, qd=2))
    net.watch_pauses(0, bound_ns=0)          # any frame sent after a pause arrived would be listed
    net.mirror_links([0, 1])
    net.run()
    assert truth.pause_periods["host0"]["3"], "the switch never paused 10.0.0.1"
    assert truth.pfc_violations == []


@pytest.mark.parametrize("seed", SEEDS)
def test_the_victim_flow_waits_behind_the_incast_and_its_receiver_draws_no_ce(seed):
    cap = generate("hol-victim", seed=seed, scale=SCALE)
    t, rows = cap.truth, parse(cap)
    (victim,) = t.victims
    assert (victim["src"], victim["dst"]) == ("10.0.0.1", "10.0.0.6")
    assert 0 < victim["paused_ns"] <= victim["active_ns"]
    # the congested receiver sends CNPs to 10.0.0.1, the victim's sends none
    cnps_from = {r["src"] for r in rows if r["kind"] == "roce" and r["opcode"] == CNP}
    assert cnps_from == {"10.0.0.5"}
    # the switch's pause toward 10.0.0.1 held frames to both receivers
    flows = {(r["dst"], r["dest_qp"]) for r in rows if r["kind"] == "roce" and r["src"] == "10.0.0.1"}
    assert {dst for dst, _ in flows} == {"10.0.0.5", "10.0.0.6"}
    assert (victim["dst"], victim["dest_qp"]) in flows
    # the writes into the congested receiver were held by the same pause, and are no victim
    ((start, end),) = t.pause_periods["host0"]["3"]
    into_incast = [r["ts"] for r in rows if r["kind"] == "roce" and r["dst"] == "10.0.0.5" and r["src"] == "10.0.0.1"]
    assert min(into_incast) < start and max(into_incast) > end
    assert paused_periods(rows, switch_mac(0))


@pytest.mark.parametrize("mirror", ["sender", "receiver"])
def test_routed_frames_carry_the_macs_of_the_link_they_were_captured_on(mirror):
    cap = generate("hol-victim", seed=0, scale=SCALE, mirror=mirror)
    rows = parse(cap)
    hosts = {f"10.0.0.{i + 1}": i for i in range(6)}
    link = {0} if mirror == "sender" else {4, 5}
    roce = [r for r in rows if r["kind"] == "roce"]
    assert roce
    for r in roce:
        src, dst = hosts[r["src"]], hosts[r["dst"]]
        if src in link:      # toward the switch: from the host's NIC to its switch port, not yet routed
            assert (r["src_mac"], r["dst_mac"], r["ttl"]) == (host_mac(src), switch_mac(src), 64)
        else:                # from the switch: its egress port to the receiving host, one hop on
            assert dst in link
            assert (r["src_mac"], r["dst_mac"], r["ttl"]) == (switch_mac(dst), host_mac(dst), 63)
    for r in rows:
        if r["kind"] == "pfc":
            assert r["src_mac"] in {switch_mac(i) for i in link} | {host_mac(i) for i in link}


def test_a_bridged_fabric_keeps_the_hosts_macs_end_to_end():
    rows = parse(generate("ecn-before-pfc", seed=0, scale=SCALE))
    roce = [r for r in rows if r["kind"] == "roce"]
    assert roce and all(r["ttl"] == 64 for r in roce)
    for r in roce:
        src, dst = (int(r[k].rsplit(".", 1)[1]) - 1 for k in ("src", "dst"))
        assert (r["src_mac"], r["dst_mac"]) == (host_mac(src), host_mac(dst))
