"""PSN analysis rules of issue 4, each on the smallest constructed traffic that shows it."""
from helpers.analysis import (A, ACKNOWLEDGE, B, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST,
                              SEND_ONLY, SYN_ACK, SYN_NAK_INVALID, SYN_NAK_SEQ, SYN_RNR, T0, WRITE_FIRST,
                              WRITE_LAST, WRITE_MIDDLE, ack, analyze_rows, flow_id, flow_row, req)

REQ = flow_id(A, B, 0xD2)
RESP = flow_id(B, A, 0xC1)
US = 1000


def counts(row, *names):
    return {n: row[n] for n in names}


def events(result, kind=None):
    t = result.events_table
    rows = list(zip(t.data["flow"], t.data["kind"], t.data["psn"].tolist()))
    return [r for r in rows if kind is None or r[1] == kind]


def test_clean_traffic_has_no_gaps_retransmissions_or_naks():
    rows = []
    for i in range(10):
        rows.append(req(T0 + i * 10 * US, 100 + i, ackreq=True))
        rows.append(ack(T0 + i * 10 * US + 2 * US, 100 + i))
    res = analyze_rows(rows)
    r = flow_row(res, REQ)
    assert counts(r, "packets", "data_packets", "payload_bytes", "gap_events", "retransmitted_packets",
                  "unrecovered_psns", "peer_qp", "transport", "rtt_p50_us", "rtt_p99_us") == {
        "packets": "10", "data_packets": "10", "payload_bytes": "10240", "gap_events": "0",
        "retransmitted_packets": "0", "unrecovered_psns": "0", "peer_qp": "0x0000c1", "transport": "RC",
        "rtt_p50_us": "2.000", "rtt_p99_us": "2.000"}
    assert counts(flow_row(res, RESP), "acks", "naks_seq", "data_packets", "peer_qp") == {
        "acks": "10", "naks_seq": "0", "data_packets": "0", "peer_qp": "0x0000d2"}
    assert events(res) == []


def test_drop_seen_before_the_loss_point_is_a_retransmission_without_gap():
    rows = [req(T0 + i * US, i) for i in range(5)]
    rows.append(ack(T0 + 6 * US, 2, syndrome=SYN_NAK_SEQ))
    rows += [req(T0 + (7 + i) * US, 2 + i) for i in range(3)]
    res = analyze_rows(rows)
    r = flow_row(res, REQ)
    assert counts(r, "packets", "gap_events", "gap_psns", "retransmitted_packets", "retransmitted_bytes",
                  "unrecovered_psns") == {"packets": "8", "gap_events": "0", "gap_psns": "0",
                                          "retransmitted_packets": "3", "retransmitted_bytes": str(3 * 1088),
                                          "unrecovered_psns": "0"}
    assert flow_row(res, RESP)["naks_seq"] == "1"
    assert [e[2] for e in events(res, "retransmit")] == [2, 3, 4]
    assert events(res, "nak_seq") == [(RESP, "nak_seq", 2)]
    assert events(res, "timeout_retransmit") == []  # the NAK explains it


def test_drop_seen_after_the_loss_point_is_a_gap_then_nak_then_retransmission():
    rows = [req(T0 + i * US, psn) for i, psn in enumerate((0, 1, 3, 4))]
    rows.append(ack(T0 + 5 * US, 2, syndrome=SYN_NAK_SEQ))
    rows += [req(T0 + (6 + i) * US, 2 + i) for i in range(3)]
    res = analyze_rows(rows)
    r = flow_row(res, REQ)
    assert counts(r, "gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets") == {
        "gap_events": "1", "gap_psns": "1", "unrecovered_psns": "0", "retransmitted_packets": "3"}
    assert events(res, "gap") == [(REQ, "gap", 3)]
    assert res.events_table.data["detail"][0] == "1 PSN skipped from 2"


def test_skipped_psns_never_seen_again_are_unrecovered():
    rows = [req(T0 + i * US, psn) for i, psn in enumerate((0, 1, 4, 5, 9, 3))]
    r = flow_row(analyze_rows(rows), REQ)
    # gaps: 2..3 (2 PSNs) and 6..8 (3 PSNs); PSN 3 comes back later (a retransmission)
    assert counts(r, "gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets") == {
        "gap_events": "2", "gap_psns": "5", "unrecovered_psns": "4", "retransmitted_packets": "1"}


def test_retransmission_without_nak_from_the_peer_is_a_timeout_retransmission():
    rows = [req(T0 + i * US, i) for i in range(4)]
    rows.append(ack(T0 + 5 * US, 2))
    rows.append(req(T0 + 1000 * US, 3))
    res = analyze_rows(rows)
    assert events(res, "timeout_retransmit") == [(REQ, "timeout_retransmit", 3)]
    assert flow_row(res, REQ)["retransmitted_packets"] == "1"


def test_psn_wraps_at_2_pow_24_without_gap_or_retransmission():
    rows = [req(T0 + i * US, psn) for i, psn in enumerate((0xFFFFFE, 0xFFFFFF, 0, 1, 2))]
    rows.append(ack(T0 + 9 * US, 2))
    r = flow_row(analyze_rows(rows), REQ)
    assert counts(r, "gap_events", "retransmitted_packets") == {"gap_events": "0", "retransmitted_packets": "0"}


def test_gap_across_the_psn_wrap_counts_the_skipped_psns_serially():
    rows = [req(T0 + i * US, psn) for i, psn in enumerate((0xFFFFFD, 0xFFFFFE, 2, 0xFFFFFF))]
    res = analyze_rows(rows)
    r = flow_row(res, REQ)
    # 0xFFFFFF, 0, 1 skipped; 0xFFFFFF comes back: a retransmission that recovers one PSN
    assert counts(r, "gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets") == {
        "gap_events": "1", "gap_psns": "3", "unrecovered_psns": "2", "retransmitted_packets": "1"}
    assert res.events_table.data["detail"][0] == f"3 PSNs skipped from {0xFFFFFF}"


def read_exchange(dmalen=3000, next_psn=13):
    rows = [dict(ts=T0, psn=10, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=dmalen, ackreq=True)]
    for i, (opc, size) in enumerate(((READ_FIRST, 1024), (READ_MIDDLE, 1024), (READ_LAST, dmalen - 2048))):
        rows.append(dict(ts=T0 + (5 + i) * US, psn=10 + i, opcode=opc, src=B, dst=A, qp=0xC1, payload=size,
                         syndrome=SYN_ACK if opc != READ_MIDDLE else None))
    rows.append(req(T0 + 10 * US, next_psn, opcode=SEND_ONLY, payload=8, ackreq=True))
    rows.append(ack(T0 + 12 * US, next_psn))
    return rows


def test_read_request_consumes_ceil_len_over_pmtu_psns():
    res = analyze_rows(read_exchange())  # 3000 bytes / PMTU 1024 (from the FIRST/MIDDLE payloads) = 3
    r = flow_row(res, REQ)
    assert counts(r, "data_packets", "gap_events", "retransmitted_packets", "rtt_p50_us") == {
        "data_packets": "2", "gap_events": "0", "retransmitted_packets": "0", "rtt_p50_us": "2.000"}
    assert res.summary["pmtu"] == 1024


def test_read_responses_are_data_packets_of_the_response_space():
    res = analyze_rows(read_exchange())
    r = flow_row(res, RESP)
    assert counts(r, "data_packets", "payload_bytes", "acks", "gap_events", "retransmitted_packets") == {
        "data_packets": "3", "payload_bytes": "3000", "acks": "1", "gap_events": "0", "retransmitted_packets": "0"}
    assert flow_row(res, REQ)["rtt_p99_us"] == "5.000"  # READ request -> READ_FIRST


def test_request_after_a_read_skipping_part_of_its_span_is_a_gap():
    res = analyze_rows(read_exchange(next_psn=14))
    assert counts(flow_row(res, REQ), "gap_events", "gap_psns") == {"gap_events": "1", "gap_psns": "1"}


def test_request_inside_a_read_span_is_a_retransmission():
    res = analyze_rows(read_exchange(next_psn=12))
    assert flow_row(res, REQ)["retransmitted_packets"] == "1"


def test_pmtu_option_overrides_the_inferred_path_mtu():
    res = analyze_rows(read_exchange(next_psn=11), pmtu=4096)  # 3000 / 4096 -> 1 PSN
    assert counts(flow_row(res, REQ), "gap_events", "retransmitted_packets") == {
        "gap_events": "0", "retransmitted_packets": "0"}


def test_rnr_nak_is_counted_and_its_retransmission_is_not_a_timeout():
    rows = [req(T0, 5, opcode=SEND_ONLY, payload=64, ackreq=True),
            ack(T0 + 2 * US, 5, syndrome=SYN_RNR),
            req(T0 + 100 * US, 5, opcode=SEND_ONLY, payload=64, ackreq=True),
            ack(T0 + 103 * US, 5)]
    res = analyze_rows(rows)
    assert counts(flow_row(res, RESP), "acks", "naks_rnr", "naks_seq", "naks_other") == {
        "acks": "1", "naks_rnr": "1", "naks_seq": "0", "naks_other": "0"}
    assert flow_row(res, REQ)["retransmitted_packets"] == "1"
    assert [e[1] for e in events(res)] == ["nak_rnr", "retransmit"]
    assert res.events_table.data["detail"][0] == "AETH syndrome 0x2e: RNR NAK, timer code 14"
    # Karn: the first transmission's only sample is ambiguous; the NAK answers it
    assert flow_row(res, REQ)["rtt_p50_us"] == "2.000"


def test_nak_codes_other_than_psn_sequence_error_are_naks_other():
    rows = [req(T0, 0), ack(T0 + US, 0, syndrome=SYN_NAK_INVALID)]
    res = analyze_rows(rows)
    assert counts(flow_row(res, RESP), "naks_other", "naks_seq") == {"naks_other": "1", "naks_seq": "0"}
    assert res.events_table.data["detail"][0] == "AETH syndrome 0x61: invalid request"


def test_ack_psns_only_move_the_highest_seen_mark_of_the_response_space():
    # ACKs coalesce (0, 3) without gap events; a READ response after ACK 3 expects PSN 4
    rows = [ack(T0, 0), ack(T0 + US, 3),
            dict(ts=T0 + 2 * US, psn=4, opcode=0x10, src=B, dst=A, qp=0xC1, payload=16, syndrome=SYN_ACK),
            ack(T0 + 3 * US, 2)]
    r = flow_row(analyze_rows(rows), RESP)
    assert counts(r, "gap_events", "retransmitted_packets", "data_packets", "acks") == {
        "gap_events": "0", "retransmitted_packets": "0", "data_packets": "1", "acks": "3"}


def test_multi_packet_write_infers_pmtu_and_counts_each_packet():
    rows = [req(T0, 0, opcode=WRITE_FIRST, payload=2048), req(T0 + US, 1, opcode=WRITE_MIDDLE, payload=2048),
            req(T0 + 2 * US, 2, opcode=WRITE_LAST, payload=100, ackreq=True), ack(T0 + 4 * US, 2)]
    res = analyze_rows(rows)
    assert res.summary["pmtu"] == 2048
    assert counts(flow_row(res, REQ), "data_packets", "payload_bytes") == {"data_packets": "3", "payload_bytes": "4196"}


def test_ud_flows_have_no_peer():
    rows = [dict(ts=T0, psn=1, opcode=0x64, src=A, dst=B, qp=1, payload=256),
            dict(ts=T0 + US, psn=7, opcode=0x64, src=B, dst=A, qp=1, payload=256)]
    res = analyze_rows(rows)
    assert flow_row(res, flow_id(A, B, 1))["peer_qp"] == ""
    assert flow_row(res, flow_id(A, B, 1))["transport"] == "UD"


def test_acknowledge_opcode_constant_matches_ibta():
    assert ACKNOWLEDGE == 0x11
