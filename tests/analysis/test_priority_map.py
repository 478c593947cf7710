"""A frame's priority in the analysis (sent_while_paused, paused_flows, priorities.csv) follows the
diagnoser's `trust` / `dscp_to_priority` settings, as diagnose/priority.py's priority_of does: a
fabric trusting DSCP pauses a VLAN-tagged PCP 0 / DSCP 26 frame's priority 3, not 0."""
import os
import random
from pathlib import Path

import numpy as np
import pytest

import roceview
from helpers.transforms import Record, read_pcap, roce_v2, write_pcap
from roceview.analysis import Analyzer
from roceview.diagnose.config import Config, load_config

from test_paused_flows import batch, held, oracle, paused_rows, random_capture

TPID = bytes.fromhex("8100")     # an 802.1Q tag's EtherType


def with_pcp(frame: bytes, pcp: int | None) -> bytes:
    """The frame with its 802.1Q tag's PCP set to `pcp` (tagged if it was not), or its tag
    removed (None); the ICRC covers neither."""
    tagged = frame[12:14] == TPID
    inner, tci = (frame[16:], int.from_bytes(frame[14:16], "big") & 0x1FFF) if tagged else (frame[12:], 100)
    return frame[:12] + (b"" if pcp is None else TPID + ((pcp << 13) | tci).to_bytes(2, "big")) + inner


def violator_captures(d: Path) -> dict[str, Path]:
    """pfc-violator (a NIC obeying the switch's priority-3 pauses late; its RoCE frames VLAN PCP 3
    with DSCP 26) as generated ("pcp3"), with every RoCE frame's PCP 0 instead ("pcp0"), and
    untagged ("untagged"), written in `d`: the pauses' PFC frames untouched."""
    from roceview.capture.writer import write_pcap as write_capture
    from roceview.generate import generate

    cap = generate("pfc-violator", seed=0)
    out = {"pcp3": d / "pcp3.pcap"}
    write_capture(out["pcp3"], cap.frames, cap.lengths, cap.ts_ns)
    link, records = read_pcap(out["pcp3"])
    assert {(roce_v2(r.frame).pcp, r.frame[roce_v2(r.frame).ip + 1] >> 2) for r in records if roce_v2(r.frame)} == {
        (3, 26)}
    for name, pcp in (("pcp0", 0), ("untagged", None)):
        out[name] = write_pcap(d / f"{name}.pcap", link, [Record(r.ts, with_pcp(r.frame, pcp)) if roce_v2(r.frame)
                                                          else r for r in records])
    return out


@pytest.fixture(scope="module")
def violator(tmp_path_factory):
    return violator_captures(tmp_path_factory.mktemp("violator"))


def analyzed(path, **settings):
    return roceview.analyze(path, config=load_config(**settings) if settings else None)


def findings_on(result, kind: str) -> list[str]:
    f = result.findings
    return [s for k, s in zip(f["kind"], f["summary"]) if k == kind]


def test_a_fabric_trusting_dscp_finds_the_tagged_frames_sent_while_paused(violator):
    tagged_path = violator["pcp0"]
    want = held(roceview.analyze(violator["pcp3"], diagnose=False))
    assert len(want) > 20 and {h[2] for h in want} == {"3"}
    assert held(roceview.analyze(violator["untagged"], diagnose=False)) == want    # DSCP 26 >> 3
    assert held(roceview.analyze(tagged_path, diagnose=False)) == []      # default: PCP 0 is the priority
    result = analyzed(tagged_path, trust="dscp")
    assert held(result) == want
    assert findings_on(result, "pfc_violation")
    assert {r["priority"] for r in paused_rows(result)} == {"3"}


@pytest.mark.parametrize("trust, which", [("dscp", "pcp0"), ("dscp", "pcp3"), ("auto", "untagged")])
def test_a_dscp_map_moves_the_frames_off_the_paused_priority(violator, trust, which):
    result = analyzed(violator[which], trust=trust, dscp_to_priority={"26": 5})
    assert held(result) == []
    assert not [s for s in findings_on(result, "pfc_violation") if "priority 3" in s]
    assert {r["priority"] for r in paused_rows(result)} == set()         # no flow sends on priority 3


def test_priorities_csv_priority_follows_the_map(violator):
    tagged_path = violator["pcp0"]

    def roce_priorities(result):
        t = result.priorities
        return set(t.loc[(t["roce_packets"] > 0) & (t["dscp"] == 26), "priority"])
    assert roce_priorities(roceview.analyze(tagged_path, diagnose=False)) == {"0"}
    assert roce_priorities(analyzed(tagged_path, trust="dscp")) == {"3"}
    assert roce_priorities(analyzed(tagged_path, trust="dscp", dscp_to_priority={"26": 5})) == {"5"}
    assert roce_priorities(analyzed(tagged_path, trust="pcp")) == {"0"}


def test_the_settings_reach_the_analysis_without_the_diagnoser(violator):
    tagged_path = violator["pcp0"]
    result = roceview.analyze(tagged_path, diagnose=False, config=load_config(trust="dscp"))
    assert len(held(result)) > 20


# ---- the table against the diagnoser's priority_of -------------------------------------------------
def configs(rng: random.Random, n: int):
    yield Config()
    for trust in ("auto", "pcp", "dscp"):
        yield load_config(trust=trust)
        yield load_config(trust=trust, dscp_to_priority={"26": 5, "0": 7, "63": 0})
    for _ in range(n):
        mapping = {str(d): rng.randrange(8) for d in rng.sample(range(64), rng.randint(0, 64))}
        yield load_config(trust=rng.choice(("auto", "pcp", "dscp")), dscp_to_priority=mapping)


def test_the_table_agrees_with_the_diagnosers_priority_of_in_every_state():
    from types import SimpleNamespace

    from roceview.diagnose.priority import priority_of

    for config in configs(random.Random(7), 20):
        table = config.priority_table()
        assert table.shape == (9, 65) and table.dtype == np.int8
        ctx = SimpleNamespace(config=config)
        for pcp in range(-1, 8):
            for dscp in range(-1, 64):
                want = priority_of(ctx, pcp, dscp)
                assert table[pcp + 1, dscp + 1] == (-1 if want is None else want), (config, pcp, dscp)


def test_the_default_settings_give_the_default_table():
    from roceview.analysis.priorities import DEFAULT_TABLE, priority_table

    assert np.array_equal(Config().priority_table(), DEFAULT_TABLE)
    assert np.array_equal(priority_table("auto", [d >> 3 for d in range(64)]), DEFAULT_TABLE)


# ---- random chunks against the per-frame oracle ---------------------------------------------------
def with_priority(rows: list[dict], table: np.ndarray) -> list[dict]:
    """The rows as the oracle reads them: each data frame's priority (the table's) as its PCP."""
    out = []
    for r in rows:
        if "proto" in r:
            out.append(r)
            continue
        p = int(table[(r["pcp"] + 1) if r["pcp"] is not None else 0, (r["dscp"] + 1) if r["dscp"] is not None else 0])
        out.append({**r, "pcp": p if p >= 0 else None, "dscp": None})
    return out


def analyzed_rows(rows, size, table):
    an = Analyzer(priority_table=table)
    for i in range(0, len(rows), size):
        an.feed(batch(rows[i:i + size]))
    return an.finish()


@pytest.mark.parametrize("seed", range(int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "20"))))
def test_random_captures_under_random_maps_agree_with_the_per_frame_oracle(seed):
    rng = random.Random(seed)
    rows = random_capture(rng)
    config = list(configs(rng, 1))[-1] if seed % 4 else Config()
    table = config.priority_table()
    want_events, want_table = oracle(with_priority(rows, table))
    for size in (len(rows), rng.randint(1, 7)):
        result = analyzed_rows(rows, size, table)
        assert held(result) == want_events, size
        got = {(r["src_mac"], r["priority"], r["flow"]): [int(r[c]) for c in ("packets", "bytes", "paused_packets",
                                                                                "paused_bytes")]
               for r in paused_rows(result)}
        assert got == want_table, size


def test_the_default_table_given_gives_what_no_table_gives():
    """The hard-coded default (no settings) and the table lookup agree."""
    from roceview.analysis.priorities import DEFAULT_TABLE

    for seed in range(10):
        rows = random_capture(random.Random(seed))
        a, b = analyzed_rows(rows, 5, None), analyzed_rows(rows, 5, DEFAULT_TABLE)
        assert held(a) == held(b) and paused_rows(a) == paused_rows(b)
        assert a.priorities_table.text_rows() == b.priorities_table.text_rows()

