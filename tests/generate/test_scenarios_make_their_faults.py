"""Each `roceview generate` scenario produces the fault it names, checked two ways: the
simulator's ground truth, and the capture itself decoded by tshark (IPv4 checksums, ICRC,
go-back-N PSN order, CE / CNP / PFC). Names state the rule each test holds the output to."""
from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import numpy as np
import pytest

from roceview.generate import SCENARIOS, generate, write_capture
from roceview.generate import ibta as ib
from test_frames_are_real import spec_icrc_ok

pytestmark = pytest.mark.tshark
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")

FIELDS = ["frame.time_epoch", "eth.src", "vlan.priority", "ip.src", "ip.dst", "ip.dsfield.dscp",
          "ip.dsfield.ecn", "ip.checksum.status", "udp.srcport", "infiniband.bth.opcode",
          "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a",
          "infiniband.aeth.syndrome", "infiniband.reth.dmalen", "infiniband.reserved",
          "macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3"]
NAMES = ["ts", "src_mac", "pcp", "src", "dst", "dscp", "ecn", "ipck", "sport", "opcode", "qp",
         "psn", "ackreq", "syndrome", "dmalen", "bth4", "macc", "enbv", "q3"]
PAUSE_QUANTUM_S = 512 / 100e9
_cache: dict = {}


def _int(v: str):
    if v == "":
        return None
    if "." in v and not v.startswith("0x"):
        return float(v)
    return int(v, 16) if v.startswith("0x") else int(v)


def decode(path) -> list[dict]:
    """tshark -T fields over the capture: one dict per frame (None where absent)."""
    cmd = ["tshark", "-r", str(path), "-o", "ip.check_checksum:TRUE", "-T", "fields",
           "-E", "occurrence=f", "-E", "separator=\t"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        vals = line.split("\t")
        row = {n: (v if n in ("src_mac", "src", "dst") else _int(v)) for n, v in zip(NAMES, vals)}
        row["ts"] = vals[0]   # keep full nanosecond text
        row["bth4"] = int(vals[15], 16) if vals[15] else None   # tshark 4.0 shows it as bare hex
        rows.append(row)
    return rows


def sample(tmp_path_factory, name: str, seed: int = 0, mirror: str | None = None):
    key = (name, seed, mirror)
    if key not in _cache:
        cap = generate(name, seed=seed, mirror=mirror)
        path = tmp_path_factory.mktemp("gen") / f"{name}-{seed}.pcap"
        write_capture(cap, path)
        _cache[key] = (cap, path, decode(path))
    return _cache[key]


def roce(rows):
    return [r for r in rows if r["opcode"] is not None]


def ts_ns(row) -> int:
    s, frac = row["ts"].split(".")
    return int(s) * 10**9 + int(frac.ljust(9, "0"))


def is_request(op: int) -> bool:
    return op <= ib.RDMA_READ_REQUEST


# ---- every scenario ------------------------------------------------------------------------
@needs_tshark
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_frame_has_valid_ipv4_checksum_and_icrc(tmp_path_factory, name):
    cap, path, rows = sample(tmp_path_factory, name)
    assert len(rows) == len(cap) > 0
    assert all(r["ipck"] == 1 for r in rows if r["src"]), "tshark found a bad IPv4 checksum"
    frames = cap.frame_list()
    bad = [r for f, r in zip(frames, rows) if r["opcode"] is not None and not spec_icrc_ok(f)]
    assert len(bad) == len(cap.truth.corrupted)   # only copies the capture path damaged
    assert all(r["sport"] is None or r["sport"] >= 49152 for r in rows)


# DCQCN reacts only to a congestion episode longer than the CNP round trip: healthy-dcqcn's
# 20 ms of overlapping 32 KB writes take ~3 MB (about 3,000 frames); two-point-mirror is
# network-loss's traffic captured twice (310-380 KB); every other sample < 300 KB
# backlogged senders of 64 KiB messages: their spacing shows each DCQCN rate cut
CC = {name: 2_000_000 for name in ("dcqcn-reaction", "dcqcn-slow", "cnp-excess")} | {"dcqcn-ignored": 3_500_000}
# PFC forensics: incasts that fill the switch's buffer past XOFF (the ECN / PFC order, a NIC sending
# while paused, a flow held behind an incast): 0.3-0.9 MB
PFC = {"ecn-before-pfc": 1_200_000, "ecn-pfc-inverted": 1_200_000, "pfc-violator": 800_000, "hol-victim": 500_000}
LARGER_SAMPLES = {"healthy-dcqcn": 4_000_000, "two-point-mirror": 500_000, **CC, **PFC}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sample_is_small_deterministic_and_seed_dependent(name):
    a, b, c = generate(name, seed=7), generate(name, seed=7), generate(name, seed=8)
    assert a.frames.tobytes() == b.frames.tobytes() and (a.ts_ns == b.ts_ns).all()
    assert a.frames.tobytes() != c.frames.tobytes()
    assert int(a.lengths.sum()) + 16 * len(a) + 24 < LARGER_SAMPLES.get(name, 300_000)


@pytest.mark.parametrize("name", ["clean", "incast", "network-loss"])
def test_scale_multiplies_traffic(name):
    small, big = generate(name, seed=1), generate(name, seed=1, scale=3)
    assert len(big) > 2 * len(small)


# captures whose frames are not one point's in one clock: frames missed, frames twice, or NAKs
# stamped before the resends they caused (tap-skew: the two directions' clocks 3 us apart)
NOT_ONE_POINT = ("capture-drop", "double-mirror", "two-point-mirror", "tap-skew")


@needs_tshark
@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if s.mirror == "sender"
                                  and n not in NOT_ONE_POINT])
def test_requester_psns_follow_go_back_n(tmp_path_factory, name):
    """At a sender-side mirror a requester's PSNs only ever continue (a READ request advancing
    by ceil(len/PMTU)), or jump back to the PSN of the last NAK / RNR NAK, or to the oldest
    unacknowledged PSN after a silence of at least the 67 ms Local ACK Timeout."""
    cap, _, rows = sample(tmp_path_factory, name)
    pmtu = {q["responder_qpn"]: q["pmtu"] for q in cap.truth.qps}
    flows = defaultdict(list)
    for r in roce(rows):
        flows[(r["src"], r["dst"], r["qp"])].append(r)
    for (src, dst, qp), pkts in flows.items():
        if not is_request(pkts[0]["opcode"]):
            continue
        replies = [r for r in roce(rows) if r["src"] == dst and r["dst"] == src
                   and r["opcode"] == ib.ACKNOWLEDGE]
        _check_go_back_n(pkts, replies, pmtu[qp])


def _check_go_back_n(pkts, replies, pmtu: int):
    expected = pkts[0]["psn"]
    last_sent = ts_ns(pkts[0])
    for p in pkts:
        psn, t = p["psn"], ts_ns(p)
        if psn != expected:
            before = [r for r in replies if ts_ns(r) < t]
            naks = [r for r in before if r["syndrome"] >> 5 in (1, 3)]
            by_nak = naks and naks[-1]["psn"] == psn
            by_timer = t - last_sent >= ib.local_ack_timeout_ps(14) // 1000
            assert by_nak or by_timer, f"PSN {psn} sent, {expected} expected, no NAK/timeout"
        span = -(-p["dmalen"] // pmtu) if p["opcode"] == ib.RDMA_READ_REQUEST else 1
        expected = (psn + max(span, 1)) & ib.PSN_MASK
        last_sent = t


# ---- scenario by scenario ------------------------------------------------------------------
def test_clean_has_no_loss_ce_pause_rnr_or_retransmission():
    t = generate("clean", seed=3).truth
    assert not t.drops
    for k in ("retransmitted_packets", "naks_seq_sent", "naks_rnr_sent", "ce_marked",
              "pfc_xoff_sent", "cnps_sent", "ack_timeouts"):
        assert t.counters[k] == 0, k
    assert t.counters["read_response_packets"] > 0


@pytest.mark.parametrize("seed", range(5))
def test_network_loss_is_recovered_by_nak_and_go_back_n_never_by_timeout(seed):
    t = generate("network-loss", seed=seed).truth
    assert len(t.drops_at("switch")) > 0 and not t.drops_at("mirror")
    assert t.counters["naks_seq_sent"] == t.counters["naks_seq_received"] > 0
    assert t.counters["ack_timeouts"] == 0
    assert t.counters["retransmitted_packets"] >= len(t.drops)


def _gaps(reqs) -> list[dict]:
    """Request packets whose PSN is ahead of the next expected one (24-bit serial)."""
    nxt, out = None, []
    for r in reqs:
        span = max(1, -(-r["dmalen"] // 1024)) if r["opcode"] == ib.RDMA_READ_REQUEST else 1
        if nxt is not None and 0 < (r["psn"] - nxt) & ib.PSN_MASK < 1 << 23:
            out.append(r)
        end = (r["psn"] + span) & ib.PSN_MASK
        if nxt is None or 0 < (end - nxt) & ib.PSN_MASK < 1 << 23:
            nxt = end
    return out


@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_network_loss_mirror_before_loss_sees_no_gap_after_sees_gap_then_nak(tmp_path_factory, seed):
    cap, _, before = sample(tmp_path_factory, "network-loss", seed)
    _, _, after = sample(tmp_path_factory, "network-loss-receiver-side", seed)
    reqs_before = [r for r in roce(before) if is_request(r["opcode"])]
    reqs_after = [r for r in roce(after) if is_request(r["opcode"])]
    assert len(reqs_after) == len(reqs_before) - len(cap.truth.drops_at("switch"))
    assert not _gaps(reqs_before)
    gaps = _gaps(reqs_after)
    naks = [r for r in roce(after) if r["syndrome"] == 0x60]
    assert gaps and len(naks) == cap.truth.counters["naks_seq_sent"]
    for gap in gaps:   # every gap is answered by a NAK at the PSN it skipped over (or earlier)
        assert any(ts_ns(n) >= ts_ns(gap) for n in naks)


@needs_tshark
def test_capture_drop_leaves_gaps_that_the_endpoints_never_notice(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "capture-drop")
    t = cap.truth
    assert t.drops_at("mirror") and not t.drops_at("switch")
    assert t.counters["naks_seq_sent"] == t.counters["retransmitted_packets"] == 0
    assert not any(r["syndrome"] is not None and r["syndrome"] >> 5 for r in roce(rows))
    captured = {(r["qp"], r["psn"]) for r in roce(rows) if is_request(r["opcode"])}
    for d in t.drops_at("mirror"):
        if d.opcode is not None and is_request(d.opcode):
            assert (d.dest_qp, d.psn) not in captured   # a gap, never filled


@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_tail_loss_is_resent_after_the_ack_timer_without_any_nak(tmp_path_factory, seed):
    cap, _, rows = sample(tmp_path_factory, "tail-timeout", seed)
    t = cap.truth
    assert t.counters["ack_timeouts"] == len(t.drops_at("switch")) > 0
    assert not any(r["syndrome"] is not None and r["syndrome"] >> 5 for r in roce(rows))
    reqs = [r for r in roce(rows) if is_request(r["opcode"])]
    timeout_ns = ib.local_ack_timeout_ps(14) // 1000
    for d in t.drops:
        copies = [ts_ns(r) for r in reqs if (r["qp"], r["psn"]) == (d.dest_qp, d.psn)]
        assert len(copies) == 2 and copies[1] - copies[0] >= timeout_ns


@needs_tshark
def test_rnr_naks_carry_the_timer_and_the_resend_waits_for_it(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "rnr")
    rnr = [r for r in roce(rows) if r["syndrome"] is not None and r["syndrome"] >> 5 == 1]
    assert len(rnr) == cap.truth.counters["naks_rnr_sent"] > 0
    assert {r["syndrome"] & 0x1F for r in rnr} == {4}
    reqs = [r for r in roce(rows) if is_request(r["opcode"])]
    for nak in rnr:
        resend = next(r for r in reqs if r["psn"] == nak["psn"] and ts_ns(r) > ts_ns(nak))
        assert ts_ns(resend) - ts_ns(nak) >= ib.RNR_TIMER_US[4] * 1000


@needs_tshark
def test_remote_access_error_naks_once_and_the_requester_stops(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "remote-error")
    naks = [r for r in roce(rows) if r["syndrome"] == ib.AETH_NAK | ib.NAK_REMOTE_ACCESS_ERROR]
    assert len(naks) == 1
    later = [r for r in roce(rows) if is_request(r["opcode"]) and ts_ns(r) > ts_ns(naks[0]) + 5000]
    assert not later


@needs_tshark
def test_incast_has_many_senders_ce_marks_and_cnps_to_the_senders_qps(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "incast")
    data = [r for r in roce(rows) if is_request(r["opcode"])]
    assert len({r["src"] for r in data}) >= 4 and len({r["dst"] for r in data}) == 1
    assert sum(r["ecn"] == 3 for r in data) > 0
    cnps = [r for r in roce(rows) if r["opcode"] == ib.CNP]
    assert cnps and all(r["bth4"] == 0x40 for r in cnps)   # BECN
    requester_qps = {q["requester_qpn"] for q in cap.truth.qps}
    assert {r["qp"] for r in cnps} <= requester_qps


@needs_tshark
def test_pfc_storm_keeps_priority_3_paused_over_100_ms_refreshing_before_expiry(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "pfc-storm")
    xoff = [r for r in rows if r["macc"] == 0x0101 and r["q3"]]
    assert {r["enbv"] for r in xoff} == {0x08} and len({r["src_mac"] for r in xoff}) == 1
    times = np.array([ts_ns(r) for r in xoff])
    assert (np.diff(times) < 0xFFFF * PAUSE_QUANTUM_S * 1e9).all()   # refreshed before it lapses
    assert times[-1] - times[0] >= 100_000_000
    assert cap.truth.pause_sources == {xoff[0]["src_mac"]: "host"}
    assert cap.truth.counters["ack_timeouts"] == 0


@needs_tshark
def test_pfc_without_ecn_has_switch_pauses_ect_traffic_and_no_ce_or_cnp(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "pfc-without-ecn")
    pauses = [r for r in rows if r["macc"] == 0x0101]
    assert pauses and set(cap.truth.pause_sources.values()) == {"switch"}
    data = [r for r in roce(rows) if is_request(r["opcode"])]
    assert {r["ecn"] for r in data} == {2} and {r["pcp"] for r in data} == {3}
    assert not any(r["opcode"] == ib.CNP for r in roce(rows))
    assert cap.truth.counters["ce_marked"] == 0


@needs_tshark
def test_ecn_not_enabled_sends_everything_not_ect(tmp_path_factory):
    _, _, rows = sample(tmp_path_factory, "ecn-not-enabled")
    assert {r["ecn"] for r in roce(rows)} == {0}


@needs_tshark
def test_cnp_missing_delivers_ce_marks_and_no_cnp(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "cnp-missing")
    assert sum(r["ecn"] == 3 for r in roce(rows)) > 0
    assert not any(r["opcode"] == ib.CNP for r in roce(rows))
    assert cap.truth.counters["cnps_sent"] == 0


@needs_tshark
def test_priority_mismatch_puts_one_sender_on_an_unprotected_priority(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "priority-mismatch")
    data = [r for r in roce(rows) if is_request(r["opcode"])]
    assert {(r["pcp"], r["dscp"]) for r in data} == {(3, 26), (0, 0)}
    pauses = [r for r in rows if r["macc"] == 0x0101]
    assert pauses and {r["enbv"] for r in pauses} == {0x08}
    assert not cap.truth.drops


@needs_tshark
def test_slow_receiver_pauses_come_from_the_receiver_nic_without_ce(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "slow-receiver")
    pauses = [r for r in rows if r["macc"] == 0x0101]
    endpoint_macs = {r["src_mac"] for r in roce(rows)}
    assert pauses and {r["src_mac"] for r in pauses} <= endpoint_macs
    assert not any(r["ecn"] == 3 for r in roce(rows))
    assert set(cap.truth.pause_sources.values()) == {"host"}


@pytest.mark.parametrize("name", ["incast", "network-loss", "rnr"])
def test_scapy_decodes_every_roce_frame_and_agrees_on_its_icrc(tmp_path_factory, name):
    from scapy.contrib.roce import BTH, CNPPadding
    from scapy.utils import rdpcap

    _, path, _ = sample(tmp_path_factory, name)
    pkts = [p for p in rdpcap(str(path)) if BTH in p]
    assert pkts
    for p in pkts:
        rebuilt = p.copy()
        rebuilt[BTH].icrc = None          # scapy recomputes the ICRC from the other fields
        assert bytes(rebuilt) == bytes(p)
        if p[BTH].opcode == ib.CNP:
            assert p[BTH].becn == 1 and CNPPadding in p


def test_every_scenario_names_expected_and_forbidden_kinds_disjointly():
    for sc in SCENARIOS.values():
        assert not set(sc.expected) & set(sc.forbidden)
    assert SCENARIOS["clean"].expected == ()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_committed_sample_is_what_generate_writes_for_seed_0(tmp_path, name):
    from pathlib import Path

    sample_path = Path(__file__).resolve().parents[2] / "captures" / f"{name}.pcap"
    if not sample_path.exists():
        pytest.skip("sample not generated yet")
    write_capture(generate(name, seed=0), tmp_path / "x.pcap")
    assert (tmp_path / "x.pcap").read_bytes() == sample_path.read_bytes()
