"""ops.csv, rule by rule, on hand-built packets: which packets make one operation, what
completes it (coalesced ACKs, NAKs, a READ's last response, an ATOMIC ACKNOWLEDGE), resends,
re-reads, holes the capture missed, UD and UC, the READ depth, the row budget."""
from __future__ import annotations

from helpers.analysis import (
    ATOMIC_ACK,
    READ_FIRST,
    READ_LAST,
    READ_MIDDLE,
    READ_ONLY,
    READ_REQUEST,
    SEND_FIRST,
    SEND_LAST,
    SEND_MIDDLE,
    SEND_ONLY,
    SYN_NAK_SEQ,
    SYN_RNR,
    T0,
    UD_SEND_ONLY,
    WRITE_FIRST,
    WRITE_LAST,
    WRITE_MIDDLE,
    A,
    B,
    ack,
    analyze_rows,
    make_batch,
    req,
)

from roceview.analysis import Analyzer
from roceview.analysis.ops import OpTracker

US = 1000
CMP_SWAP, UC_SEND_ONLY = 0x13, 0x24


def ops(rows, **options) -> list[dict]:
    result = analyze_rows(rows, **options)
    return [dict(zip(result.ops_table.columns, r)) for r in result.ops_table.text_rows()]


def resp(ts, psn, opcode, payload=1024, **kw) -> dict:
    return ack(ts, psn, **kw) | {"opcode": opcode, "payload": payload,
                                 "syndrome": None if opcode == READ_MIDDLE else kw.get("syndrome", 0x1F)}


def test_a_coalesced_ack_completes_every_operation_it_covers():
    rows = [req(T0, 10), req(T0 + US, 11), req(T0 + 2 * US, 12, ackreq=True), ack(T0 + 5 * US, 12)]
    got = ops(rows)
    assert [o["first_psn"] for o in got] == ["10", "11", "12"]
    assert {o["completion_frame"] for o in got} == {"4"}
    assert [o["latency_us"] for o in got] == ["5.000", "4.000", "3.000"]
    assert [o["outstanding"] for o in got] == ["0", "0", "0"]


def test_a_nak_acknowledges_what_precedes_its_psn_and_the_resend_completes_later():
    rows = [req(T0, 10), req(T0 + US, 11, ackreq=True), ack(T0 + 3 * US, 11, syndrome=SYN_NAK_SEQ),
            req(T0 + 4 * US, 11, ackreq=True), ack(T0 + 6 * US, 11)]
    first, second = ops(rows)
    assert (first["completion_frame"], first["retransmitted"], first["packets"]) == ("3", "false", "1")
    assert (second["completion_frame"], second["retransmitted"], second["packets"]) == ("5", "true", "2")
    assert second["latency_us"] == "5.000"          # from its first send


def test_an_rnr_nak_does_not_complete_the_send_it_refuses():
    rows = [req(T0, 10, SEND_ONLY, ackreq=True), ack(T0 + 2 * US, 10, syndrome=SYN_RNR),
            req(T0 + 50 * US, 10, SEND_ONLY, ackreq=True), ack(T0 + 52 * US, 10)]
    (only,) = ops(rows)
    assert (only["completion_frame"], only["latency_us"], only["packets"]) == ("4", "52.000", "2")


def test_a_read_completes_with_its_last_response_never_with_an_ack_beyond_it():
    read = dict(ts=T0, psn=20, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=3000, ackreq=True)
    rows = [read, req(T0 + 10, 23, SEND_ONLY, ackreq=True), resp(T0 + US, 20, READ_FIRST),
            resp(T0 + US + 100, 21, READ_MIDDLE), ack(T0 + 3 * US, 23)]
    r, s = ops(rows)
    assert (r["op"], r["bytes"], r["completion_frame"], r["latency_us"]) == ("READ", "3000", "", "")
    assert (s["op"], s["completion_frame"]) == ("SEND", "5")      # a READ responses' capture loss blocks nothing
    rows.insert(4, resp(T0 + US + 200, 22, READ_LAST, payload=952))
    r, s = ops(rows)
    assert (r["completion_frame"], r["last_frame"], r["end_ts"][-9:]) == ("5", "5", "000001200")


def test_a_4kib_read_at_path_mtu_4096_is_one_response_and_one_psn():
    rows = [dict(ts=T0 + k * 5 * US, psn=100 + 2 * k, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=4096,
                 ackreq=True) for k in range(3)]
    rows += [resp(T0 + k * 5 * US + US, 100 + 2 * k, READ_ONLY, payload=4096) for k in range(3)]
    rows += [req(T0 + k * 5 * US + 10, 101 + 2 * k, SEND_ONLY, payload=64, ackreq=True) for k in range(3)]
    rows += [ack(T0 + k * 5 * US + 2 * US, 101 + 2 * k) for k in range(3)]
    rows.sort(key=lambda r: r["ts"])
    got = ops(rows, pmtu=4096)
    assert [(o["op"], o["first_psn"], o["bytes"], o["packets"]) for o in got] == [
        ("READ", "100", "4096", "1"), ("SEND", "101", "64", "1"), ("READ", "102", "4096", "1"),
        ("SEND", "103", "64", "1"), ("READ", "104", "4096", "1"), ("SEND", "105", "64", "1")]
    assert all(o["completion_frame"] and o["retransmitted"] == "false" for o in got)
    assert [o["outstanding"] for o in got] == ["0", "1", "0", "1", "0", "1"]


def test_an_atomic_completes_with_its_atomic_acknowledge():
    rows = [req(T0, 30, CMP_SWAP, payload=0, ackreq=True), ack(T0 + US, 30),
            ack(T0 + 2 * US, 30) | {"opcode": ATOMIC_ACK}]
    (only,) = ops(rows)
    assert (only["op"], only["bytes"], only["completion_frame"], only["latency_us"]) == ("CMP_SWAP", "8", "3", "2.000")


def test_a_re_read_soon_after_the_read_completed_reopens_it():
    read = dict(ts=T0, psn=40, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=2048, ackreq=True)
    reread = read | {"ts": T0 + 3 * US, "psn": 41, "dmalen": 1024}
    rows = [read, resp(T0 + US, 40, READ_FIRST), resp(T0 + 2 * US, 41, READ_LAST), reread,
            resp(T0 + 5 * US, 41, READ_ONLY)]
    (only,) = ops(rows, pmtu=1024)
    assert (only["packets"], only["retransmitted"], only["bytes"]) == ("2", "true", "2048")
    assert (only["completion_frame"], only["latency_us"]) == ("5", "5.000")


def test_a_resend_long_after_the_completion_is_a_late_packet():
    rows = [req(T0, 50, ackreq=True), ack(T0 + 2 * US, 50), req(T0 + 2_000 * US, 50, ackreq=True),
            ack(T0 + 2_002 * US, 50)]
    result = analyze_rows(rows)
    (only,) = result.ops_table.text_rows()
    assert dict(zip(result.ops_table.columns, only))["completion_frame"] == "2"
    assert result.summary["operations"]["late_packets"] == 1


def test_a_middle_after_a_lost_first_starts_right_after_the_previous_message():
    rows = [req(T0, 60, SEND_ONLY, ackreq=True), req(T0 + 2 * US, 62, SEND_MIDDLE),
            req(T0 + 3 * US, 63, SEND_LAST, payload=100, ackreq=True),
            ack(T0 + 4 * US, 60), ack(T0 + 4 * US + 1, 61, syndrome=SYN_NAK_SEQ),
            req(T0 + 5 * US, 61, SEND_FIRST), req(T0 + 6 * US, 62, SEND_MIDDLE),
            req(T0 + 7 * US, 63, SEND_LAST, payload=100, ackreq=True), ack(T0 + 9 * US, 63)]
    one, two = ops(rows)
    assert (two["first_psn"], two["first_frame"], two["bytes"], two["packets"]) == ("61", "2", "2148", "5")
    assert (two["retransmitted"], two["completion_frame"], one["completion_frame"]) == ("true", "9", "4")


def test_a_resent_only_into_a_hole_is_an_operation_of_its_own():
    rows = [req(T0, 70, SEND_ONLY), req(T0 + US, 72, SEND_ONLY, ackreq=True), ack(T0 + 2 * US, 71, syndrome=SYN_NAK_SEQ),
            req(T0 + 3 * US, 71, SEND_ONLY), req(T0 + 3 * US + 10, 72, SEND_ONLY, ackreq=True), ack(T0 + 5 * US, 72)]
    got = ops(rows)
    assert [(o["first_psn"], o["first_frame"], o["packets"], o["retransmitted"]) for o in got] == [
        ("70", "1", "1", "false"), ("72", "2", "2", "true"), ("71", "4", "1", "true")]
    assert [o["completion_frame"] for o in got] == ["3", "6", "6"]


def test_ud_sends_and_uc_messages_have_no_completion():
    rows = [dict(ts=T0, psn=5, opcode=UD_SEND_ONLY, src=A, dst=B, qp=1, payload=256),
            req(T0 + US, 9, UC_SEND_ONLY, payload=100, qp=0x44), ack(T0 + 2 * US, 9, qp=0x45)]
    ud, uc = ops(rows)
    assert (ud["op"], ud["dest_qp"], ud["bytes"], ud["packets"], ud["latency_us"]) == ("SEND", "0x000001", "256", "1", "")
    assert (uc["op"], uc["completion_frame"], uc["latency_us"]) == ("SEND", "", "")


def test_the_row_budget_keeps_the_first_operations_and_counts_the_rest():
    rows = [req(T0 + k * US, k, ackreq=True) for k in range(10)] + [ack(T0 + 20 * US, 9)]
    an = Analyzer()
    an.ops = OpTracker(max_rows=4)
    for k in range(0, len(rows), 3):                      # chunks: the budget is not per chunk
        an.feed(make_batch(rows[k:k + 3]))
    result = an.finish()
    assert result.ops_table.text_column("first_psn") == ["0", "1", "2", "3"]
    assert result.summary["operations"] == {"count": 10, "listed": 4, "not_listed": 6, "late_packets": 0,
                                            "unmatched_packets": 0}
    (stats,) = result.op_stats_table.text_rows()
    assert dict(zip(result.op_stats_table.columns, stats))["operations"] == "10"


def test_a_middle_of_another_family_starts_a_message_and_its_resent_first_gives_its_start():
    """A SEND's LAST and the next RDMA WRITE's FIRST lost before the capture point: the WRITE
    MIDDLE cannot continue the SEND (IBTA 9.7.5.1: a MIDDLE follows its own kind's FIRST), so it
    starts an operation; the resent FIRST below it gives that operation its first PSN."""
    fresh = [req(T0, 80, SEND_FIRST), req(T0 + 100, 81, SEND_MIDDLE),
             req(T0 + 400, 84, WRITE_MIDDLE), req(T0 + 500, 85, WRITE_LAST, payload=100, ackreq=True)]
    send, write = ops(fresh)
    assert (send["op"], send["first_psn"], send["packets"], write["op"], write["first_psn"], write["packets"]) == (
        "SEND", "80", "2", "WRITE", "84", "2")
    rows = fresh + [ack(T0 + 2 * US, 82, syndrome=SYN_NAK_SEQ),
                    req(T0 + 3 * US, 82, SEND_LAST, payload=100), req(T0 + 3 * US + 100, 83, WRITE_FIRST),
                    req(T0 + 3 * US + 200, 84, WRITE_MIDDLE),
                    req(T0 + 3 * US + 300, 85, WRITE_LAST, payload=100, ackreq=True), ack(T0 + 5 * US, 85)]
    send, write = ops(rows)
    assert (send["first_psn"], send["packets"], send["bytes"], send["completion_frame"]) == ("80", "3", "2148", "10")
    assert (write["first_psn"], write["first_frame"], write["packets"], write["bytes"]) == ("83", "3", "5", "2148")
    assert (write["retransmitted"], write["completion_frame"]) == ("true", "10")


def test_a_resent_read_request_between_a_reads_span_and_the_next_operation_is_an_operation():
    """A READ request lost before the capture point between two READs: its resend lies in the
    range of the READ before it (up to the next operation), past that READ's own PSNs. (The
    resends 4 us later: a byte-identical frame within copies.DUPLICATE_WINDOW_NS is a copy.)"""
    def read(ts, psn, dmalen):
        return dict(ts=ts, psn=psn, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=dmalen, ackreq=True)

    rows = [read(T0, 90, 2048), read(T0 + 200, 93, 1024),
            resp(T0 + US, 90, READ_FIRST), resp(T0 + US + 100, 91, READ_LAST),
            ack(T0 + US + 200, 92, syndrome=SYN_NAK_SEQ), read(T0 + 4 * US, 92, 512), read(T0 + 4 * US + 100, 93, 1024),
            resp(T0 + 5 * US, 92, READ_ONLY, payload=512), resp(T0 + 5 * US + 100, 93, READ_ONLY)]
    got = ops(rows)
    assert [(o["first_psn"], o["packets"], o["bytes"], o["completion_frame"]) for o in got] == [
        ("90", "1", "2048", "4"), ("93", "2", "1024", "9"), ("92", "1", "512", "8")]


def test_a_resent_only_in_a_chunk_without_open_operations_is_a_late_packet():
    """(A chunk whose one request is a resend, every operation before it final: no operation
    holds it, none is made for a PSN its space already gave up.)"""
    rows = [req(T0, 10, SEND_ONLY, ackreq=True), ack(T0 + 2 * US, 10), ack(T0 + 2000 * US, 10, ip_id=9),
            req(T0 + 3000 * US, 10, SEND_ONLY, ackreq=True)]
    result = analyze_rows(rows, chunk=1)
    (only,) = [dict(zip(result.ops_table.columns, r)) for r in result.ops_table.text_rows()]
    assert (only["packets"], only["completion_frame"]) == ("1", "2")
    assert result.summary["operations"]["late_packets"] == 1
