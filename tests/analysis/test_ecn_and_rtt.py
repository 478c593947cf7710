"""ECN marks, CNPs and RTT at the capture point."""
import random

from helpers.analysis import A, B, CNP, T0, ack, analyze_rows, flow_id, flow_row, req

REQ = flow_id(A, B, 0xD2)
RESP = flow_id(B, A, 0xC1)
US = 1000


def test_ce_marked_packets_and_cnps_are_counted_on_the_flow_they_travel_in():
    rows = [req(T0 + i * US, i, ecn=e) for i, e in enumerate((2, 3, 3, 0))]
    rows += [dict(ts=T0 + (5 + i) * US, psn=0, opcode=CNP, src=B, dst=A, qp=0xC1, ecn=1) for i in range(2)]
    res = analyze_rows(rows)
    r = flow_row(res, REQ)
    assert (r["ecn_ce"], r["ecn_not_ect"], r["cnp_packets"]) == ("2", "1", "0")
    r = flow_row(res, RESP)
    assert (r["ecn_ce"], r["ecn_not_ect"], r["cnp_packets"], r["data_packets"], r["transport"]) == (
        "0", "0", "2", "0", "CNP")
    t = res.events_table
    assert list(zip(t.data["kind"], t.data["psn"].tolist())) == [("ecn_ce", 1), ("ecn_ce", 2), ("cnp", -1), ("cnp", -1)]
    assert res.summary["detected"]["cnp_packets"] == 2


def test_rtt_percentiles_are_nearest_rank_over_ackreq_requests():
    rtts = list(range(1, 101))  # microseconds
    random.Random(4).shuffle(rtts)
    rows = []
    for i, rtt in enumerate(rtts):
        rows.append(req(T0 + i * 1000 * US, i, ackreq=True))
        rows.append(ack(T0 + i * 1000 * US + rtt * US, i))
    r = flow_row(analyze_rows(rows), REQ)
    assert (r["rtt_p50_us"], r["rtt_p99_us"]) == ("50.000", "99.000")


def test_a_coalesced_ack_answers_every_request_it_covers():
    rows = [req(T0, 0, ackreq=True), req(T0 + US, 1, ackreq=False), req(T0 + 2 * US, 2, ackreq=True),
            ack(T0 + 10 * US, 2)]
    r = flow_row(analyze_rows(rows), REQ)
    assert (r["rtt_p50_us"], r["rtt_p99_us"]) == ("8.000", "10.000")


def test_an_ack_older_than_the_request_does_not_answer_it():
    rows = [req(T0, 0, ackreq=True), req(T0 + US, 1, ackreq=True), ack(T0 + 2 * US, 0), ack(T0 + 7 * US, 1)]
    r = flow_row(analyze_rows(rows), REQ)
    assert (r["rtt_p50_us"], r["rtt_p99_us"]) == ("2.000", "6.000")


def test_goodput_counts_payload_sent_once_over_the_flow_duration():
    # one retransmission (of PSN 1, 3 us after it: the same frame within 2 us would be a capture duplicate)
    rows = [req(T0 + i * US, i) for i in range(4)] + [req(T0 + 4 * US, 1)]
    r = flow_row(analyze_rows(rows), REQ)
    assert r["goodput_gbps"] == f"{4 * 1024 * 8 / 4000:.6f}"
