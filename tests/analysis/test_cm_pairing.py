"""Peer_qp from RDMA CM REQ/REP when the capture has them, over pairs from traffic."""
import numpy as np
from helpers.analysis import A, B, SEND_ONLY, T0, UD_SEND_ONLY, analyze_batches, flow_id, flow_row, make_batch, req

US = 1000


def _with_cm(rows, cm):
    """cm: {row index: (attr, local_comm, remote_comm or None, local_qpn)}"""
    batch = make_batch(rows)
    n = batch.n
    cols = {"mad_class": np.uint8, "mad_attr_id": np.uint16, "cm_local_comm_id": np.uint32,
            "cm_remote_comm_id": np.uint32, "cm_local_qpn": np.uint32}
    for name, dtype in cols.items():
        batch.cols[name], batch.valid[name] = np.zeros(n, dtype), np.zeros(n, bool)
    for i, (attr, local, remote, qpn) in cm.items():
        for name, value in (("mad_class", 7), ("mad_attr_id", attr), ("cm_local_comm_id", local),
                            ("cm_remote_comm_id", remote), ("cm_local_qpn", qpn)):
            if value is not None:
                batch.cols[name][i], batch.valid[name][i] = value, True
    return batch


def test_cm_req_rep_pair_queue_pairs_that_traffic_cannot():
    rows = [req(T0, 0, opcode=UD_SEND_ONLY, qp=1, payload=232),                     # REQ A -> B
            req(T0 + US, 0, opcode=UD_SEND_ONLY, src=B, dst=A, qp=1, payload=232)]   # REP B -> A
    # two QPs each way between the same hosts, no ACKs: traffic alone cannot pair them
    for i, (src, dst, qp) in enumerate(((A, B, 0xB1), (A, B, 0xB2), (B, A, 0xA1), (B, A, 0xA2))):
        rows.append(req(T0 + (2 + i) * US, 100 + i, opcode=SEND_ONLY, src=src, dst=dst, qp=qp))
    batch = _with_cm(rows, {0: (0x0010, 77, None, 0xA2), 1: (0x0013, 99, 77, 0xB1)})
    res = analyze_batches([batch])
    assert flow_row(res, flow_id(A, B, 0xB1))["peer_qp"] == "0x0000a2"
    assert flow_row(res, flow_id(B, A, 0xA2))["peer_qp"] == "0x0000b1"
    # with B1/A2 paired by CM, the two left over are each other's lone partner
    assert flow_row(res, flow_id(A, B, 0xB2))["peer_qp"] == "0x0000a1"


def test_a_rep_answering_no_seen_req_pairs_nothing():
    rows = [req(T0, 0, opcode=UD_SEND_ONLY, src=B, dst=A, qp=1, payload=232),
            req(T0 + US, 5, opcode=SEND_ONLY, qp=0xB1), req(T0 + 2 * US, 6, opcode=SEND_ONLY, qp=0xB2),
            req(T0 + 3 * US, 7, opcode=SEND_ONLY, src=B, dst=A, qp=0xA1),
            req(T0 + 4 * US, 8, opcode=SEND_ONLY, src=B, dst=A, qp=0xA2)]
    res = analyze_batches([_with_cm(rows, {0: (0x0013, 99, 12345, 0xB1)})])
    assert flow_row(res, flow_id(A, B, 0xB1))["peer_qp"] == ""


def test_a_lone_pairing_that_a_later_chunk_contradicts_is_withdrawn():
    from helpers.analysis import ack

    # chunk 1 shows only A->B:B1 and B->A:A2 (requests), chunk 2 their true partners' ACKs
    rows = [req(T0, 100, SEND_ONLY, qp=0xB1, ackreq=True),
            req(T0 + 1, 500, SEND_ONLY, src=B, dst=A, qp=0xA2, ackreq=True),
            ack(T0 + 2, 100, qp=0xA1), ack(T0 + 3, 500, src=A, dst=B, qp=0xB2)]
    from helpers.analysis import analyze_rows

    whole = analyze_rows(rows)
    assert flow_row(whole, flow_id(A, B, 0xB1))["peer_qp"] == "0x0000a1"
    split = analyze_rows(rows, chunk=2)
    # never a wrong partner: the pairing resting on the chunk boundary is withdrawn with its RTT
    for flow, wrong in ((flow_id(A, B, 0xB1), "0x0000a2"), (flow_id(B, A, 0xA2), "0x0000b1")):
        r = flow_row(split, flow)
        assert r["peer_qp"] != wrong and (r["peer_qp"] == "" or r["rtt_p50_us"] != "")


def test_a_cm_pairing_that_overrides_a_pair_from_traffic_drops_its_rtt_samples():
    """Chunk 1: A->B:B1's request is answered on B->A:A2 (0.7 us), so traffic pairs B1 with A2.
    Chunk 2: the CM handshake says B1's peer is A1, which answers the next request in 0.3 us.
    The CM pair wins, and the sample taken through the overridden pair goes with it."""
    from helpers.analysis import ack

    first = make_batch([req(T0, 100, SEND_ONLY, qp=0xB1, ackreq=True), ack(T0 + 700, 100, qp=0xA2)])
    second = _with_cm([req(T0 + US, 0, opcode=UD_SEND_ONLY, qp=1, payload=232),                    # REQ A -> B
                       req(T0 + 2 * US, 0, opcode=UD_SEND_ONLY, src=B, dst=A, qp=1, payload=232),  # REP B -> A
                       req(T0 + 3 * US, 101, SEND_ONLY, qp=0xB1, ackreq=True),
                       ack(T0 + 3 * US + 300, 101, qp=0xA1)],
                      {0: (0x0010, 77, None, 0xA1), 1: (0x0013, 99, 77, 0xB1)})
    res = analyze_batches([first, second])
    b1 = flow_row(res, flow_id(A, B, 0xB1))
    assert b1["peer_qp"] == "0x0000a1"
    assert (b1["rtt_p50_us"], b1["rtt_p99_us"]) == ("0.300", "0.300")
    assert flow_row(res, flow_id(B, A, 0xA2))["peer_qp"] == ""


def test_two_host_pairs_using_one_comm_id_are_both_paired():
    """A CM communication id is unique per node only: hosts C and D may pick the id A picked.
    The REQs were kept by comm id alone, so C's REQ replaced A's and A's REP found no REQ of
    its hosts: A and B's queue pairs went unpaired (the Dask engine, one host pair per
    partition, paired them: the engines could disagree)."""
    C, D = "10.0.0.3", "10.0.0.4"
    rows = [req(T0, 0, opcode=UD_SEND_ONLY, qp=1, payload=232),                      # REQ A -> B, id 77
            req(T0 + US, 0, opcode=UD_SEND_ONLY, src=C, dst=D, qp=1, payload=232),   # REQ C -> D, id 77
            req(T0 + 2 * US, 0, opcode=UD_SEND_ONLY, src=B, dst=A, qp=1, payload=232),   # REP B -> A
            req(T0 + 3 * US, 0, opcode=UD_SEND_ONLY, src=D, dst=C, qp=1, payload=232)]   # REP D -> C
    # two QPs each way between each pair of hosts, no ACKs: only the CM can pair them
    for hosts in ((A, B), (C, D)):
        for i, (src, dst, qp) in enumerate(((0, 1, 0xB1), (0, 1, 0xB2), (1, 0, 0xA1), (1, 0, 0xA2))):
            rows.append(req(T0 + (10 + len(rows) + i) * US, 100 + i, opcode=SEND_ONLY, src=hosts[src],
                            dst=hosts[dst], qp=qp))
    batch = _with_cm(rows, {0: (0x0010, 77, None, 0xA2), 1: (0x0010, 77, None, 0xA1),
                            2: (0x0013, 99, 77, 0xB1), 3: (0x0013, 98, 77, 0xB2)})
    res = analyze_batches([batch])
    assert flow_row(res, flow_id(A, B, 0xB1))["peer_qp"] == "0x0000a2"
    assert flow_row(res, flow_id(B, A, 0xA2))["peer_qp"] == "0x0000b1"
    assert flow_row(res, flow_id(C, D, 0xB2))["peer_qp"] == "0x0000a1"
    assert flow_row(res, flow_id(D, C, 0xA1))["peer_qp"] == "0x0000b2"
