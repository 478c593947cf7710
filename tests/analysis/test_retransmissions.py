"""Capture duplicates are not retransmissions; a timeout retransmission
needs an ACK-timeout delay from the original send."""
import pytest

from helpers.analysis import A, B, T0, analyze_rows, flow_id, flow_row, req, ack
from roceview.diagnose import find, load_config

US, MS = 1000, 1_000_000
REQ = flow_id(A, B, 0xD2)


def double_mirror():
    """Every frame of a healthy exchange delivered twice, 300 ns apart (ingress + egress mirror)."""
    rows = []
    for i in range(4):
        t = T0 + i * 10 * US
        for r in (req(t, 10 + i, ackreq=True), ack(t + 4 * US, 10 + i)):
            rows += [r, dict(r, ts=r["ts"] + 300)]
    return rows


@pytest.mark.parametrize("chunk", [None, 1, 5])
def test_a_double_mirror_is_duplicate_frames_not_retransmissions(chunk):
    result = analyze_rows(double_mirror(), chunk=chunk)
    row = flow_row(result, REQ)
    assert (row["retransmitted_packets"], row["gap_events"], row["data_packets"]) == ("0", "0", "4")   # each once
    d = result.events_table.data
    assert set(d["kind"]) == {"duplicate"}
    assert [p for p, f in zip(d["psn"], d["flow"]) if f == flow_row(result, REQ)["flow"]] == [10, 11, 12, 13]
    # these rows carry no IPv4 identification: an ACK's copy is not told from a repeated ACK
    assert result.summary["detected"]["duplicate_frames"] == len(d["kind"]) == 4
    found = [(f["severity"], f["kind"]) for f in find(result)]
    assert found == [("info", "duplicate_frames")]
    assert row["rtt_p50_us"] == "4.000"


def test_a_resend_after_an_rnr_nak_is_still_a_retransmission():
    # the same frame again, but 20 us later (after an RNR NAK): an endpoint resent it
    rows = [req(T0, 10, ackreq=True), ack(T0 + 3 * US, 10, syndrome=0x21), req(T0 + 23 * US, 10, ackreq=True)]
    row = flow_row(analyze_rows(rows), REQ)
    assert row["retransmitted_packets"] == "1"


def resends(delay_ns):
    """PSNs 0..2 sent, then PSN 1 sent again `delay_ns` after its original, with no NAK."""
    return [req(T0, 0), req(T0 + US, 1), req(T0 + 2 * US, 2, ackreq=True), ack(T0 + 1500, 0),
            req(T0 + US + delay_ns, 1, ackreq=True), ack(T0 + US + delay_ns + 3 * US, 2)]


@pytest.mark.parametrize("chunk", [None, 1])
def test_timeout_retransmit_events_carry_the_delay_from_the_original_send(chunk):
    ev = analyze_rows(resends(10 * MS), chunk=chunk).events_table.data
    tr = [d for k, d in zip(ev["kind"], ev["detail"]) if k == "timeout_retransmit"]
    assert tr == ["retransmission with no NAK from the peer since the previous one, 10000.000 us after the original send"]


def test_a_resend_too_soon_for_an_ack_timeout_is_no_timeout_finding():
    soon = analyze_rows(resends(3 * US))
    assert soon.summary["detected"]["timeout_retransmits"] == 1      # the analysis event stays
    assert [f["kind"] for f in find(soon)] == []
    late = [f for f in find(analyze_rows(resends(10 * MS))) if f["kind"] == "timeout_retransmit"]
    assert len(late) == 1
    assert "delay from the original send median 10.000 ms, min 10.000 ms" in late[0]["evidence"]
    low_floor = find(soon, load_config(ack_timeout_floor_us=1.0))
    assert [f["kind"] for f in low_floor] == ["timeout_retransmit"]
