"""The diagnoser uses what RDMA CM negotiated (connections.csv): the requester's Local ACK
Timeout (a resend with no NAK sooner than it is no timeout: the capture missed the NAK; one later
quotes it) and its RNR Retry Count (exhaustion confirmed by the count, never claimed at 7).
Without a connections table nothing changes; healthy CM traffic stays silent."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

import roceview
from conftest import REAL, capture_files
from helpers.analysis import A, B, SYN_RNR, T0, ack, analyze_rows, req
from helpers.diagnose import findings_of
from roceview.analysis.tables import Table
from roceview.diagnose import find
from roceview.generate import SCENARIOS, Capture, write_capture
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.ops_truth import operations
from roceview.generate.qp import Workload
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth

RNR_RETRY = 3           # rnr-exhausted(-cm)'s SENDs' QP: 3 resends after RNR NAKs, the 4th NAK ends it

US, MS = 1000, 1_000_000
CLIENT_QP, SERVER_QP = 0xC1, 0xD2          # helpers.analysis: A's requests go to 0xd2, B's ACKs to 0xc1
T14_US = 4.096 * (1 << 14)                 # 67.109 ms
COLUMNS = ("connection", "client_ip", "server_ip", "client_qp", "server_qp", "local_ack_timeout_us",
           "client_local_ack_timeout_us", "rnr_retry_count", "client_rnr_retry_count")


def with_cm(result, ack_us: float = T14_US, target_ack_delay: int = 14, rnr: int = 7, client_rnr: int = 7,
            client_estimate_us: float = 2 * T14_US):
    """The result with one CM connection: client A (QP 0xc1), server B (QP 0xd2). The REQ's
    Local ACK Timeout is `ack_us`; the REP's Target ACK Delay 14 puts the client's at least at
    4.096 us x 2^14 (cm_ack_timeout(14, 0)), its upper estimate at 2^15."""
    result.connections_table = Table(COLUMNS, {
        "connection": ["10.0.0.1>10.0.0.2#0x00000001"], "client_ip": [A], "server_ip": [B],
        "client_qp": np.array([CLIENT_QP]), "server_qp": np.array([SERVER_QP]),
        "local_ack_timeout_us": np.array([ack_us]), "client_local_ack_timeout_us": np.array([client_estimate_us]),
        "rnr_retry_count": np.array([rnr]), "client_rnr_retry_count": np.array([client_rnr]),
        "target_ack_delay": np.array([target_ack_delay])})
    return result


def resends(delay_ns: int) -> list[dict]:
    """PSNs 0..2 from A, then PSN 1 again `delay_ns` after its original, with no NAK."""
    return [req(T0, 0), req(T0 + US, 1), req(T0 + 2 * US, 2, ackreq=True), ack(T0 + 1500, 0),
            req(T0 + US + delay_ns, 1, ackreq=True), ack(T0 + US + delay_ns + 3 * US, 2)]


def by_kind(records) -> dict:
    return {r["kind"]: r for r in records}


# ---- ACK timeout -------------------------------------------------------------------------------
def test_each_requester_takes_its_sides_negotiated_values():
    from roceview.diagnose.context import negotiated

    n = negotiated(with_cm(analyze_rows(resends(MS)), rnr=3, client_rnr=5).connections_table)
    client, server = n[f"{A}>{B}:0x{SERVER_QP:06x}"], n[f"{B}>{A}:0x{CLIENT_QP:06x}"]
    # the server's QP: the REQ's timeout and RNR count; the client's: the REP's RNR count, and the
    # lower bound of its timeout, cm_ack_timeout(Target ACK Delay, 0) (the table's own column is an
    # upper estimate: the packet life time is not on the wire)
    assert (server.ack_timeout_ns, server.rnr_retry) == (round(T14_US * 1000), 3)
    assert (client.ack_timeout_ns, client.rnr_retry) == (round(T14_US * 1000), 5)
    assert client.ack_timeout_text() == "4.096 us x 2^14 = 67.109 ms"
    no_timer = negotiated(with_cm(analyze_rows(resends(MS)), ack_us=float("nan"), target_ack_delay=-1)
                          .connections_table)
    assert {c.ack_timeout_ns for c in no_timer.values()} == {0}       # t = 0, no REP: nothing known


def test_the_clients_timeout_is_its_lower_bound_not_the_tables_estimate():
    """Packet life time 16, the client's ACK delay 16, the server's 15: the REQ carries 18, the
    client's QP runs cm_ack_timeout(15, 16) = 17 (537 ms); the table's estimate from t - 1 is 18.
    A timeout resend 600 ms after its original is a timeout, not a NAK the capture missed."""
    from dissectors.cm import ack_timeout

    t, tad = ack_timeout(16, 16), 15
    assert (t, ack_timeout(tad, 16), ack_timeout(tad, t - 1)) == (18, 17, 18)
    result = with_cm(analyze_rows(resends(600 * MS)), ack_us=4.096 * (1 << t), target_ack_delay=tad,
                     client_estimate_us=4.096 * (1 << ack_timeout(tad, t - 1)))
    assert {f["kind"] for f in find(result)} == {"timeout_retransmit"}


def test_a_resend_sooner_than_the_negotiated_timeout_is_no_timeout_but_a_missed_nak():
    plain = by_kind(find(analyze_rows(resends(10 * MS))))
    assert set(plain) == {"timeout_retransmit"}                        # without CM: 10 ms > the 100 us floor
    found = by_kind(find(with_cm(analyze_rows(resends(10 * MS)))))
    assert set(found) == {"capture_loss"}
    f = found["capture_loss"]
    assert f["flows"] == f"{A}>{B}:0x{SERVER_QP:06x}" and f["severity"] == "warning"
    assert "the negotiated ACK timeout is 4.096 us x 2^14 = 67.109 ms" in f["evidence"]
    assert "10.000 ms to 10.000 ms after the original send" in f["evidence"] and "not a timeout" in f["evidence"]


def test_a_tail_packet_resent_sooner_than_the_negotiated_timeout_is_the_qps_own_timer():
    """The last packet sent draws no sequence-error NAK (nothing after it arrives out of order):
    resent 10 ms later, an ACK timer did it, one shorter than CM carried (rdma_set_option)."""
    rows = [req(T0, 0), req(T0 + US, 1), ack(T0 + 1500, 0), req(T0 + US + 10 * MS, 1, ackreq=True),
            ack(T0 + US + 10 * MS + 3 * US, 1)]
    found = by_kind(find(with_cm(analyze_rows(rows))))
    assert set(found) == {"timeout_retransmit"}
    evidence = found["timeout_retransmit"]["evidence"]
    assert "1 resend of the last packet sent (no later PSN for a NAK to follow) came 10.000 ms" in evidence
    assert "the application set its own: rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT" in evidence


def test_a_resend_after_the_negotiated_timeout_quotes_it():
    found = by_kind(find(with_cm(analyze_rows(resends(68 * MS)))))
    assert set(found) == {"timeout_retransmit"}
    assert ("the Local ACK Timeout RDMA CM negotiated: 4.096 us x 2^14 = 67.109 ms, connection "
            "10.0.0.1>10.0.0.2#0x00000001; resends after 68.000 ms") in found["timeout_retransmit"]["evidence"]


FUZZ_EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "20"))


def test_fuzzed_delays_and_timeouts_split_at_the_negotiated_timeout():
    """Seeded: a resend with no NAK is a timeout exactly when it comes at least the negotiated
    timeout (the client's side: its lower bound from the REP's Target ACK Delay) after its original."""
    from dissectors.cm import ack_timeout

    rng = random.Random(32)
    for _ in range(FUZZ_EXAMPLES):
        t, tad = rng.randint(8, 20), rng.randint(8, 21)
        timeout_ns = round(4.096 * (1 << ack_timeout(tad, 0)) * 1000)
        delay = max(200 * US, timeout_ns + rng.choice([-1, 1]) * rng.randint(1, timeout_ns // 2))
        result = with_cm(analyze_rows(resends(delay)), ack_us=4.096 * (1 << t), target_ack_delay=tad)
        found = {f["kind"] for f in find(result)}
        assert found == ({"timeout_retransmit"} if delay >= timeout_ns else {"capture_loss"}), (t, tad, delay)


def test_a_connection_of_other_qps_changes_nothing():
    result = with_cm(analyze_rows(resends(10 * MS)))
    result.connections_table.data["server_qp"] = np.array([0x99])     # not this flow's QP
    assert [f["kind"] for f in find(result)] == ["timeout_retransmit"]


# ---- RNR retry count ---------------------------------------------------------------------------
def rnr_then_silence(naks: int) -> list[dict]:
    """A SEND from A NAKed RNR (timer code 14) `naks` times, each resent 1 ms later but the last;
    then nothing on the QP pair for 50 ms while a third host writes on."""
    rows, t = [], T0
    for k in range(naks):
        rows += [req(t, 10, ackreq=True), ack(t + 3 * US, 10, syndrome=SYN_RNR)]
        t += MS
    rows += [req(t + 50 * MS * k // 10, k, src="10.0.0.3", qp=0xE5) for k in range(1, 11)]
    return rows


@pytest.mark.parametrize("naks", [2, 4])
def test_silence_after_rnr_naks_is_no_exhaustion_when_the_retry_count_is_infinite(naks):
    plain = by_kind(find(analyze_rows(rnr_then_silence(naks))))["rnr"]
    assert plain["severity"] == "critical"                              # without CM: the silence tells
    f = by_kind(find(with_cm(analyze_rows(rnr_then_silence(naks)), client_rnr=7)))["rnr"]
    assert f["severity"] == "warning" and "gave up" not in f["summary"]
    assert "rnr_retry_count 7 negotiated" in f["evidence"] and "cannot give up" in f["evidence"]


def test_fewer_rnr_naks_than_the_negotiated_count_do_not_spend_it():
    f = by_kind(find(with_cm(analyze_rows(rnr_then_silence(2)), client_rnr=3)))["rnr"]
    assert f["severity"] == "warning"
    assert "rnr_retry_count 3 negotiated" in f["evidence"] and "2 RNR NAKs for PSN 10 do not spend it" in f["evidence"]


def test_rnr_naks_beyond_the_negotiated_count_confirm_the_exhaustion_without_waiting():
    rows = rnr_then_silence(4)[:8]                                       # the capture ends at the 4th NAK
    assert by_kind(find(analyze_rows(rows)))["rnr"]["severity"] == "warning"    # no silence seen: not judged
    f = by_kind(find(with_cm(analyze_rows(rows), client_rnr=3)))["rnr"]
    assert f["severity"] == "critical" and "more than the 3 RNR retries RDMA CM negotiated" in f["summary"]
    assert "4 RNR NAKs for PSN 10 then no resend: the requester gave up (IBV_WC_RNR_RETRY_EXC_ERR)" in f["evidence"]


def run(build, seed: int = 0):
    """A scenario builder run as roceview.generate.generate runs the registered ones."""
    truth = Truth(scenario=getattr(build, "__name__", "scenario"), seed=seed, mirror="sender", expected_kinds=(), forbidden_kinds=())
    net, senders, _ = build(np.random.default_rng(seed), 1.0, truth)
    net.mirror_links(senders)
    frames, lengths, ts_ns = net.run()
    truth.ops = operations(net)
    return Capture(frames, lengths, ts_ns, truth)


def test_the_generated_rnr_exhaustion_is_confirmed_by_the_negotiated_count(tmp_path):
    cap = run(SCENARIOS["rnr-exhausted-cm"].build)
    write_capture(cap, tmp_path / "rnr.pcap")
    result = roceview.analyze(tmp_path / "rnr.pcap")
    # the REP carries what the client's QP uses: the SENDs' QP 3, the writer's 7 (its default); the
    # REQ what the server's QP uses (7 both): the 3 must come from the REP, or nothing is confirmed
    assert result.connections_table.data["client_rnr_retry_count"].tolist() == [RNR_RETRY, 7]
    assert result.connections_table.data["rnr_retry_count"].tolist() == [7, 7]
    found = find(result)
    assert {f["kind"] for f in found if f["severity"] != "info"} == {"rnr"}
    (f,) = [f for f in found if f["kind"] == "rnr"]
    assert f["severity"] == "critical"
    assert f"rnr_retry_count {RNR_RETRY} negotiated" in f["evidence"]
    assert f"{RNR_RETRY + 1} RNR NAKs for PSN" in f["evidence"] and "then no resend" in f["evidence"]


def tail_timeout_cm(rng, scale, truth):
    """tail-timeout (scenarios.py) with RDMA CM first: single-packet messages one at a time, the
    switch loses 5 % of them, each lost one recovered by the requester's 67 ms ACK timer."""
    sw = SwitchSettings(loss_prob=0.05, loss_window_pkts=(0, 10**9), loss_to=1)
    net = Network(NetworkSettings(hosts=2, until_ms=2000, switch=sw, rdma_cm=True), rng, truth)
    net.connect(0, 1, Workload([("SEND", 64 + 16 * k) for k in range(60)], qd=1, gap_ns=3000))
    return net, [0], [1]


def test_generated_timeouts_after_the_negotiated_timeout_stay_timeouts(tmp_path):
    cap = run(tail_timeout_cm, seed=1)
    write_capture(cap, tmp_path / "tail.pcap")
    result = roceview.analyze(tmp_path / "tail.pcap")
    found = by_kind(find(result))
    assert "capture_loss" not in found
    assert "the Local ACK Timeout RDMA CM negotiated: 4.096 us x 2^14 = 67.109 ms" in found["timeout_retransmit"]["evidence"]


# ---- healthy CM traffic stays silent -----------------------------------------------------------
def test_healthy_cm_scenario_is_unchanged_by_the_negotiation(tmp_path):
    from roceview.generate import generate

    write_capture(generate("pmtu-4096-cm"), tmp_path / "cm.pcap")
    result = roceview.analyze(tmp_path / "cm.pcap")
    assert len(result.connections_table) == 3
    found = [(f["kind"], f["evidence"]) for f in find(result)]
    assert not [k for k, _ in found if k in ("timeout_retransmit", "capture_loss", "rnr")]
    assert not [e for _, e in found if "negotiated" in e and "path MTU" not in e]


CM_REAL = [p for p in capture_files(REAL) if "rdma-cm" in p.name or "_cm-" in p.name]


@pytest.mark.skipif(not CM_REAL, reason=f"no real CM capture in {REAL}")
@pytest.mark.parametrize("path", CM_REAL, ids=[p.name for p in CM_REAL])
def test_real_cm_captures_raise_nothing_from_the_negotiation(path):
    found = findings_of(path)
    assert not [f for f in found if f["kind"] in ("timeout_retransmit", "capture_loss", "rnr")], found
