"""Frames sent toward a MAC while it paused their priority: the `sent_while_paused` events and
the paused_flows table, on hand-built chunks, against a plain per-frame oracle, in any chunking."""
import os
import random

import numpy as np
import pytest

from helpers.analysis import A, B, T0, make_batch
from roceview.analysis import analyze_batches

HOST_A, NIC_B, PORT = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:ee"
US = 1000
NS_PER_QUANTUM = 5.12          # 512 bit times at 100 Gb/s
FLOW = f"{A}>{B}:0x0000d2"


def data(ts, psn, to=NIC_B, dscp=26, pcp=None, qp=0xD2, src=A, dst=B, payload=1000):
    """An RDMA WRITE ONLY toward MAC `to` (priority DSCP >> 3 unless a VLAN PCP is given)."""
    return dict(ts=ts, psn=psn, opcode=0x0A, qp=qp, src=src, dst=dst, payload=payload, to=to, dscp=dscp, pcp=pcp)


def xoff(ts, quanta, prio=3, mac=NIC_B):
    q = [0] * 8
    q[prio] = quanta
    return dict(proto="pfc", ts=ts, mac=mac, enable=1 << prio, quanta=q)


def pause(ts, quanta, mac=NIC_B):
    return dict(proto="pause", ts=ts, mac=mac, quanta=quanta)


def batch(rows):
    """make_batch's chunk with the destination MAC, DSCP and VLAN PCP columns the rows give."""
    b = make_batch(rows)
    b.cols["_dst_mac"] = np.array([int(r.get("to", "01:80:c2:00:00:01").replace(":", ""), 16) for r in rows],
                                  np.uint64)
    for name in ("dscp", "pcp"):
        given = [r.get(name) for r in rows]
        b.cols[name] = np.array([v or 0 for v in given], np.uint8)
        b.valid[name] = np.array([v is not None for v in given])
    return b


def analyze(rows, chunk=None, link_speed=100.0):
    size = chunk or len(rows)
    return analyze_batches([batch(rows[i:i + size]) for i in range(0, len(rows), size)],
                           link_speed_gbps=link_speed)


def held(result):
    """The sent_while_paused events as (frame, related frame, priority, delay ns, flow)."""
    t = result.events_table
    return [(f, rel, p, d, fl) for k, f, rel, p, d, fl in zip(t.data["kind"], t.data["frame"].tolist(),
                                                             t.data["related_frame"].tolist(), t.data["pfc_priority"],
                                                             t.data["pause_delay_ns"].tolist(), t.data["flow"])
            if k == "sent_while_paused"]


def paused_rows(result):
    t = result.paused_flows_table
    return [dict(zip(t.columns, row)) for row in t.text_rows()]


def story():
    """Frames 1-12: before the XOFF, inside (refreshed), after the XON, after a pause lapsed,
    inside an 802.3x PAUSE on another priority."""
    return [
        data(T0, 0),                                 # 1: before any pause
        xoff(T0 + 1 * US, 1000),                     # 2: p3 paused for 5.12 us
        data(T0 + 2 * US, 1),                        # 3: 1 us into the pause
        data(T0 + 2 * US + 500, 2, dscp=0),          # 4: priority 0: not held
        xoff(T0 + 4 * US, 1000),                     # 5: refresh before expiry: the same period
        data(T0 + 6 * US, 3),                        # 6: 5 us after frame 2's XOFF
        xoff(T0 + 7 * US, 0),                        # 7: XON
        data(T0 + 8 * US, 4),                        # 8: resumed
        xoff(T0 + 20 * US, 100),                     # 9: 0.512 us
        data(T0 + 21 * US, 5),                       # 10: that pause ran out
        pause(T0 + 30 * US, 1000),                   # 11: PAUSE: every priority
        data(T0 + 31 * US, 6, dscp=0),               # 12: held by it
    ]


def test_a_frame_inside_a_pause_is_held_with_its_delay_since_the_xoff():
    assert held(analyze(story())) == [(3, 2, "3", 1000, FLOW), (6, 2, "3", 5000, FLOW), (12, 11, "all", 1000, FLOW)]


def test_the_event_names_the_pausing_mac_and_the_kind_columns_stay_blank_elsewhere():
    t = analyze(story()).events_table
    rows = [dict(zip(t.columns, r)) for r in t.text_rows()]
    mine = [r for r in rows if r["kind"] == "sent_while_paused"]
    assert NIC_B in mine[0]["detail"] and "priority 3" in mine[0]["detail"]
    assert mine[0]["psn"] == "1" and mine[0]["related_frame"] == "2"
    assert all(r["pause_delay_ns"] == "" for r in rows if r["kind"] != "sent_while_paused")


def test_paused_flows_counts_the_flows_frames_to_the_mac_on_the_priority():
    rows = paused_rows(analyze(story()))
    assert [(r["src_mac"], r["priority"], r["flow"], r["packets"], r["paused_packets"]) for r in rows] == [
        (NIC_B, "3", FLOW, "5", "2"), (NIC_B, "all", FLOW, "7", "1")]
    p3 = rows[0]
    assert (p3["bytes"], p3["paused_bytes"]) == (str(5 * 1064), str(2 * 1064))
    assert p3["first_ts"] == "1700000000.000000000" and p3["last_ts"] == "1700000000.000021000"


def test_a_frame_and_an_xoff_with_one_timestamp_go_by_frame_order():
    rows = [data(T0, 0), xoff(T0, 1000), data(T0, 1)]
    assert held(analyze(rows)) == [(3, 2, "3", 0, FLOW)]


def test_with_timestamps_stepping_back_a_frame_is_held_only_after_the_xoff_in_capture_and_in_time():
    rows = [data(T0 + 2000, 0), xoff(T0 + 1000, 1000), data(T0 + 1500, 1), data(T0 + 500, 2)]
    for chunk in (None, 1, 2, 3):
        assert held(analyze(rows, chunk)) == [(3, 2, "3", 500, FLOW)], chunk


def test_a_frame_at_the_pause_expiry_is_no_longer_held():
    end = int(100 * NS_PER_QUANTUM)                  # 512 ns
    rows = [xoff(T0, 100), data(T0 + end - 1, 0), data(T0 + end, 1)]
    assert [h[0] for h in held(analyze(rows))] == [2]


def test_link_speed_sets_the_pause_length():
    rows = [xoff(T0, 1000), data(T0 + 10 * US, 0)]   # 5.12 us at 100 Gb/s, 20.48 us at 25
    assert held(analyze(rows)) == [] and len(held(analyze(rows, link_speed=25.0))) == 1


def test_a_refresh_after_the_pause_lapsed_starts_a_new_period():
    rows = [xoff(T0, 100), xoff(T0 + 1 * US, 1000), data(T0 + 2 * US, 0)]
    assert held(analyze(rows)) == [(3, 2, "3", 1000, FLOW)]


def test_vlan_pcp_is_the_priority_of_a_tagged_frame():
    rows = [xoff(T0, 1000, prio=5), data(T0 + 1 * US, 0, dscp=26, pcp=5), data(T0 + 2 * US, 1, dscp=40, pcp=3)]
    assert [h[0] for h in held(analyze(rows))] == [2]


def test_frames_to_another_mac_and_mac_without_pauses_have_no_rows():
    rows = [xoff(T0, 1000, mac=PORT), data(T0 + 1 * US, 0), data(T0 + 2 * US, 1, to=PORT, src=A, dst="10.0.0.3")]
    result = analyze(rows)
    assert held(result) == [(3, 1, "3", 2000, f"{A}>10.0.0.3:0x0000d2")]
    assert [(r["src_mac"], r["flow"]) for r in paused_rows(result)] == [(PORT, f"{A}>10.0.0.3:0x0000d2")]


def test_a_flow_sending_to_two_priorities_is_counted_per_priority():
    rows = [data(T0, 0, dscp=0), data(T0 + 1, 1), xoff(T0 + 2, 1000), xoff(T0 + 3, 1000, prio=0),
            data(T0 + 4, 2), data(T0 + 5, 3, dscp=0), data(T0 + 6, 4)]
    for chunk in (None, 1, 2, 3):
        rows_out = paused_rows(analyze(rows, chunk))
        assert [(r["priority"], r["packets"], r["paused_packets"], r["first_ts"][-3:]) for r in rows_out] == [
            ("0", "2", "1", "000"), ("3", "3", "2", "001")], chunk


def test_rows_follow_the_pausing_macs_first_appearance_in_any_chunking():
    """pfc.csv's MACs, and so paused_flows' rows, in order of their first pause frame, also
    within a chunk (they were in the order of the MACs' values there)."""
    rows = [xoff(T0, 1000, mac=PORT), xoff(T0 + 1, 1000), data(T0 + 2, 0), data(T0 + 3, 1, to=PORT, dst="10.0.0.3")]
    for chunk in (None, 1, 2):
        result = analyze(rows, chunk)
        assert list(result.pfc_table.data["src_mac"]) == [PORT, NIC_B], chunk
        assert [r["src_mac"] for r in paused_rows(result)] == [PORT, NIC_B], chunk


def test_the_same_answers_in_any_chunking():
    rows = story()
    whole = analyze(rows)
    for size in range(1, 8):
        part = analyze(rows, size)
        assert held(part) == held(whole), size
        assert paused_rows(part) == paused_rows(whole), size


# ---- random captures against a per-frame oracle ---------------------------------------------------
MACS = (NIC_B, PORT, HOST_A)


def random_capture(rng: random.Random) -> list[dict]:
    """Frames of three flows to three MACs on priorities 0/3/none (DSCP, some VLAN-tagged), with
    XOFFs, refreshes, XONs, PAUSEs between them; timestamps never decrease, some repeat."""
    rows, ts = [], T0
    flows = [(A, B, 0xD2), (A, "10.0.0.3", 0x11), ("10.0.0.4", B, 0x22)]
    for i in range(rng.randint(5, 60)):
        ts += rng.choice((0, 0, 1, 50, 300, 700, 2000, 6000))
        mac = rng.choice(MACS)
        if rng.random() < 0.3:
            q = rng.choice((0, 50, 100, 1000, 65535))
            if rng.random() < 0.2:
                rows.append(pause(ts, q, mac=mac))
            else:
                rows.append(xoff(ts, q, prio=rng.choice((0, 3)), mac=mac))
        else:
            src, dst, qp = rng.choice(flows)
            dscp, pcp = rng.choice((26, 26, 0, None)), rng.choice((None, None, None, 3, 0))
            rows.append(data(ts, i, to=mac, dscp=dscp, pcp=pcp, src=src, dst=dst, qp=qp,
                             payload=rng.choice((0, 100, 1000))))
    return rows


def oracle(rows):
    """(events as `held` gives them, {(mac, priority, flow): [packets, bytes, paused, paused bytes]}
    for the MACs and priorities that sent an XOFF), frame by frame."""
    pauses = {}                                          # (mac, slot) -> [(ts, frame, quanta)]
    for f, r in enumerate(rows, 1):
        if r.get("proto") == "pfc":
            for p in range(8):
                if r["enable"] >> p & 1:
                    pauses.setdefault((r["mac"], p), []).append((r["ts"], f, r["quanta"][p]))
        elif r.get("proto") == "pause":
            pauses.setdefault((r["mac"], 8), []).append((r["ts"], f, r["quanta"]))

    def inside(key, ts, frame):
        """(XOFF that began the period, its ts) when (ts, frame) is inside a pause of `key`."""
        begin = None
        rows_ = pauses.get(key, [])
        for i, (t, f, q) in enumerate(rows_):
            prev = rows_[i - 1] if i else None
            continued = prev is not None and prev[2] > 0 and q > 0 and t - prev[0] <= prev[2] * NS_PER_QUANTUM
            begin = begin if continued else (t, f)
            nxt = rows_[i + 1] if i + 1 < len(rows_) else None
            if q > 0 and (t, f) < (ts, frame) and (nxt is None or (ts, frame) < nxt[:2]) \
                    and ts - t < q * NS_PER_QUANTUM:
                return begin
        return None

    events, table = [], {}
    for f, r in enumerate(rows, 1):
        if "proto" in r:
            continue
        flow = f"{r['src']}>{r['dst']}:0x{r['qp']:06x}"
        prio = r["pcp"] if r["pcp"] is not None else (r["dscp"] >> 3 if r["dscp"] is not None else None)
        size = 64 + r["payload"]
        found = None
        for slot in ((prio, 8) if prio is not None else (8,)):
            key = (r["to"], slot)
            if not any(q > 0 for _, _, q in pauses.get(key, [])):
                continue
            row = table.setdefault((r["to"], "all" if slot == 8 else str(slot), flow), [0, 0, 0, 0])
            row[0] += 1
            row[1] += size
            begin = inside(key, r["ts"], f)
            if begin is not None:
                row[2] += 1
                row[3] += size
                found = found or (begin, "all" if slot == 8 else str(slot))
        if found:
            (bts, bf), p = found
            events.append((f, bf, p, r["ts"] - bts, flow))
    return events, table


def check(rows, sizes):
    want_events, want_table = oracle(rows)
    for size in sizes:
        result = analyze(rows, size)
        assert held(result) == want_events, size
        got = {(r["src_mac"], r["priority"], r["flow"]): [int(r[c]) for c in ("packets", "bytes", "paused_packets",
                                                                                "paused_bytes")]
               for r in paused_rows(result)}
        assert got == want_table, size


@pytest.mark.parametrize("seed", range(int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "20"))))
def test_random_captures_agree_with_the_per_frame_oracle_in_any_chunking(seed):
    rng = random.Random(seed)
    rows = random_capture(rng)
    check(rows, (None, rng.randint(1, 7), rng.randint(1, 7)))


# ---- captures: the samples with PFC and the generated PFC forensics scenarios --------------------
SAMPLES = ("pfc-storm", "pfc-pause-train", "slow-receiver", "pfc-without-ecn")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """pfc-violator (a NIC obeying pauses 12 us late) and hol-victim (routed ToR), written once."""
    from roceview.capture.writer import write_pcap
    from roceview.generate import generate

    out = {}
    for name in ("pfc-violator", "hol-victim"):
        cap = generate(name, seed=0)
        path = tmp_path_factory.mktemp(name) / f"{name}.pcap"
        write_pcap(path, cap.frames, cap.lengths, cap.ts_ns)
        out[name] = (path, cap)
    return out


def capture_answers(path, chunk):
    import roceview

    result = roceview.analyze(path, chunk_packets=chunk, diagnose=False)
    return held(result), result.paused_flows_table.text_rows()


@pytest.mark.parametrize("name", SAMPLES + ("pfc-violator", "hol-victim"))
def test_captures_give_the_same_answers_in_chunks_of_a_few_frames(name, generated):
    from pathlib import Path

    path = generated[name][0] if name in generated else Path(__file__).resolve().parents[2] / "captures" / f"{name}.pcap"
    whole = capture_answers(path, 1 << 16)
    assert whole[1] or name == "pfc-without-ecn", "flows toward a pausing MAC"   # (there: switch ports pause)
    rng = random.Random(name)
    for chunk in (rng.randint(2, 7), rng.randint(8, 40)):
        assert capture_answers(path, chunk) == whole, chunk


def test_a_late_nics_frames_inside_the_pause_are_events_with_the_generators_delay(generated):
    """Every frame the generator's truth lists as sent on a paused priority (its copy captured
    inside the pause) is an event, delayed as the truth says from the XOFF's copy."""
    import roceview

    path, cap = generated["pfc-violator"]
    events = roceview.analyze(path, diagnose=False).events_table
    delay = {ts: d for k, ts, d in zip(events.data["kind"], events.data["ts"].tolist(),
                                         events.data["pause_delay_ns"].tolist()) if k == "sent_while_paused"}
    truth = [v for v in cap.truth.as_dict()["pfc_violations"] if v["in_captured_pause"]]
    assert len(truth) > 20
    assert {v["ts_ns"]: delay.get(v["ts_ns"]) for v in truth} == {v["ts_ns"]: v["capture_delay_ns"] for v in truth}
