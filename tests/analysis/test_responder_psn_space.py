"""The responder's PSN space: coalesced ACKs skip PSNs legitimately; NAKs acknowledge only
the PSNs before their own (IBTA 9.7.5.1.2-3). Found by the generator's network-loss sample."""
from helpers.analysis import (A, B, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST, SYN_NAK_SEQ, T0, ack, analyze_rows, flow_id, flow_row, req)

REQ = flow_id(A, B, 0xD2)
RESP = flow_id(B, A, 0xC1)
US = 1000


def read_response(ts, psn, opcode):
    return dict(ts=ts, psn=psn, opcode=opcode, src=B, dst=A, qp=0xC1, payload=1024,
                syndrome=None if opcode == READ_MIDDLE else 0x1F)


def test_read_response_after_coalesced_acks_is_not_a_gap():
    rows = [req(T0 + i * US, 10 + i) for i in range(5)]                      # WRITEs 10..14
    rows.append(req(T0 + 5 * US, 15, opcode=READ_REQUEST, payload=0, dmalen=2048))  # READ 15..16
    rows.append(ack(T0 + 6 * US, 12))                                         # coalesced ACK
    rows.append(read_response(T0 + 7 * US, 15, READ_FIRST))                   # skips 13, 14: fine
    rows.append(read_response(T0 + 8 * US, 16, READ_LAST))
    r = flow_row(analyze_rows(rows, pmtu=1024), RESP)
    assert (r["gap_events"], r["gap_psns"], r["unrecovered_psns"], r["retransmitted_packets"]) == ("0", "0", "0", "0")


def test_missing_read_response_middle_is_a_gap_in_the_response_space():
    rows = [req(T0, 20, opcode=READ_REQUEST, payload=0, dmalen=3072)]         # READ 20..22
    rows.append(read_response(T0 + 2 * US, 20, READ_FIRST))
    rows.append(read_response(T0 + 4 * US, 22, READ_LAST))                    # 21 never seen
    r = flow_row(analyze_rows(rows, pmtu=1024), RESP)
    assert (r["gap_events"], r["gap_psns"], r["unrecovered_psns"]) == ("1", "1", "1")


def test_read_response_at_a_naks_psn_is_not_a_retransmission():
    rows = [req(T0, 30), req(T0 + 1 * US, 32)]                                # 31 lost on the way
    rows.append(ack(T0 + 2 * US, 31, syndrome=SYN_NAK_SEQ))                   # NAK: expected 31
    rows.append(req(T0 + 3 * US, 31, opcode=READ_REQUEST, payload=0, dmalen=512))  # go-back-N
    rows.append(req(T0 + 4 * US, 32))
    rows.append(dict(ts=T0 + 5 * US, psn=31, opcode=0x10, src=B, dst=A, qp=0xC1, payload=512, syndrome=0x1F))
    rows.append(ack(T0 + 6 * US, 32))
    res = analyze_rows(rows, pmtu=1024)
    r = flow_row(res, RESP)
    assert (r["retransmitted_packets"], r["gap_events"], r["naks_seq"], r["acks"]) == ("0", "0", "1", "1")
    assert flow_row(res, REQ)["retransmitted_packets"] == "2"   # the resent 31 and 32


def test_ud_psns_say_nothing_about_loss():
    from helpers.analysis import UD_SEND_ONLY

    rows = [req(T0 + i * US, psn, opcode=UD_SEND_ONLY, qp=1) for i, psn in enumerate((5, 900, 7, 40000))]
    r = flow_row(analyze_rows(rows), flow_id(A, B, 1))
    assert (r["packets"], r["data_packets"], r["gap_events"], r["gap_psns"], r["retransmitted_packets"],
            r["unrecovered_psns"]) == ("4", "4", "0", "0", "0", "0")


def test_a_send_inside_its_own_reads_psn_span_is_psn_reuse_not_a_timeout():
    # READ at 10 takes 3 PSNs (10..12); the next SEND must be 13 but reuses 12 (sanderw71 bug)
    rows = [req(T0, 10, opcode=READ_REQUEST, payload=0, dmalen=3000, ackreq=True),
            dict(ts=T0 + 1 * US, psn=10, opcode=READ_FIRST, src=B, dst=A, qp=0xC1, payload=1024, syndrome=0x1F),
            dict(ts=T0 + 2 * US, psn=11, opcode=READ_MIDDLE, src=B, dst=A, qp=0xC1, payload=1024, syndrome=None),
            dict(ts=T0 + 3 * US, psn=12, opcode=READ_LAST, src=B, dst=A, qp=0xC1, payload=952, syndrome=0x1F),
            req(T0 + 4 * US, 12, opcode=0x04, ackreq=True)]
    for chunk in (None, 1):
        res = analyze_rows(rows, chunk=chunk, pmtu=1024)
        kinds = [k for k in res.events_table.data["kind"]]
        assert kinds.count("psn_reuse") == 1 and "timeout_retransmit" not in kinds, chunk
        assert flow_row(res, REQ)["retransmitted_packets"] == "1"


def test_a_reissued_read_inside_the_span_is_not_psn_reuse():
    rows = [req(T0, 10, opcode=READ_REQUEST, payload=0, dmalen=3000),
            req(T0 + 5 * US, 11, opcode=READ_REQUEST, payload=0, dmalen=2000)]
    kinds = list(analyze_rows(rows, pmtu=1024).events_table.data["kind"])
    assert "psn_reuse" not in kinds
