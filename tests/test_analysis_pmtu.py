"""The path MTU is inferred per path (pair of endpoints), not once for the whole capture."""
from analysis_helpers import A, B, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST, SEND_FIRST, SEND_LAST, T0, \
    analyze_rows, flow_id, flow_row, req

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
