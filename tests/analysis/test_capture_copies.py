"""Second captures of one frame are counted once, and told from resends (roceview/analysis/copies.py)."""
from __future__ import annotations

import random

import pytest

from helpers.analysis import A, B, SEND_ONLY, SYN_RNR, T0, ack, analyze_rows, flow_id, flow_row, req

US = 1000
REQ, RESP = flow_id(A, B, 0xD2), flow_id(B, A, 0xC1)


def kinds(result, kind="duplicate") -> list:
    d = result.events_table.data
    return [(f, int(p)) for k, f, p in zip(d["kind"], d["flow"], d["psn"]) if k == kind]


def numbered(rows, start=1):
    """The rows with IPv4 identifications counting per source host, as mlx5 sends them."""
    n = {A: start, B: start + 1000}
    out = []
    for r in rows:
        n[r["src"]] += 1
        out.append(dict(r, ip_id=n[r["src"]]))
    return out


def two_points(rows, offset_ns):
    """Every row again `offset_ns` later, as a second capture point sees it."""
    return sorted(rows + [dict(r, ts=r["ts"] + offset_ns) for r in rows], key=lambda r: r["ts"])


@pytest.mark.parametrize("offset_ns", [500, 3_700, 50_000])
def test_a_second_capture_point_of_a_numbering_sender_is_counted_once(offset_ns):
    rows = numbered([req(T0 + i * US, 10 + i, ackreq=True) for i in range(6)]
                    + [ack(T0 + i * US + 600, 10 + i) for i in range(6)])
    once = analyze_rows(sorted(rows, key=lambda r: r["ts"]))
    twice = analyze_rows(two_points(rows, offset_ns))
    for flow in (REQ, RESP):
        assert flow_row(twice, flow)["packets"] == flow_row(once, flow)["packets"]
    assert flow_row(twice, REQ)["retransmitted_packets"] == "0"
    assert len(kinds(twice)) == 12


def test_a_resend_with_a_new_identification_is_a_retransmission_not_a_copy():
    rows = [req(T0, 10, ip_id=1), req(T0 + US, 11, ip_id=2), req(T0 + 5 * US, 10, ip_id=3)]
    result = analyze_rows(rows)
    assert flow_row(result, REQ)["retransmitted_packets"] == "1" and kinds(result) == []


def test_an_rnr_resend_of_a_constant_identification_senders_first_request_is_a_retransmission():
    # some soft-RoCE setups send one identification on every datagram: its resend is the same bytes
    rows = [req(T0, 10, ackreq=True, opcode=SEND_ONLY, ip_id=0x1234), ack(T0 + 3 * US, 10, syndrome=SYN_RNR, ip_id=7),
            req(T0 + 43 * US, 10, ackreq=True, opcode=SEND_ONLY, ip_id=0x1234), ack(T0 + 46 * US, 10, ip_id=7)]
    result = analyze_rows(rows)
    assert flow_row(result, REQ)["retransmitted_packets"] == "1" and kinds(result) == []


def test_repeated_acks_of_a_sender_without_identification_are_not_copies():
    # soft-RoCE (identification 0) answers each duplicate request of a go-back-N burst with the same ACK
    rows = [req(T0 + i * US, 10 + i, ackreq=i == 2, ip_id=0) for i in range(3)] + [ack(T0 + 6 * US, 12, ip_id=0)]
    rows += [req(T0 + (70 + i) * US, 10 + i, ackreq=i == 2, ip_id=0) for i in range(3)]
    rows += [ack(T0 + (74 + i) * US, 12, ip_id=0) for i in range(3)]
    result = analyze_rows(sorted(rows, key=lambda r: r["ts"]))
    assert flow_row(result, RESP)["packets"] == "4" and kinds(result) == []


def test_a_repeated_ack_of_a_constant_identification_sender_is_not_a_copy_once_it_shows_constant():
    # 0x200 on every datagram: after its second ACK (another PSN, the same identification) the
    # responder is known not to number, and an ACK repeated 5 us later is a new ACK
    rows = [req(T0, 10, ackreq=True, ip_id=1), ack(T0 + 2 * US, 10, ip_id=0x200),
            req(T0 + 3 * US, 11, ackreq=True, ip_id=2), ack(T0 + 5 * US, 11, ip_id=0x200),
            ack(T0 + 10 * US, 11, ip_id=0x200)]
    result = analyze_rows(rows)
    assert kinds(result) == [] and flow_row(result, RESP)["packets"] == "3"


def test_one_copy_among_many_rows_is_found():
    """Few repeated keys among many rows: the branch that sorts only the repeating rows."""
    rows = numbered([req(T0 + i * US, 10 + i, ackreq=True) for i in range(300)])
    rows = sorted(rows + [dict(rows[150], ts=rows[150]["ts"] + 3_700)], key=lambda r: r["ts"])
    result = analyze_rows(rows)
    assert kinds(result) == [(REQ, 160)] and flow_row(result, REQ)["packets"] == "300"


def test_a_data_copy_without_identification_is_recognised_only_within_2_us():
    rows = [req(T0, 10, ip_id=0), req(T0 + 1_500, 10, ip_id=0), req(T0 + 10 * US, 11, ip_id=0),
            req(T0 + 13 * US, 11, ip_id=0)]
    result = analyze_rows(rows)
    assert kinds(result) == [(REQ, 10)]
    assert flow_row(result, REQ)["retransmitted_packets"] == "1"


def _random_capture(seed: int) -> list:
    """Two hosts, each sending with identification 0, one constant value, or a counter; some
    rows captured again 50 ns to 500 us later."""
    rnd = random.Random(seed)
    style = {A: rnd.choice([0, 0x100, None]), B: rnd.choice([0, 0x200, None])}
    counter, psn, t, rows = {A: 5, B: 900}, {A: 100, B: 50}, T0, []
    for _ in range(rnd.randint(5, 25)):
        t += rnd.choice([100, 500, 1500, 2500, 30 * US, 600 * US, 1200 * US])
        src = rnd.choice([A, B])
        dst = B if src == A else A
        counter[src] = (counter[src] + 1) & 0xFFFF
        ident = counter[src] if style[src] is None else style[src]
        qp = 0xD2 if src == A else 0xC1
        if rnd.random() < 0.5:
            p = psn[src] + rnd.randint(-1, 1)
            psn[src] = max(psn[src], p)
            row = req(t, p, src=src, dst=dst, qp=qp, ip_id=ident)
        else:
            row = ack(t, psn[dst], src=src, dst=dst, qp=qp, ip_id=ident)
        rows.append(row)
        if rnd.random() < 0.3:
            rows.append(dict(row, ts=t + rnd.choice([50, 1500, 3000, 500 * US])))
    return sorted(rows, key=lambda r: r["ts"])


@pytest.mark.parametrize("seed", range(60))
def test_which_rows_are_copies_does_not_depend_on_the_chunking(seed):
    rows = _random_capture(seed)
    whole = kinds(analyze_rows(rows))
    for chunk in (1, 2, 3, 5):
        assert kinds(analyze_rows(rows, chunk=chunk)) == whole, chunk
