"""The result does not depend on how the capture is cut into chunks (state carried per flow)."""
import random

import pytest

from helpers.analysis import (A, B, CNP, READ_FIRST, READ_LAST, READ_MIDDLE, READ_REQUEST, SYN_ACK,
                              SYN_NAK_SEQ, SYN_RNR, T0, ack, analyze_rows, chunks, req)
from roceview.analysis import analyze_batches

C, D = "10.0.0.3", "fd00::4"
US = 1000


def mixed_capture() -> list[dict]:
    rng = random.Random(7)
    rows = []
    t = T0
    # QP 1 (A<->B): wrap, a loss after the capture point (PSN 2), NAK, go-back-N from 2 (4 retransmitted
    # packets: 2 is behind the highest PSN seen too), ECN, CNP, READ
    psns = [0xFFFFF0 + i for i in range(16)] + [0, 1, 3, 4, 5]
    for p in psns:
        t += US
        rows.append(req(t, p & 0xFFFFFF, ackreq=rng.random() < 0.5, ecn=rng.choice((2, 3))))
        if rng.random() < 0.3:
            rows.append(ack(t + 300, p & 0xFFFFFF))
    rows.append(ack(t + 500, 2, syndrome=SYN_NAK_SEQ))
    for p in (2, 3, 4, 5):
        t += US
        rows.append(req(t, p, ackreq=True))
    rows.append(ack(t + 700, 5))
    rows.append(dict(ts=t + 800, psn=0, opcode=CNP, src=B, dst=A, qp=0xC1))
    t += 2 * US
    rows.append(dict(ts=t, psn=6, opcode=READ_REQUEST, src=A, dst=B, qp=0xD2, dmalen=5000, ackreq=True))
    for i, opc in enumerate((READ_FIRST, READ_MIDDLE, READ_MIDDLE, READ_MIDDLE, READ_LAST)):
        rows.append(dict(ts=t + (i + 1) * 200, psn=6 + i, opcode=opc, src=B, dst=A, qp=0xC1,
                         payload=1024 if i < 4 else 904, syndrome=None if opc == READ_MIDDLE else SYN_ACK))
    rows.append(req(t + 2 * US, 11, ackreq=True))
    # QP 2 (C<->D, IPv6): RNR, a timeout retransmission, a never-recovered gap
    for i, p in enumerate((50, 51, 52, 54, 55)):
        rows.append(req(T0 + i * 3 * US + 100, p, src=C, dst=D, qp=0x77, ackreq=True))
    rows.append(ack(T0 + 16 * US, 52, syndrome=SYN_RNR, src=D, dst=C, qp=0x66))
    rows.append(req(T0 + 40 * US, 55, src=C, dst=D, qp=0x77, ackreq=True))
    rows.append(ack(T0 + 41 * US, 55, src=D, dst=C, qp=0x66))
    # PFC around it
    for i in range(6):
        q = [0] * 8
        q[3] = 0 if i == 5 else 2000
        rows.append(dict(proto="pfc", ts=T0 + i * 7 * US, mac="02:00:00:00:00:0a", enable=0x08, quanta=q))
    rows.append(dict(proto="pause", ts=T0 + 5 * US, mac="02:00:00:00:00:0b", quanta=300))
    rows.sort(key=lambda r: r["ts"])
    return rows


def all_tables(result):
    return {name: getattr(result, f"{name}_table").text_rows()
            for name in ("flows", "pfc", "events", "timeline", "cc")}


def numbered_chunks(rows: list[dict], size: int) -> list:
    """Chunks of `size` rows whose frames are numbered on from the chunk before, as a reader's
    (cc.csv's cnp_frame is the batch's frame number)."""
    out, first = [], 0
    for batch in chunks(rows, size):
        batch.cols["frame"] = batch.cols["frame"] + first
        first += batch.n
        out.append(batch)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_same_result_for_every_chunk_size(size):
    rows = mixed_capture()
    whole = analyze_rows(rows, bucket_ms=0.01)
    assert len(whole.cc_table) == 1
    assert all_tables(analyze_batches(numbered_chunks(rows, size), bucket_ms=0.01)) == all_tables(whole)


def test_mixed_capture_exact_numbers():
    res = analyze_rows(mixed_capture())
    flows = {r[0]: dict(zip(res.flows_table.columns, r)) for r in res.flows_table.text_rows()}
    q1 = flows["10.0.0.1>10.0.0.2:0x0000d2"]
    assert {k: q1[k] for k in ("gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets",
                               "peer_qp")} == {"gap_events": "1", "gap_psns": "1", "unrecovered_psns": "0",
                                               "retransmitted_packets": "4", "peer_qp": "0x0000c1"}
    q2 = flows["10.0.0.3>fd00::4:0x000077"]
    assert {k: q2[k] for k in ("gap_events", "gap_psns", "unrecovered_psns", "retransmitted_packets",
                               "peer_qp")} == {"gap_events": "1", "gap_psns": "1", "unrecovered_psns": "1",
                                               "retransmitted_packets": "1", "peer_qp": "0x000066"}
    r1 = flows["10.0.0.2>10.0.0.1:0x0000c1"]
    assert (r1["cnp_packets"], r1["naks_seq"], r1["data_packets"], r1["payload_bytes"]) == ("1", "1", "5", "5000")
    assert flows["fd00::4>10.0.0.3:0x000066"]["naks_rnr"] == "1"
    kinds = res.events_table.data["kind"]
    assert kinds.count("timeout_retransmit") == 0  # the RNR NAK precedes QP 2's retransmission


def test_a_timeline_past_its_row_budget_doubles_its_buckets_and_keeps_the_sums():
    import numpy as np

    from roceview.analysis.timeline import Timeline

    t = Timeline(1000, max_rows=40)
    ts = np.arange(0, 100_000, 500, dtype=np.int64)          # 200 packets, 2 per 1 us bucket
    flow = (np.arange(len(ts)) % 2).astype(np.int64)
    values = {"bytes": np.full(len(ts), 100.0), "ecn_ce": np.ones(len(ts)), "cnp_packets": np.zeros(len(ts)),
              "retransmitted_packets": np.zeros(len(ts))}
    for part in range(4):                                      # fed in 4 chunks
        sl = slice(part * 50, (part + 1) * 50)
        t.feed(ts[sl], flow[sl], {k: v[sl] for k, v in values.items()}, 2)
    table = t.table(["a", "b"])
    assert t.bucket_ns == 8000                                 # doubled until the rows fit
    assert len(table) == 13 * 2                                # 100 us in 8 us buckets, 2 flows
    assert int(np.sum(table.data["bytes"])) == 200 * 100 and int(np.sum(table.data["ecn_ce"])) == 200
    assert (np.asarray(table.data["bucket_start"]) % 8000 == 0).all()


@pytest.mark.parametrize("seed", range(4))
def test_timeline_merge_order_is_lexsorts_on_sorted_runs_shuffled_runs_and_huge_spans(seed):
    import numpy as np

    from roceview.analysis.timeline import _by_bucket_and_flow

    rng = np.random.default_rng(seed)
    runs = []
    for k in range(8):                                         # sorted parts, as the chunks leave them
        b, f = rng.integers(-50 + 10 * k, 30 + 10 * k, 500), rng.integers(0, 300, 500)
        o = np.lexsort((f, b))
        runs.append((b[o], f[o]))
    rng.shuffle(runs)                                          # parts out of time order (several files)
    bucket, flow = (np.concatenate(c) for c in zip(*runs))
    assert np.array_equal(_by_bucket_and_flow(bucket, flow), np.lexsort((flow, bucket)))
    huge = bucket.copy()
    huge[::7] += 1 << 55                                       # span x flows past 2^62: lexsort itself
    assert np.array_equal(_by_bucket_and_flow(huge, flow), np.lexsort((flow, huge)))


def test_events_past_the_per_kind_budget_are_counted_not_listed():
    import numpy as np

    from roceview.analysis.events import EventLog

    log = EventLog(max_per_kind=5)
    for _ in range(3):
        log.add("ecn_ce", np.arange(4), np.arange(4), np.zeros(4, np.int64), np.arange(4))
    log.add("gap", np.arange(2), np.arange(2), np.zeros(2, np.int64), np.arange(2), np.ones(2), np.ones(2))
    table = log.table(["f"], [])
    assert list(table.data["kind"]).count("ecn_ce") == 5 and list(table.data["kind"]).count("gap") == 2
    assert log.count("ecn_ce") == 12 and log.dropped == {**{k: 0 for k in log.dropped}, "ecn_ce": 7}


def _peers_and_rtt(rows, chunk):
    t = analyze_rows(rows, chunk=chunk).flows_table
    cols = ("flow", "peer_qp", "rtt_p50_us", "rtt_p99_us")
    return sorted(tuple(dict(zip(t.columns, r))[c] for c in cols) for r in t.text_rows())


def second_qp_later() -> list[dict]:
    """QP pair 0xD2/0xC1 between A and B alone for 20 rows; then a second pair 0xD3/0xC3 between
    the same hosts starts (a new connection), interleaved with the first."""
    rows, t = [], T0
    for p in range(20):
        t += US
        rows += [req(t, p, ackreq=True), ack(t + 300, p)]
        if p >= 10:
            rows += [req(t + 100, 100 + p, qp=0xD3, ackreq=True), ack(t + 400, 100 + p, qp=0xC3)]
    return rows


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 21])
def test_a_second_qp_between_the_same_hosts_starting_chunks_later(size):
    """The first pair, lone while it was alone, gathers PSN evidence all along: when the second
    pair shows up it is confirmed, not withdrawn (it used to be: every peer_qp and RTT lost)."""
    rows = second_qp_later()
    whole = _peers_and_rtt(rows, None)
    assert [(f, p) for f, p, *_ in whole] == [
        ("10.0.0.1>10.0.0.2:0x0000d2", "0x0000c1"), ("10.0.0.1>10.0.0.2:0x0000d3", "0x0000c3"),
        ("10.0.0.2>10.0.0.1:0x0000c1", "0x0000d2"), ("10.0.0.2>10.0.0.1:0x0000c3", "0x0000d3")]
    assert whole[0][2:] == ("0.300", "0.300")
    if size > 1:             # one-row chunks hold no request and response together: no evidence
        assert _peers_and_rtt(rows, size) == whole


def lone_pair_of_two_qps() -> list[dict]:
    """First seen between A and B: requests of 0xD2 and responses of 0xC3, which answers 0xD3
    (PSNs 500..): a lone pair of flows that are not one QP. 0xC1 and 0xD3 appear later."""
    rows, t = [], T0
    for p in range(20):
        t += US
        rows.append(req(t, p, ackreq=True))
        rows.append(ack(t + 700, 500 + p, qp=0xC3) if p < 8 else ack(t + 300, p))
        if p >= 8:
            rows += [req(t + 100, 500 + p, qp=0xD3, ackreq=True), ack(t + 400, 500 + p, qp=0xC3)]
    return rows


@pytest.mark.parametrize("size", [2, 3, 5, 8, 13, 21])
def test_psn_evidence_overrides_a_lone_pair(size):
    """The wrong lone pair 0xD2/0xC3 is broken by the evidence, as if the whole capture were one
    chunk; the RTT samples taken through it are dropped (0xD2's first eight requests then give
    none, so only its percentiles may differ from the one-chunk result)."""
    rows = lone_pair_of_two_qps()
    whole, cut = _peers_and_rtt(rows, None), _peers_and_rtt(rows, size)
    assert [r[:2] for r in cut] == [r[:2] for r in whole] == [
        ("10.0.0.1>10.0.0.2:0x0000d2", "0x0000c1"), ("10.0.0.1>10.0.0.2:0x0000d3", "0x0000c3"),
        ("10.0.0.2>10.0.0.1:0x0000c1", "0x0000d2"), ("10.0.0.2>10.0.0.1:0x0000c3", "0x0000d3")]
    assert cut[1] == whole[1] and cut[1][2:] == ("0.300", "0.300")
    assert "0.700" not in cut[0][2:]          # no sample of 0xD2 taken against 0xC3's responses


def evidence_for_one_qp_only() -> list[dict]:
    """QP 0xD2/0xC1 sends requests both ways (no ACKs: no PSN evidence); then QP 0xD3/0xC3
    with ACKs that follow its requests."""
    rows, t = [], T0
    for p in range(4):
        t += US
        rows += [req(t, p), req(t + 10, 900 + p, src=B, dst=A, qp=0xC1)]
    for p in range(4):
        t += US
        rows += [req(t, 100 + p, qp=0xD3, ackreq=True), ack(t + 300, 100 + p, qp=0xC3)]
    return rows


@pytest.mark.parametrize("size", [2, 3, 4, 5, 8, 12, 13])
def test_flows_the_evidence_leaves_alone_pair_as_in_one_chunk(size):
    """Evidence pairs 0xD3/0xC3; 0xD2/0xC1 are then the only open flows each way and pair as
    lone partners, in one chunk as in many (they used to differ: unpaired in one chunk, paired
    when 0xD2/0xC1 came a chunk before 0xD3/0xC3)."""
    rows = evidence_for_one_qp_only()
    whole = _peers_and_rtt(rows, None)
    assert [r[:2] for r in whole] == [
        ("10.0.0.1>10.0.0.2:0x0000d2", "0x0000c1"), ("10.0.0.1>10.0.0.2:0x0000d3", "0x0000c3"),
        ("10.0.0.2>10.0.0.1:0x0000c1", "0x0000d2"), ("10.0.0.2>10.0.0.1:0x0000c3", "0x0000d3")]
    assert _peers_and_rtt(rows, size) == whole
