"""priorities.csv: traffic, ECN and PFC per direction (source MAC -> destination MAC), PCP and DSCP.

Every count is checked against the packets table counted here one row at a time (pandas over
roceview.read_packets), the PFC columns against pfc.csv and the generator's truth; the rows add
up to the capture's totals; the result does not depend on the chunk size.
"""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

import roceview
from roceview.generate import generate, write_capture
from roceview.packets.batch import PROTO_NAMES
from roceview.render.export import CSV_FILES
from roceview.render.json_export import TABLES

from conftest import REAL
from helpers.analysis import T0, analyze_rows, req

SCENARIOS = ("priority-mismatch", "pfc-storm", "pfc-without-ecn", "incast", "healthy-dcqcn",
             "mixed-roce-versions", "pfc-other-priority", "clean")
ROCE = ("roce_v1", "roce_v2", "ib")
COUNTS = ("packets", "bytes", "roce_packets", "roce_bytes", "data_packets", "ect_packets", "ce_packets",
          "cnp_packets")


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    out = tmp_path_factory.mktemp("priorities")
    made = {}
    for name in SCENARIOS:
        cap = generate(name)
        write_capture(cap, out / f"{name}.pcap")
        made[name] = (out / f"{name}.pcap", cap.truth)
    return made


def _analyze(path, chunk=1 << 16):
    return roceview.analyze(str(path), diagnose=False, chunk_packets=chunk)


def _rows(result) -> list[dict]:
    table = result.priorities_table
    return [dict(zip(table.columns, r)) for r in zip(*(table.data[c] for c in table.columns))]


def _counted_one_by_one(path) -> dict:
    """(src_mac, dst_mac, pcp, dscp) -> the counts, from the packets table row by row."""
    df = roceview.read_packets(str(path))
    out: dict = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
    for r in df.itertuples():
        c = out[(_text(r.src_mac), _text(r.dst_mac), _number(r.pcp), _number(r.dscp))]
        c["packets"] += 1
        c["bytes"] += int(r.wire_len)
        if str(r.proto) not in ROCE:
            continue
        c["roce_packets"] += 1
        c["roce_bytes"] += int(r.wire_len)
        if _number(r.opcode) < 0:
            continue
        opcode = int(r.opcode)
        if opcode == 0x81:
            c["cnp_packets"] += 1
        elif (opcode & 0x1F) not in (0x11, 0x12):        # neither ACK nor atomic ACK: a data packet
            c["data_packets"] += 1
            ecn = _number(r.ecn)
            c["ect_packets"] += ecn > 0
            c["ce_packets"] += ecn == 3
    return dict(out)


def _number(value) -> int:
    return -1 if pd.isna(value) else int(value)


def _text(value) -> str:
    return "" if pd.isna(value) else str(value)


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_count_equals_the_packets_counted_one_by_one(captures, name):
    path, _ = captures[name]
    result = _analyze(path)
    want = _counted_one_by_one(path)
    got = {(r["src_mac"], r["dst_mac"], int(r["pcp"]), int(r["dscp"])): {c: int(r[c]) for c in COUNTS}
           for r in _rows(result) if r["packets"]}
    assert got == want
    for r in _rows(result):
        if not r["packets"]:
            continue
        prio = int(r["pcp"]) if r["pcp"] >= 0 else int(r["dscp"]) >> 3 if r["dscp"] >= 0 else None
        assert r["priority"] == ("" if prio is None else str(prio))
        assert r["roce_share"] == pytest.approx(r["roce_bytes"] / r["bytes"])
        if r["ect_packets"]:
            assert r["ce_share"] == pytest.approx(r["ce_packets"] / r["ect_packets"])
        else:
            assert r["ce_share"] != r["ce_share"]                  # NaN: blank


@pytest.mark.parametrize("name", SCENARIOS)
def test_rows_add_up_to_the_capture_and_to_pfc_csv(captures, name):
    path, _ = captures[name]
    result = _analyze(path)
    rows = _rows(result)
    assert sum(r["packets"] for r in rows) == result.summary["packets"]
    pfc = result.pfc_table.data
    pauses = {(m, p): (f, res, us) for m, p, f, res, us in zip(pfc["src_mac"], pfc["priority"], pfc["pause_frames"],
                                                               pfc["resume_frames"], pfc["paused_us"])}
    seen = {}
    for r in rows:
        if r["pause_frames"] or r["resume_frames"]:
            key = (r["dst_mac"], r["priority"])
            seen[key] = (r["pause_frames"], r["resume_frames"], r["paused_us"])
        else:
            assert (r["dst_mac"], r["priority"]) not in pauses
    assert seen == pauses                       # every (pausing MAC, priority) of pfc.csv, nothing more


def test_pauses_from_a_host_join_the_traffic_sent_to_it(captures):
    path, truth = captures["pfc-storm"]
    rows = _rows(_analyze(path))
    (host,) = [m for m, who in truth.pause_sources.items() if who == "host"]
    paused = [r for r in rows if r["dst_mac"] == host and r["priority"] == "3"]
    assert len(paused) == 1 and paused[0]["roce_packets"] > 0 and paused[0]["src_mac"]
    assert paused[0]["pause_frames"] == truth.counters["pfc_xoff_sent_prio3"]
    assert paused[0]["resume_frames"] == truth.counters["pfc_xon_sent_prio3"]
    assert paused[0]["paused_us"] > 100_000                      # the 150 ms hang


def test_pauses_from_switch_ports_no_frame_is_sent_to_get_rows_of_their_own(captures):
    path, truth = captures["pfc-without-ecn"]
    rows = _rows(_analyze(path))
    switch = sorted(m for m, who in truth.pause_sources.items() if who == "switch")
    own = [r for r in rows if r["dst_mac"] in switch and r["priority"] == "3"]
    assert sorted(r["dst_mac"] for r in own) == switch
    assert sum(r["pause_frames"] for r in own) == truth.counters["pfc_xoff_sent_prio3"]
    assert all(r["packets"] == 0 and r["src_mac"] == "" and r["pcp"] == -1 and r["dscp"] == -1 for r in own)
    assert all(r["paused_us"] > 0 for r in own)


def test_ce_marks_are_the_generators(captures):
    path, truth = captures["incast"]
    rows = _rows(_analyze(path))
    assert sum(r["ce_packets"] for r in rows) == truth.counters["ce_marked"]
    assert sum(r["cnp_packets"] for r in rows) == truth.counters["cnps_sent"]
    on3 = [r for r in rows if r["priority"] == "3" and r["ect_packets"]]
    assert on3 and all(0 <= r["ce_share"] <= 1 for r in on3)


def test_roce_on_two_priorities_shows_as_two_rows(captures):
    path, _ = captures["priority-mismatch"]
    rows = [r for r in _rows(_analyze(path)) if r["roce_packets"]]
    assert {r["priority"] for r in rows} == {"0", "3"}
    assert {(r["pcp"], r["dscp"]) for r in rows if r["priority"] == "0"} == {(0, 0)}


def test_rocev1_takes_its_dscp_and_ecn_from_the_grh(captures):
    path, _ = captures["mixed-roce-versions"]
    result = _analyze(path)
    v1 = result.summary["protocols"]["roce_v1"]
    rows = [r for r in _rows(result) if r["roce_packets"]]
    assert v1 and all(r["dscp"] == 26 and r["priority"] == "3" for r in rows)
    assert sum(r["ect_packets"] for r in rows) == sum(r["data_packets"] for r in rows)


@pytest.mark.parametrize("name", ["pfc-storm", "incast", "priority-mismatch"])
def test_the_table_does_not_depend_on_the_chunk_size(captures, name):
    path, _ = captures[name]
    want = _analyze(path).priorities_table.text_rows()
    assert _analyze(path, chunk=7).priorities_table.text_rows() == want
    assert _analyze(path, chunk=64).priorities_table.text_rows() == want


def test_8023x_pause_is_priority_all_as_in_pfc_csv():
    rows = [req(T0 + i * 1000, i) for i in range(5)]
    rows.append(dict(proto="pause", ts=T0 + 500, mac="02:00:00:00:00:0b", quanta=300))
    rows.append(dict(proto="pfc", ts=T0 + 700, mac="02:00:00:00:00:0a", enable=0x08, quanta=[0, 0, 0, 2000, 0, 0, 0, 0]))
    rows.sort(key=lambda r: r["ts"])
    got = _rows(analyze_rows(rows))
    pause = [r for r in got if r["priority"] == "all"]
    assert [(r["dst_mac"], r["pause_frames"], r["packets"]) for r in pause] == [("02:00:00:00:00:0b", 1, 0)]
    assert pause[0]["paused_us"] == pytest.approx(300 * 512 / 100.0 / 1000)
    pfc = [r for r in got if r["priority"] == "3" and r["pause_frames"]]
    assert [r["dst_mac"] for r in pfc] == ["02:00:00:00:00:0a"]
    assert sum(r["packets"] for r in got) == len(rows)


def test_a_pause_repeats_on_every_row_toward_the_paused_mac_and_priority():
    """Two DSCPs toward one MAC on one priority: both rows carry its pause (what held them)."""
    from roceview.analysis.priorities import PriorityCounts, priorities_table
    from roceview.analysis.tables import PFC_COLUMNS, Table
    from roceview.packets.batch import PROTO_CODE, Batch

    n = 4
    batch = Batch(n, {"ts_ns": np.arange(n, dtype=np.int64) + T0, "_proto": np.full(n, PROTO_CODE["other"], np.uint8),
                      "wire_len": np.full(n, 100, np.uint32), "_src_mac": np.full(n, 1, np.uint64),
                      "_dst_mac": np.full(n, 0x0a, np.uint64), "pcp": np.zeros(n, np.uint8),
                      "dscp": np.array([24, 24, 26, 26], np.uint8)}, {"pcp": np.zeros(n, bool)})
    counts = PriorityCounts()
    counts.feed(batch)
    pfc = Table(PFC_COLUMNS, {"src_mac": ["00:00:00:00:00:0a"], "priority": ["3"], "pause_frames": np.array([2]),
                              "resume_frames": np.array([1]), "pause_quanta": np.array([9]),
                              "paused_us": np.array([5.0]), "longest_pause_us": np.array([4.0]),
                              "first_ts": np.array([T0]), "last_ts": np.array([T0 + 9])})
    table = priorities_table(counts.state(), pfc)
    got = [dict(zip(table.columns, r)) for r in zip(*(table.data[c] for c in table.columns))]
    assert [(r["dscp"], r["packets"], r["pause_frames"], r["paused_us"]) for r in got] == [(24, 2, 2, 5.0),
                                                                                         (26, 2, 2, 5.0)]


def test_every_output_carries_the_table(captures, tmp_path):
    assert ("priorities.csv", "priorities_table") in CSV_FILES
    assert ("priorities", "priorities_table") in TABLES
    result = _analyze(captures["pfc-storm"][0])
    assert list(result.priorities.columns) == list(result.priorities_table.columns)
    assert len(result.priorities) == len(result.priorities_table)


LAN = sorted(REAL.glob("*mixed-lan*.pcapng")) if REAL.is_dir() else []


@pytest.mark.skipif(not LAN, reason=f"no *mixed-lan* capture in {REAL}")
def test_lan_traffic_beside_roce_has_rows_with_no_roce():
    result = _analyze(LAN[0])
    rows = _rows(result)
    lan = [r for r in rows if r["packets"] and not r["roce_packets"]]
    assert lan and all(r["roce_share"] == 0 for r in lan)
    assert sum(r["packets"] for r in rows) == result.summary["packets"]
    assert sum(r["roce_packets"] for r in rows) == result.summary["roce_packets"]


# ---- fuzzed: the counters against a dict counted row by row ---------------------------------
# ROCEVIEW_FUZZ_EXAMPLES=2000 pytest tests/analysis/test_priorities.py -k fuzzed  (CI: 40)
EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "40"))


def _random_rows(rng: np.random.Generator) -> dict:
    """Frames of random keys in runs of random length (bursts, or interleaved row by row), of
    every protocol, with missing values, timestamps now and then out of order."""
    macs = rng.integers(0, 1 << 48, int(rng.integers(1, 40)), dtype=np.uint64)
    n = int(rng.integers(1, 300))
    run = rng.integers(1, int(rng.choice([2, 8, 64])), n)
    key_of_run = rng.integers(0, 1 << 30, n)
    key = np.repeat(key_of_run, run)[:n]
    cols = {"_src_mac": macs[key % len(macs)], "_dst_mac": macs[(key >> 6) % len(macs)],
            "pcp": ((key >> 12) % 8).astype(np.uint8), "dscp": ((key >> 15) % 64).astype(np.uint8),
            "_proto": rng.integers(0, len(PROTO_NAMES), n).astype(np.uint8),
            "opcode": rng.choice(np.array([0x04, 0x0A, 0x0C, 0x10, 0x11, 0x12, 0x64, 0x81, 0xFF], np.uint8), n),
            "ecn": rng.integers(0, 4, n).astype(np.uint8), "wire_len": rng.integers(60, 9000, n).astype(np.uint32),
            "ts_ns": T0 + np.cumsum(rng.integers(-3 if rng.random() < 0.3 else 0, 50, n))}
    valid = {c: rng.random(n) < p for c, p in (("pcp", 0.6), ("dscp", 0.9), ("ecn", 0.9), ("opcode", 0.9),
                                                ("_src_mac", 0.97)) if rng.random() < 0.7}
    if rng.random() < 0.2:
        del cols["_dst_mac"]                 # a batch without the column (native IB, a test's rows)
    return {"cols": cols, "valid": valid, "n": n}


def _oracle(frames: list[dict]) -> dict:
    from roceview.analysis import opcode_classes as op
    from roceview.analysis.priorities import DSCPS, NO_MAC

    out: dict = {}
    for f in frames:
        cols, valid = f["cols"], f["valid"]
        for i in range(f["n"]):
            ok = lambda c: c in cols and (c not in valid or bool(valid[c][i]))      # noqa: E731
            mac = lambda c: int(cols[c][i]) if ok(c) else NO_MAC                    # noqa: E731
            cls = ((int(cols["pcp"][i]) if ok("pcp") else -1) + 1) * DSCPS + (int(cols["dscp"][i]) if ok("dscp") else -1) + 1
            c = out.setdefault((mac("_src_mac"), mac("_dst_mac"), cls), dict.fromkeys(COUNTS, 0) | {"ts": []})
            c["packets"] += 1
            c["bytes"] += int(cols["wire_len"][i])
            c["ts"].append(int(cols["ts_ns"][i]))
            if PROTO_NAMES[cols["_proto"][i]] not in ROCE:
                continue
            c["roce_packets"] += 1
            c["roce_bytes"] += int(cols["wire_len"][i])
            flags = int(op.FLAGS[cols["opcode"][i]]) if ok("opcode") else 0
            c["cnp_packets"] += bool(flags & op.F_CNP)
            if flags & op.F_DATA:
                c["data_packets"] += 1
                c["ect_packets"] += ok("ecn") and int(cols["ecn"][i]) != 0
                c["ce_packets"] += ok("ecn") and int(cols["ecn"][i]) == 3
    return {k: {**{c: v[c] for c in COUNTS}, "first_ts": min(v["ts"]), "last_ts": max(v["ts"])} for k, v in out.items()}


def _as_dict(state: dict) -> dict:
    keys = zip(state["src"].tolist(), state["dst"].tolist(), state["cls"].tolist())
    return {k: {c: int(state[c][i]) for c in COUNTS + ("first_ts", "last_ts")} for i, k in enumerate(keys)}


def test_fuzzed_counters_equal_a_count_row_by_row():
    """Random keys in bursts and interleaved, hash collisions and the table's growth (hundreds
    of keys), missing columns and values, out-of-order time; the Dask engine's merge of two
    halves counted apart equals the whole."""
    from roceview.analysis.priorities import PriorityCounts, merged
    from roceview.packets.batch import Batch

    rng = np.random.default_rng(20261206)
    failures = 0
    for _ in range(EXAMPLES):
        frames = [_random_rows(rng) for _ in range(int(rng.integers(1, 6)))]
        whole, halves = PriorityCounts(), [PriorityCounts(), PriorityCounts()]
        for k, f in enumerate(frames):
            batch = Batch(f["n"], dict(f["cols"]), dict(f["valid"]))
            whole.feed(batch)
            halves[k % 2].feed(batch)
        want = _oracle(frames)
        failures += _as_dict(whole.state()) != want
        failures += _as_dict(merged([h.state() for h in halves])) != want
    assert failures == 0, f"{failures} of {2 * EXAMPLES} tries differ"
