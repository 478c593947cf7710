"""RTT across capture gaps and NAKs, psn_reuse's outcome, ACKs for
PSNs never sent, and peer_qp of QPs whose PSN ranges overlap (both crossing 2^24)."""
import random

import pytest

from helpers.analysis import (A, B, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST, SEND_ONLY, SYN_NAK_SEQ,
                              T0, ack, analyze_rows, flow_id, flow_row, req)
from roceview.diagnose import find

US = 1000
REQ, RESP = flow_id(A, B, 0xD2), flow_id(B, A, 0xC1)
MOD = 1 << 24


def rtt(rows, chunk=None):
    r = flow_row(analyze_rows(rows, chunk=chunk), REQ)
    return r["rtt_p50_us"], r["rtt_p99_us"]


def test_a_nak_with_psn_p_gives_no_rtt_sample_for_request_p():
    # NAK PSN sequence error 5 acknowledges only PSN 4: request 5's sample is its later ACK
    rows = [req(T0, 5, ackreq=True), ack(T0 + 2 * US, 5, syndrome=SYN_NAK_SEQ), ack(T0 + 9 * US, 5)]
    assert rtt(rows) == ("9.000", "9.000")


@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_no_rtt_sample_across_a_capture_gap(chunk):
    # request 0; the capture misses 1; request 2 opens a gap; the next ACK captured (PSN 2) comes
    # 300 us later: it covers requests whose own ACKs were not captured, no sample. Request 3 after
    # it is answered by its own ACK in 5 us.
    rows = [req(T0, 0, ackreq=True), req(T0 + US, 2, ackreq=True), ack(T0 + 300 * US, 2),
            req(T0 + 400 * US, 3, ackreq=True), ack(T0 + 405 * US, 3)]
    assert rtt(rows, chunk) == ("5.000", "5.000")


def test_capture_loss_says_rtts_are_unreliable():
    rows = [req(T0, 0, ackreq=True), req(T0 + US, 2, ackreq=True), ack(T0 + 300 * US, 2)]
    loss = [f for f in find(analyze_rows(rows)) if f["kind"] == "capture_loss"]
    assert len(loss) == 1 and "RTTs of these flows are unreliable" in loss[0]["evidence"]


def psn_bug(ack_psn):
    """A READ of 3 PSNs (path MTU 1024 from its FIRST response), a SEND reusing its last PSN, and
    the responder's ACK with `ack_psn` (the soft-RoCE captures: 0xffffff)."""
    rd = dict(src=B, dst=A, qp=0xC1, syndrome=0x1F)
    return [req(T0, 7488511, opcode=READ_REQUEST, payload=0, dmalen=2400, ackreq=True),
            dict(ts=T0 + 9 * US, psn=7488511, opcode=READ_FIRST, payload=1024, **rd),
            dict(ts=T0 + 9 * US + 1, psn=7488512, opcode=READ_MIDDLE, payload=1024, **dict(rd, syndrome=None)),
            dict(ts=T0 + 9 * US + 2, psn=7488513, opcode=READ_LAST, payload=352, **rd),
            req(T0 + 40 * US, 7488513, opcode=SEND_ONLY, payload=16, ackreq=True),
            ack(T0 + 41 * US, ack_psn)]


def test_psn_reuse_says_the_message_is_silently_lost_and_the_qp_does_not_stall():
    found = {f["kind"]: f for f in find(analyze_rows(psn_bug(7488513)))}
    assert sorted(found) == ["psn_reuse"]
    assert "it ACKs it again and does not execute it, so the requester sees success and the message is " \
           "silently lost; the QP does not stall" in found["psn_reuse"]["summary"]


@pytest.mark.parametrize("chunk", [None, 1])
def test_an_ack_for_a_psn_never_sent_is_a_conformance_finding(chunk):
    result = analyze_rows(psn_bug(0xFFFFFF), chunk=chunk)
    ev = result.events_table.data
    assert [(k, p, d) for k, p, d in zip(ev["kind"], ev["psn"], ev["detail"]) if k == "ack_unsent_psn"] == [
        ("ack_unsent_psn", 0xFFFFFF, "response to a PSN the requester never sent (it sent 7488511..7488513)")]
    found = sorted((f["severity"], f["kind"]) for f in find(result))
    assert found == [("warning", "ack_unsent_psn"), ("warning", "psn_reuse")]


def test_acks_for_requests_the_capture_missed_are_not_flagged():
    # the capture starts mid-stream (ACK 100 before the first request seen, 105) and misses the
    # last requests (ACK 400 beyond the highest seen, 110): both are normal
    rows = [ack(T0, 100), req(T0 + US, 105, ackreq=True), req(T0 + 2 * US, 110, ackreq=True),
            ack(T0 + 5 * US, 110), ack(T0 + 9 * US, 400)]
    assert "ack_unsent_psn" not in list(analyze_rows(rows).events_table.data["kind"])


def two_qps_overlapping(seed):
    """Two QPs between A and B whose request PSNs start within 60 of each other just below 2^24
    (both cross it); ACKs coalesced at random."""
    rng = random.Random(seed)
    rows, t = [], T0
    qps = ((0x11, 0x21), (0x12, 0x22))            # (A's QPN: ACK dest, B's QPN: request dest)
    nxt = [MOD - rng.randint(1, 60), MOD - rng.randint(1, 60)]
    acked = list(nxt)
    for _ in range(rng.randint(20, 80)):
        k = rng.randrange(2)
        t += rng.randint(100, 3000)
        if rng.random() < 0.6:
            rows.append(req(t, nxt[k] % MOD, qp=qps[k][1], ackreq=rng.random() < 0.5))
            nxt[k] += 1
        elif nxt[k] > acked[k]:
            rows.append(ack(t, (nxt[k] - 1) % MOD, qp=qps[k][0]))
            acked[k] = nxt[k]
    return rows


@pytest.mark.parametrize("seed", [86, 180, 220])
@pytest.mark.parametrize("chunk", [None, 5, 13])
def test_qps_whose_psn_ranges_overlap_never_pair_crosswise(seed, chunk):
    right = {flow_id(A, B, 0x21): 0x11, flow_id(A, B, 0x22): 0x12, flow_id(B, A, 0x11): 0x21,
             flow_id(B, A, 0x12): 0x22}
    d = analyze_rows(two_qps_overlapping(seed), chunk=chunk).flows_table.data
    got = dict(zip(d["flow"], d["peer_qp"].tolist()))
    assert {f: p for f, p in got.items() if p >= 0 and right[f] != p} == {}
