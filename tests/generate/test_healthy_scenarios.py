"""Issue 15's generator scenarios: healthy traffic that today's diagnoser takes for a fault, and
faults of the capture path only. Frame-level tests hold the capture to what the scenario says
(tshark decodes it, the model's ground truth counts it); finding-level tests state the final
expected findings (each failed before the analyzer/diagnoser changes of issue 15)."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from collections import Counter, defaultdict

import numpy as np
import pytest

from helpers.diagnose import SEVERE, findings_of, kinds, show
from helpers.tshark import field_rows
from roceview.cli import Environment, main
from roceview.generate import SCENARIOS, generate, write_capture
from roceview.generate import ibta as ib
from test_frames_are_real import spec_icrc_ok

_no_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def needs_tshark(test):
    return pytest.mark.tshark(_no_tshark(test))


FIELDS = {"ts": "frame.time_epoch", "len": "frame.len", "src_mac": "eth.src", "etype": "vlan.etype",
          "src": "ip.src", "dst": "ip.dst", "sgid": "infiniband.grh.sgid", "dgid": "infiniband.grh.dgid",
          "nxthdr": "infiniband.grh.nxthdr", "tclass": "infiniband.grh.tclass", "dport": "udp.dstport",
          "opcode": "infiniband.bth.opcode", "qp": "infiniband.bth.destqp", "psn": "infiniband.bth.psn",
          "syndrome": "infiniband.aeth.syndrome", "dmalen": "infiniband.reth.dmalen",
          "macc": "macc.opcode", "q3": "macc.cbfc.pause_time.c3"}
_TEXT = ("ts", "src_mac", "src", "dst", "sgid", "dgid")
_cache: dict = {}
FIRST_MIDDLE = {ib.SEND_FIRST, ib.SEND_MIDDLE, ib.RDMA_WRITE_FIRST, ib.RDMA_WRITE_MIDDLE,
                ib.RDMA_READ_RESPONSE_FIRST, ib.RDMA_READ_RESPONSE_MIDDLE}
PAUSE_NS = 0xFFFF * 512 / 100e9 * 1e9            # one XOFF's pause at 100 Gb/s: 335.5 us


def _value(name: str, v: str):
    if v == "" or name in _TEXT:
        return v or None
    return int(v, 16) if v.startswith("0x") else int(v)


def rows_of(name: str, tmp_path_factory, seed: int = 0):
    """(Capture, tshark rows) of a scenario; rows carry `frame` (bytes) and `t` (ns)."""
    if (name, seed) not in _cache:
        cap = generate(name, seed=seed)
        path = tmp_path_factory.mktemp("i15") / f"{name}.pcap"
        write_capture(cap, path)
        rows = field_rows(path, FIELDS, _value)
        for row, frame, t in zip(rows, cap.frame_list(), cap.ts_ns.tolist()):
            row["frame"], row["t"] = frame, t
        assert len(rows) == len(cap)
        _cache[(name, seed)] = (cap, rows)
    return _cache[(name, seed)]


def requests(rows):
    return [r for r in rows if r["opcode"] is not None and r["opcode"] <= ib.RDMA_READ_REQUEST]


def diagnose(name: str, tmp_path, seed: int = 0) -> list[dict]:
    path = tmp_path / f"{name}-{seed}.pcap"
    write_capture(generate(name, seed=seed), path)
    return findings_of(path)


def test_scenarios_name_the_new_kinds_and_keep_the_old_ones_forbidden():
    from roceview.generate import ALL_KINDS

    for kind in ("duplicate_frames", "roce_version_mixed", "ack_unsent_psn", "psn_reuse"):
        assert kind in ALL_KINDS and kind in SCENARIOS["clean"].forbidden
    assert SCENARIOS["pmtu-4096"].expected == SCENARIOS["psn-wrap"].expected == ()
    assert {"psn_reuse", "timeout_retransmit"} <= set(SCENARIOS["pmtu-4096"].forbidden)
    assert {"timeout_retransmit", "network_loss"} <= set(SCENARIOS["double-mirror"].forbidden)
    assert "network_loss" in SCENARIOS["capture-bad-icrc"].forbidden


# ---- (a) path MTU 4096, 4 KiB READs --------------------------------------------------------
@needs_tshark
@pytest.mark.parametrize("seed", [0, 1])
def test_pmtu_4096_each_4k_read_gets_one_read_response_only_of_4096_bytes(tmp_path_factory, seed):
    cap, rows = rows_of("pmtu-4096", tmp_path_factory, seed)
    storage = [r for r in rows if {r["src"], r["dst"]} == {"10.0.0.1", "10.0.0.2"}]
    reads = [r for r in storage if r["opcode"] == ib.RDMA_READ_REQUEST]
    assert len(reads) >= 6 and {r["dmalen"] for r in reads} == {4096}
    for read in reads:
        answers = [r for r in storage if r["src"] == "10.0.0.2" and r["psn"] == read["psn"]
                   and r["opcode"] in ib.READ_RESPONSE_OPCODES]
        assert [a["opcode"] for a in answers] == [ib.RDMA_READ_RESPONSE_ONLY]
        # Ethernet + VLAN + IPv4 + UDP + BTH + AETH + 4096 bytes + ICRC
        assert answers[0]["len"] == 14 + 4 + 20 + 8 + 12 + 4 + 4096 + 4
    assert not {r["opcode"] for r in storage} & FIRST_MIDDLE   # no multi-packet message at all
    legacy = [r for r in rows if r["src"] == "10.0.0.3" and r["opcode"] == ib.RDMA_WRITE_FIRST]
    assert legacy and {r["len"] - (14 + 4 + 20 + 8 + 12 + 16 + 4) for r in legacy} == {1024}
    assert sorted(q["pmtu"] for q in cap.truth.qps) == [1024, 4096, 4096]


@needs_tshark
def test_pmtu_4096_the_request_after_a_read_takes_the_next_psn(tmp_path_factory):
    """A 4096-byte READ at path MTU 4096 consumes one PSN (IBTA 9.7.1): every request that
    follows a READ on its QP has the READ's PSN + 1, and nothing is ever resent."""
    cap, rows = rows_of("pmtu-4096", tmp_path_factory)
    by_qp = defaultdict(list)
    for r in requests(rows):
        by_qp[r["qp"]].append(r)
    followers = 0
    for pkts in by_qp.values():
        psns = [r["psn"] for r in pkts]
        assert len(set(psns)) == len(psns)                    # no retransmission
        for a, b in zip(pkts, pkts[1:]):
            if a["opcode"] == ib.RDMA_READ_REQUEST:
                assert b["psn"] == (a["psn"] + 1) & ib.PSN_MASK
                followers += 1
    assert followers >= 5 and cap.truth.counters["retransmitted_packets"] == 0


CM_FIELDS = ["frame.number", "ip.src", "infiniband.mad.attributeid", "infiniband.cm.req.localqpn",
             "infiniband.cm.req.pppmtu", "infiniband.cm.req.startpsn", "infiniband.cm.rep.localqpn",
             "infiniband.cm.req.serviceid", "infiniband.deth.srcqp", "infiniband.bth.destqp"]


@needs_tshark
def test_pmtu_4096_cm_req_carries_the_path_mtu_and_the_qps(tmp_path):
    """tshark decodes the CM REQ (IBTA 12.6.5): Path Packet Payload MTU code 5 (4096) for the
    storage QPs, 3 (1024) for the legacy host's; its QPN and starting PSN are the
    requester's, the REP's QPN the responder's, and every QP's first request follows its REP."""
    cap = generate("pmtu-4096-cm", seed=0)
    write_capture(cap, tmp_path / "cm.pcap")
    cmd = ["tshark", "-r", str(tmp_path / "cm.pcap"), "-Y", "infiniband.mad", "-T", "fields",
           "-E", "occurrence=f"] + [x for f in CM_FIELDS for x in ("-e", f)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    mads = [dict(zip(CM_FIELDS, line.split("\t"))) for line in out.splitlines()]
    assert [m["infiniband.mad.attributeid"] for m in mads].count("0x0010") == len(cap.truth.qps) == 3
    gsi = {(m["infiniband.bth.destqp"], m["infiniband.deth.srcqp"]) for m in mads}
    assert gsi == {("0x000001", "0x00000001")}
    code = {4096: "0x05", 1024: "0x03"}
    frames = cap.frame_list()          # all RoCEv2 with a VLAN tag: BTH at byte 46
    for q in cap.truth.qps:
        (req,) = [m for m in mads if m["infiniband.cm.req.localqpn"]
                  and int(m["infiniband.cm.req.localqpn"], 16) == q["requester_qpn"]]
        assert req["ip.src"] == q["requester"] and req["infiniband.cm.req.pppmtu"] == code[q["pmtu"]]
        assert int(req["infiniband.cm.req.startpsn"], 16) == q["first_psn"]
        (rep,) = [m for m in mads if m["infiniband.cm.rep.localqpn"]
                  and int(m["infiniband.cm.rep.localqpn"], 16) == q["responder_qpn"]]
        first = min(i for i, f in enumerate(frames, 1) if f[46] <= ib.RDMA_READ_REQUEST
                    and int.from_bytes(f[51:54], "big") == q["responder_qpn"])
        assert int(req["frame.number"]) < int(rep["frame.number"]) < first
    assert cap.truth.counters["cm_mads_sent"] == 9                 # REQ, REP, RTU per QP


@pytest.mark.parametrize("name", ["pmtu-4096", "pmtu-4096-cm"])
def test_pmtu_4096_diagnoses_nothing_above_info(tmp_path, name):
    findings = diagnose(name, tmp_path)
    assert not kinds(findings, SEVERE), show(findings)
    assert not kinds(findings) & {"psn_reuse", "timeout_retransmit"}, show(findings)


# ---- (b) double mirror ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_double_mirror_captures_every_frame_twice_byte_identical_under_1us_apart(seed):
    cap = generate("double-mirror", seed=seed)
    frames, ts = cap.frame_list(), cap.ts_ns.tolist()
    assert set(Counter(frames).values()) == {2}
    seen: dict = {}
    for i, f in enumerate(frames):
        if f in seen:
            assert 0 <= ts[i] - ts[seen.pop(f)] < 1000
        else:
            seen[f] = i
    assert not cap.truth.drops and cap.truth.counters["retransmitted_packets"] == 0


def _flow(frame: bytes):
    """(Ethernet source, BTH destination QP) of a RoCEv2 frame; None for other frames."""
    if frame[16:18] != b"\x08\x00":
        return None
    return frame[6:12], int.from_bytes(frame[18 + 28 + 5:18 + 28 + 8], "big")


def test_double_mirror_a_frames_copy_is_the_next_frame_of_its_flow():
    """The rule the analyzer can use: a duplicate repeats its flow's previous packet (same PSN,
    same bytes). The replicas leave the capture port back to back, so no other frame of the
    same flow gets between them."""
    frames = generate("double-mirror", seed=0).frame_list()
    last: dict = {}
    for f in frames:
        key = _flow(f)
        if key is None:
            continue
        prev = last.get(key)
        if prev is not None and prev[1] == 1:
            assert f == prev[0]
        last[key] = (f, 1 if prev is None or prev[1] == 2 or f != prev[0] else 2)


def test_double_mirror_without_its_copies_is_the_single_mirror_capture_of_the_same_run():
    from roceview.generate.truth import Truth

    sc = SCENARIOS["double-mirror"]
    net, senders, _ = sc.build(np.random.default_rng(0), 1.0, Truth())
    net.mirror.copies = 1
    net.mirror_links(senders)
    single, lengths, _ = net.run()
    double = generate("double-mirror", seed=0)
    assert single.tobytes() == b"".join(double.frame_list()[::2])
    assert len(lengths) * 2 == len(double)


def test_double_mirror_is_duplicate_frames_info_never_retransmission(tmp_path):
    findings = diagnose("double-mirror", tmp_path)
    assert "duplicate_frames" in kinds(findings, ("info",)), show(findings)
    assert not kinds(findings) & {"timeout_retransmit", "network_loss", "capture_loss"}, show(findings)


# ---- (c) PFC pauses that lapse between XOFFs -----------------------------------------------
@needs_tshark
def test_pause_train_xoffs_lapse_by_1us_and_span_150ms(tmp_path_factory):
    cap, rows = rows_of("pfc-pause-train", tmp_path_factory)
    pfc = [r for r in rows if r["macc"] == 0x0101]
    xoff = np.array([r["t"] for r in pfc if r["q3"]])
    gaps = np.diff(xoff)
    assert len(xoff) > 400 and (gaps > PAUSE_NS).all()       # each pause ran out first ...
    assert (gaps - PAUSE_NS < 1_100).all()                   # ... by about a microsecond
    resume = [r["t"] for r in pfc if r["q3"] == 0]
    assert len(resume) == 1 and resume[0] - xoff[0] >= 150_000_000
    assert {r["src_mac"] for r in pfc} == {"0e:c0:de:00:00:11"}
    assert cap.truth.counters["ack_timeouts"] == 0


def test_pause_train_is_a_pfc_storm_by_share_of_the_window(tmp_path):
    findings = diagnose("pfc-pause-train", tmp_path)
    assert {"pfc_storm", "pfc_pause"} <= kinds(findings), show(findings)


def test_pause_train_storm_spans_the_episode_and_says_the_pauses_lapsed(tmp_path):
    (storm,) = [f for f in diagnose("pfc-pause-train", tmp_path) if f["kind"] == "pfc_storm"]
    assert storm["end_ts"] - storm["start_ts"] >= 149_000_000
    text = storm["summary"] + storm["evidence"]
    assert "continuously for 0.3 ms" not in text and "refreshed before the previous one ran out" not in text


# ---- (d) bad ICRC in the capture path only -------------------------------------------------
def _truth_via_cli(tmp_path, name: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    argv = ["generate", name, "-o", str(tmp_path / "c.pcap"), "--truth", str(tmp_path / "t.json")]
    assert main(argv, Environment(stdout=out, stderr=err)) == 0, err.getvalue()
    return json.loads((tmp_path / "t.json").read_text())


@needs_tshark
def test_bad_icrc_frames_are_acked_and_never_resent(tmp_path, tmp_path_factory):
    truth = _truth_via_cli(tmp_path, "capture-bad-icrc")
    cap, rows = rows_of("capture-bad-icrc", tmp_path_factory)
    bad = {(d["dest_qp"], d["psn"]) for d in truth["corrupted"]}
    assert len(bad) >= 3 and truth["counters"].get("retransmitted_packets", 0) == 0
    assert {(r["qp"], r["psn"]) for r in rows if r["opcode"] is not None
            and not spec_icrc_ok(r["frame"])} == bad
    data = [(r["qp"], r["psn"]) for r in rows if r["opcode"] is not None and r["opcode"] != ib.ACKNOWLEDGE]
    assert all(data.count(k) == 1 for k in bad)               # never resent
    peer = {q["responder_qpn"]: q["requester_qpn"] for q in truth["qps"]}
    peer.update({v: k for k, v in peer.items()})
    for r in rows:
        if (r["qp"], r["psn"]) not in bad or r["opcode"] in ib.READ_RESPONSE_OPCODES:
            continue                  # a READ response is acknowledged by the requester's next request
        acks = [a for a in rows if a["opcode"] == ib.ACKNOWLEDGE and a["t"] > r["t"]
                and a["qp"] == peer[r["qp"]] and a["syndrome"] >> 5 == 0
                and (a["psn"] - r["psn"]) & ib.PSN_MASK < 1 << 23]
        assert acks, f"no ACK covers PSN {r['psn']} of QP {r['qp']:#x}"


def test_bad_icrc_is_blamed_on_the_capture_path_since_the_endpoints_acked(tmp_path):
    (bad,) = [f for f in diagnose("capture-bad-icrc", tmp_path) if f["kind"] == "bad_icrc"]
    assert bad["severity"] == "info" and "will retransmit" not in bad["advice"]
    text = (bad["summary"] + bad["evidence"]).lower()
    assert re.search(r"\back(s|ed|nowledged)?\b", text) and "capture" in text


# ---- (e) mixed RoCE v1 / v2 on one QP pair -------------------------------------------------
@needs_tshark
def test_mixed_versions_one_host_sends_v1_grh_the_other_v2_udp_4791(tmp_path_factory):
    cap, rows = rows_of("mixed-roce-versions", tmp_path_factory)
    roce = [r for r in rows if r["opcode"] is not None]
    v1 = [r for r in roce if r["src_mac"] == "0e:c0:de:00:00:10"]
    v2 = [r for r in roce if r["src_mac"] == "0e:c0:de:00:00:11"]
    assert len(v1) + len(v2) == len(roce) and v1 and v2
    assert {(r["etype"], r["nxthdr"], r["sgid"], r["dgid"], r["dport"]) for r in v1} == {
        (0x8915, 0x1B, "::ffff:10.0.0.1", "::ffff:10.0.0.2", None)}
    assert {(r["etype"], r["src"], r["dport"], r["sgid"]) for r in v2} == {(0x0800, "10.0.0.2", 4791, None)}
    assert {r["tclass"] & 3 for r in v1} == {2}   # ECT(0) in the GRH: no switch marks RoCEv1
    assert all(spec_icrc_ok(r["frame"]) for r in roce)
    for q in cap.truth.qps:   # both directions of each QP pair are seen, one v1 and one v2
        assert {q["requester_roce"], q["responder_roce"]} == {1, 2}
        assert any(r["qp"] == q["responder_qpn"] for r in v1 + v2)
        assert any(r["qp"] == q["requester_qpn"] for r in v1 + v2)


def test_mixed_versions_decode_with_valid_icrc_today(tmp_path):
    assert "bad_icrc" not in kinds(diagnose("mixed-roce-versions", tmp_path))


def test_mixed_versions_is_a_misconfiguration_finding(tmp_path):
    findings = diagnose("mixed-roce-versions", tmp_path)
    assert "roce_version_mixed" in kinds(findings), show(findings)


# ---- (f) two QPs between the same hosts across the PSN wrap --------------------------------
@needs_tshark
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_psn_wrap_both_qps_cross_0xffffff_to_0(seed, tmp_path_factory):
    cap, rows = rows_of("psn-wrap", tmp_path_factory, seed)
    reqs = requests(rows)
    qps = cap.truth.qps
    assert len(qps) == 2 and len({(q["requester"], q["responder"]) for q in qps}) == 1
    for q in qps:
        psns = [r["psn"] for r in reqs if r["qp"] == q["responder_qpn"]]
        assert psns[0] == q["first_psn"] >= 0xFFFFF0
        steps = list(zip(psns, psns[1:]))
        assert any(a > 0xFFFF00 and b < 0x100 for a, b in steps)   # e.g. 0xffffff -> 0 (or a READ over it)
        assert all(0 < (b - a) & ib.PSN_MASK < 64 for a, b in steps)


def test_psn_wrap_pairs_each_qp_with_its_own_peer(tmp_path):
    import roceview.api

    path = tmp_path / "wrap.pcap"
    cap = generate("psn-wrap", seed=0)
    write_capture(cap, path)
    flows = roceview.api.analyze(str(path), warn=lambda m: None).flows
    peer = {(r.dst_ip, int(r.dest_qp)): r.peer_qp for r in flows.itertuples()}
    for q in cap.truth.qps:
        assert peer[(q["responder"], q["responder_qpn"])] == q["requester_qpn"]
        assert peer[(q["requester"], q["requester_qpn"])] == q["responder_qpn"]
