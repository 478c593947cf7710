"""The engine's fast paths give the same results as the general ones: chunks already grouped by
flow, timestamps out of order, non-RoCE rows among RoCE rows, more flows than a 16-bit sort key
holds, flow-table slot collisions, and which events an exhausted event budget keeps."""
import random

import numpy as np
import pytest

from helpers.analysis import A, B, CNP, T0, ack, analyze_rows, chunks, flow_id, flow_row, make_batch, req

US = 1000


def tables(result):
    return {name: getattr(result, f"{name}_table").text_rows()
            for name in ("flows", "pfc", "events", "timeline")}


def test_more_flows_than_a_16_bit_sort_key_holds():
    """Sort keys of 33,000 flows pass 2^16 (two radix passes); PSN order per flow must survive."""
    from roceview.analysis import analyze_batches
    from roceview.packets.batch import Batch

    n = 33_000
    first = make_batch([req(T0 + q * 10, 0, qp=q + 1) for q in range(n)])
    late = np.arange(n) % 1000 == 7                     # these flows: PSN 0, 2 (a gap), 1 (late)
    rounds = []
    for rnd in range(3):
        cols = dict(first.cols, ts_ns=first.cols["ts_ns"] + rnd * n * 10,
                    psn=np.where(late, (0, 2, 1)[rnd], rnd).astype(np.uint32))
        rounds.append(Batch(n, cols, dict(first.valid)))
    whole = Batch.concat(rounds)
    for size in (None, 20_011):
        parts = [whole] if size is None else [whole.select(np.arange(i, min(i + size, whole.n)))
                                              for i in range(0, whole.n, size)]
        data = analyze_batches(parts).flows_table.data
        assert len(data["flow"]) == n
        assert set(np.asarray(data["packets"]).tolist()) == {3}
        qp = np.asarray([int(f.rsplit("0x", 1)[1], 16) for f in data["flow"]])
        assert (np.asarray(data["gap_events"]) == late[qp - 1]).all()
        assert (np.asarray(data["retransmitted_packets"]) == late[qp - 1]).all()


def test_timestamps_out_of_order_inside_a_chunk():
    """first_ts/last_ts are the minimum/maximum, not the first/last row (merged captures)."""
    ts = [50, 20, 90, 10, 70, 30]
    rows = [req(T0 + t * US, p, ackreq=True) for p, t in enumerate(ts)]
    rows += [ack(T0 + (t + 1) * US, p) for p, t in enumerate(ts)]
    whole = analyze_rows(rows)
    r = flow_row(whole, flow_id(A, B, 0xD2))
    assert (r["first_ts"], r["last_ts"]) == ("1700000000.000010000", "1700000000.000090000")
    assert tables(whole) == tables(analyze_rows(rows, chunk=1))   # one row per chunk: in order


def test_non_roce_rows_between_roce_rows_change_nothing_but_pfc():
    rows = [req(T0 + i * US, i, ackreq=i % 3 == 0) for i in range(40)]
    rows += [ack(T0 + i * US + 300, i) for i in range(0, 40, 3)]
    rows.sort(key=lambda r: r["ts"])
    with_pfc = list(rows)
    for i in range(0, 40, 4):
        with_pfc.insert(i, dict(proto="pfc", ts=rows[i]["ts"], mac="02:00:00:00:00:0a", enable=0x08,
                                quanta=[0, 0, 0, 100, 0, 0, 0, 0]))
    for chunk in (None, 7):
        plain = tables(analyze_rows(rows, chunk=chunk))
        mixed = tables(analyze_rows(with_pfc, chunk=chunk))
        assert plain["flows"] == mixed["flows"] and plain["timeline"] == mixed["timeline"]
        assert mixed["pfc"] and not plain["pfc"]


def test_a_chunk_of_one_flow_in_order_needs_no_sort():
    rows = [req(T0 + i * US, (0xFFFFF8 + i) & 0xFFFFFF, ackreq=True) for i in range(20)]
    rows[12] = req(rows[12]["ts"], rows[9]["psn"])                      # a retransmission
    whole = analyze_rows(rows)
    assert tables(whole) == tables(analyze_rows(rows, chunk=3))
    r = flow_row(whole, flow_id(A, B, 0xD2))
    assert (r["retransmitted_packets"], r["gap_events"]) == ("1", "1")


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_an_exhausted_event_budget_keeps_the_first_events_in_flow_then_space_order(budget):
    """Events are gathered in capture order; past the budget the kept ones are still the first in
    (flow, PSN space) order, capture order within: flow X (seen first), its requests before its
    CNPs, then flow Y."""
    from roceview.analysis import Analyzer
    from roceview.analysis.events import EventLog

    x, y = dict(src=A, dst=B, qp=0xD2), dict(src=A, dst=B, qp=0xD3)
    rows = [req(T0, 0, **x),
            req(T0 + 1 * US, 0, ecn=3, **y),
            dict(ts=T0 + 2 * US, psn=0, opcode=CNP, ecn=3, **x),
            req(T0 + 3 * US, 1, ecn=3, **y),
            req(T0 + 4 * US, 1, ecn=3, **x),
            req(T0 + 5 * US, 2, ecn=3, **x)]
    analyzer = Analyzer()
    analyzer.events = EventLog(max_per_kind=budget)
    analyzer.feed(make_batch(rows))
    events = analyzer.finish().events_table.data
    kept = sorted((t, f) for t, f, k in zip(events["ts"].tolist(), events["flow"], events["kind"])
                  if k == "ecn_ce")
    x_name, y_name = flow_id(A, B, 0xD2), flow_id(A, B, 0xD3)
    order = [(T0 + 4 * US, x_name), (T0 + 5 * US, x_name), (T0 + 2 * US, x_name),
             (T0 + 1 * US, y_name), (T0 + 3 * US, y_name)]
    assert kept == sorted(order[:budget])


def test_flow_ids_with_many_flows_and_slot_collisions():
    """Thousands of keys: both slot tables overflow into the sorted search; ids stay in order of
    first appearance and lookups agree with a dictionary."""
    from roceview.analysis.flows import FlowRegistry

    rng = random.Random(3)
    keys = [(rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64),
             rng.getrandbits(24)) for _ in range(6000)]
    reg, expected = FlowRegistry(), {}
    for part in range(4):
        picks = [rng.choice(keys[: 1500 * (part + 1)]) for _ in range(5000)]
        src = np.array([k[:2] for k in picks], dtype=np.uint64)
        dst = np.array([k[2:4] for k in picks], dtype=np.uint64)
        qp = np.array([k[4] for k in picks], dtype=np.uint32)
        ids, _ = reg.lookup(src, dst, qp)
        for k, i in zip(picks, ids.tolist()):
            assert expected.setdefault(k, len(expected)) == i
    assert reg.n == len(expected)
    again = list(expected)
    src = np.array([k[:2] for k in again], dtype=np.uint64)
    dst = np.array([k[2:4] for k in again], dtype=np.uint64)
    qp = np.array([k[4] for k in again], dtype=np.uint32)
    assert reg.find(src, dst, qp).tolist() == list(range(len(again)))


def test_chunks_helper_and_whole_capture_agree_on_a_random_mix():
    """A random mix of requests, ACKs, NAKs, CE marks and CNPs over a few flows, IPv4 and IPv6."""
    rng = random.Random(11)
    flows = [dict(src=A, dst=B, qp=0x10), dict(src=B, dst=A, qp=0x11),
             dict(src="fd00::1", dst="fd00::2", qp=0x12)]
    psn = [0, 0, 0]
    rows = []
    for i in range(600):
        f = rng.randrange(3)
        t = T0 + i * 200 + rng.randrange(150)
        kind = rng.random()
        if kind < 0.7:
            psn[f] = (psn[f] + (1 if rng.random() > 0.05 else -3)) & 0xFFFFFF
            rows.append(req(t, psn[f], ackreq=rng.random() < 0.3, ecn=rng.choice((2, 2, 3)), **flows[f]))
        elif kind < 0.9:
            rows.append(ack(t, psn[f], syndrome=rng.choice((0x1F, 0x1F, 0x60, 0x21)), **flows[f]))
        else:
            rows.append(dict(ts=t, psn=0, opcode=CNP, **flows[f]))
    whole = tables(analyze_rows(rows))
    for size in (1, 64, 250):
        assert tables(analyze_rows(rows, chunk=size)) == whole, size
    assert len(chunks(rows, 250)) == 3
