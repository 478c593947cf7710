"""The path MTU is inferred per path (pair of endpoints), not once for the whole capture.

The path MTU from all the evidence, READ spans never larger than it allows."""
from helpers.analysis import A, B, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST, SEND_FIRST, SEND_LAST, T0, \
    analyze_rows, flow_id, flow_row, req
import pytest
from helpers.analysis import (READ_ONLY, SEND_ONLY,
                              WRITE_ONLY)
from roceview.diagnose import find


C, D = "10.0.0.3", "10.0.0.4"
US = 1000


def _rows(with_big_path: bool):
    rows = []
    if with_big_path:                       # another pair of hosts runs a 4096-byte path MTU
        rows += [req(T0, 50, opcode=SEND_FIRST, src=C, dst=D, qp=0xD1, payload=4096),
                 req(T0 + US, 51, opcode=SEND_LAST, src=C, dst=D, qp=0xD1, payload=100)]
    rows += [req(T0 + 2 * US, 10, opcode=READ_REQUEST, payload=0, dmalen=3072),   # 3 PSNs at 1024
             dict(ts=T0 + 3 * US, psn=10, opcode=READ_FIRST, src=B, dst=A, qp=0xC1, payload=1024, syndrome=0x1F),
             dict(ts=T0 + 4 * US, psn=11, opcode=READ_MIDDLE, src=B, dst=A, qp=0xC1, payload=1024, syndrome=None),
             dict(ts=T0 + 5 * US, psn=12, opcode=READ_LAST, src=B, dst=A, qp=0xC1, payload=1024, syndrome=0x1F),
             req(T0 + 6 * US, 13)]                                                # next PSN after the READ
    return rows


def test_a_read_spans_psns_by_its_own_paths_mtu():
    for big in (False, True):
        r = flow_row(analyze_rows(_rows(big)), flow_id(A, B, 0xD2))
        assert (r["gap_events"], r["gap_psns"], r["unrecovered_psns"], r["retransmitted_packets"]) == \
            ("0", "0", "0", "0"), big


def test_path_mtu_evidence_is_carried_across_chunks():
    r = flow_row(analyze_rows(_rows(True), chunk=1), flow_id(A, B, 0xD2))
    assert (r["gap_events"], r["gap_psns"]) == ("0", "0")


REQ = flow_id(A, B, 0xD2)
COUNTERS = ("gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets")


def resp(ts, psn, opcode, payload):
    return dict(ts=ts, psn=psn, opcode=opcode, src=B, dst=A, qp=0xC1, payload=payload,
                syndrome=None if opcode == READ_MIDDLE else 0x1F)


def nvme_reads(n=6, answered=True):
    """4 KiB READs at path MTU 4096, each answered by one READ RESPONSE ONLY, each followed by a
    SEND at the next PSN: nothing on the path is a FIRST/MIDDLE packet."""
    rows, t, psn = [], T0, 100
    for _ in range(n):
        rows.append(req(t, psn, opcode=READ_REQUEST, payload=0, dmalen=4096, ackreq=True))
        if answered:
            rows.append(resp(t + 3 * US, psn, READ_ONLY, 4096))
        rows.append(req(t + 5 * US, psn + 1, opcode=SEND_ONLY, payload=64, ackreq=True))
        t, psn = t + 10 * US, psn + 2
    return rows


def kinds(result):
    return sorted(f["kind"] for f in find(result))


@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_4k_reads_answered_by_response_only_are_one_psn(chunk):
    result = analyze_rows(nvme_reads(), chunk=chunk)
    row = flow_row(result, REQ)
    assert tuple(row[c] for c in COUNTERS) == ("0", "0", "0", "0")
    assert result.summary["detected"]["timeout_retransmits"] == 0
    assert list(result.events_table.data["kind"]) == []
    assert kinds(result) == []


@pytest.mark.parametrize("chunk", [None, 2])
def test_reads_of_unknown_mtu_take_the_span_the_next_request_shows(chunk):
    # one direction captured only: no response, no FIRST/MIDDLE. At path MTU 1024 the 4 KiB READ
    # takes 4 PSNs, at 4096 one: both requesters are right, neither is a gap or a reuse.
    for step in (1, 4):
        rows, t, psn = [], T0, 100
        for _ in range(4):
            rows += [req(t, psn, opcode=READ_REQUEST, payload=0, dmalen=4096),
                     req(t + US, psn + step, opcode=SEND_ONLY, payload=64)]
            t, psn = t + 10 * US, psn + step + 1
        row = flow_row(analyze_rows(rows, chunk=chunk), REQ)
        assert tuple(row[c] for c in COUNTERS) == ("0", "0", "0", "0"), step


def test_a_payload_bounds_the_mtu_from_below():
    # A 4096-byte WRITE ONLY shows path MTU 4096: the 8 KiB READ then takes exactly 2 PSNs, so a
    # SEND 3 PSNs after it skipped one (before: MTU 1024 assumed, 8 PSNs, reported as a reuse).
    rows = [req(T0, 10, opcode=WRITE_ONLY, payload=4096, dmalen=4096),
            req(T0 + US, 11, opcode=READ_REQUEST, payload=0, dmalen=8192),
            req(T0 + 2 * US, 14, opcode=SEND_ONLY, payload=64)]
    result = analyze_rows(rows)
    row = flow_row(result, REQ)
    assert tuple(row[c] for c in COUNTERS) == ("1", "1", "1", "0")
    assert "psn_reuse" not in list(result.events_table.data["kind"])


def test_a_known_mtu_still_finds_a_reused_psn():
    # READ RESPONSE FIRST shows path MTU 1024: the 3 KiB READ takes 3 PSNs, a SEND at +2 reuses one
    rows = [req(T0, 10, opcode=READ_REQUEST, payload=0, dmalen=3072),
            resp(T0 + 2 * US, 10, READ_FIRST, 1024), resp(T0 + 3 * US, 11, READ_MIDDLE, 1024),
            resp(T0 + 4 * US, 12, READ_LAST, 1024),
            req(T0 + 5 * US, 12, opcode=SEND_ONLY, payload=64)]
    result = analyze_rows(rows)
    assert list(result.events_table.data["kind"]) == ["retransmit", "psn_reuse"]


def test_a_pmtu_the_capture_contradicts_is_a_warning():
    result = analyze_rows(nvme_reads(2), pmtu=1024)
    assert result.summary["pmtu_contradiction"] == (
        "a packet carries more than 1024 bytes of payload (needs path MTU >= 4096)")
    mismatch = [f for f in find(result) if f["kind"] == "pmtu_mismatch"]
    assert [(f["severity"], f["summary"].split(":")[0]) for f in mismatch] == [
        ("warning", "--pmtu 1024 contradicts the capture")]
    assert analyze_rows(nvme_reads(2), pmtu=4096).summary["pmtu_contradiction"] is None


def _cm_req_batch(rows, mtu_code):
    """rows[0] is a CM REQ (UD SEND ONLY to QP1) carrying path MTU code `mtu_code`."""
    import numpy as np

    from helpers.analysis import make_batch

    batch = make_batch(rows)
    for name, dtype in (("mad_class", np.uint8), ("mad_attr_id", np.uint16), ("cm_local_qpn", np.uint32),
                        ("cm_local_comm_id", np.uint32), ("cm_path_mtu", np.uint8)):
        batch.cols[name], batch.valid[name] = np.zeros(batch.n, dtype), np.zeros(batch.n, bool)
    for name, value in (("mad_class", 7), ("mad_attr_id", 0x10), ("cm_local_qpn", 0xC1),
                        ("cm_local_comm_id", 5), ("cm_path_mtu", mtu_code)):
        batch.cols[name][0], batch.valid[name][0] = value, True
    return batch


def test_the_cm_req_path_mtu_fixes_a_read_span():
    # CM REQ: path MTU 4096 (code 5). An 8 KiB READ then takes exactly 2 PSNs, so a SEND 3 PSNs
    # after it skipped one; without the REQ any MTU from 256 up would be possible (no finding).
    from helpers.analysis import UD_SEND_ONLY, analyze_batches

    rows = [req(T0, 0, opcode=UD_SEND_ONLY, qp=1, payload=232),
            req(T0 + US, 11, opcode=READ_REQUEST, payload=0, dmalen=8192),
            req(T0 + 2 * US, 14, opcode=SEND_ONLY, payload=64)]
    for code, counters in ((5, ("1", "1", "1", "0")), (0, ("0", "0", "0", "0"))):
        result = analyze_batches([_cm_req_batch(rows, code)])
        row = flow_row(result, REQ)
        assert tuple(row[c] for c in COUNTERS) == counters, code
    assert analyze_batches([_cm_req_batch(rows, 3)]).summary["pmtu"] == 1024


@pytest.mark.parametrize("seed", [18, 21, 28, 31, 42])
def test_inferred_path_mtu_and_psn_events_do_not_depend_on_chunking(seed):
    # the oracle's random RC traffic (READs of every size, lost responses, re-reads, PSN reuse,
    # duplicates, ACKs for random PSNs) without --pmtu: READ spans, gaps, retransmissions and the
    # PSN findings' events are those of the whole capture read as one chunk
    from test_counters_oracle import Gen

    g = Gen(seed)
    for _ in range(300):
        g.step()
    kinds = {"gap", "retransmit", "psn_reuse", "duplicate", "ack_unsent_psn"}
    out = []
    for chunk in (None, 7, 50):
        r = analyze_rows(g.rows, chunk=chunk)
        cols = [c for c in r.flows_table.columns if c not in ("rtt_p50_us", "rtt_p99_us")]
        events = [e for e in r.events_table.text_rows() if e[2] in kinds]
        out.append(([r.flows_table.text_column(c) for c in cols], events))
    assert out[1] == out[0] and out[2] == out[0]
