"""pfc_timeline: per (pause source MAC, priority) and timeline bucket, the XOFF frames and the time
paused, the continuous paused periods cut at the bucket edges. Summed over the buckets, each key's
paused time is pfc.csv's; rows only where something happened."""
from __future__ import annotations

import importlib
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

import roceview
from roceview.capture.writer import write_pcapng
from roceview.diagnose.pfc_timeline import PFC_TIMELINE_COLUMNS
from roceview.generate.frames import PfcFrame, pfc_frame

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000_000_000           # a multiple of 1 ms: buckets start at T0 + k ms
MS = 1_000_000
FULL_NS = 335_539                         # 65535 quanta x 512 bit times at 100 Gb/s, rounded
SWITCH, HOST = bytes.fromhex("0e5c0000ff10"), bytes.fromhex("0ec0de000011")


def _pfc(mac: bytes, quanta: int, prio: int = 3) -> bytes:
    slots = [0] * 8
    slots[prio] = quanta
    return pfc_frame(PfcFrame(mac, 1 << prio, tuple(slots)))


def _pause(mac: bytes, quanta: int) -> bytes:
    frame = bytes.fromhex("0180c2000001") + mac + struct.pack("!HHH", 0x8808, 0x0001, quanta)
    return frame + bytes(60 - len(frame))


def _rows(frames: list[tuple[int, bytes]], tmp_path, **kw) -> list[dict]:
    path = tmp_path / "cap.pcapng"
    write_pcapng(path, [f for _, f in frames], [T0 + t for t, _ in frames])
    result = roceview.analyze([str(path)], **kw)
    table = result.pfc_timeline_table
    assert table.columns[:5] == ("bucket_start", "src_mac", "priority", "pause_frames", "paused_us")
    return table.records()


def _at(records: list[dict]) -> list[tuple]:
    """(ms since T0, src_mac, priority, pause_frames, resume_frames, paused ns)."""
    return [((int(r["bucket_start"].replace(".", "")) - T0) // MS, r["src_mac"], r["priority"], r["pause_frames"],
             r["resume_frames"], round(r["paused_us"] * 1000)) for r in records]


def test_paused_periods_are_cut_at_bucket_edges(tmp_path):
    frames = [(900_000, _pfc(SWITCH, 0xFFFF)),         # paused 0.9 - 1.2 ms: 100 us in bucket 0, 200 in 1
              (1_200_000, _pfc(SWITCH, 0)),            # XON
              (2_500_000, _pause(HOST, 0xFFFF)),       # 802.3x PAUSE, runs its full time inside bucket 2
              (3_800_000, _pfc(SWITCH, 0xFFFF)),       # refreshed before it ran out: one period
              (4_050_000, _pfc(SWITCH, 0xFFFF)),       # 3.8 ms - 4.05 ms + 335.539 us
              (5_000_000, _pfc(SWITCH, 0))]            # a lone XON: a row of its own
    assert _at(_rows(frames, tmp_path)) == [
        (0, "0e:5c:00:00:ff:10", "3", 1, 0, 100_000),
        (1, "0e:5c:00:00:ff:10", "3", 0, 1, 200_000),
        (2, "0e:c0:de:00:00:11", "all", 1, 0, FULL_NS),
        (3, "0e:5c:00:00:ff:10", "3", 1, 0, 200_000),
        (4, "0e:5c:00:00:ff:10", "3", 1, 0, 50_000 + FULL_NS),
        (5, "0e:5c:00:00:ff:10", "3", 0, 1, 0)]


def test_a_pause_spanning_many_buckets_has_a_row_in_each_and_buckets_follow_the_bucket_option(tmp_path):
    frames = [(100_000 + k * 300_000, _pfc(SWITCH, 0xFFFF)) for k in range(10)] + [(3_050_000, _pfc(SWITCH, 0))]
    rows = _at(_rows(frames, tmp_path, bucket_ms=0.5))       # paused 0.1 - 3.05 ms, in 0.5 ms buckets
    assert [(r[0], r[5]) for r in rows] == [(0, 400_000), (0, 500_000), (1, 500_000), (1, 500_000),
                                            (2, 500_000), (2, 500_000), (3, 50_000)]
    assert sum(r[3] for r in rows) == 10 and rows[-1][4] == 1


def test_a_pause_still_running_at_the_end_of_the_capture_counts_its_full_time_as_pfc_csv(tmp_path):
    frames = [(900_000, _pfc(SWITCH, 0xFFFF)), (1_000_000, _pfc(SWITCH, 0xFFFF, prio=4))]
    rows = _at(_rows(frames, tmp_path))
    assert rows == [(0, "0e:5c:00:00:ff:10", "3", 1, 0, 100_000),      # the capture ends at 1 ms
                    (1, "0e:5c:00:00:ff:10", "3", 0, 0, FULL_NS - 100_000),
                    (1, "0e:5c:00:00:ff:10", "4", 1, 0, FULL_NS)]


def test_no_pause_frames_no_rows(tmp_path):
    result = roceview.analyze([str(REPO / "captures" / "clean.pcap")])
    assert len(result.pfc_timeline_table) == 0
    assert result.pfc_timeline_table.columns == PFC_TIMELINE_COLUMNS


def _generated(tmp_path, name: str) -> str:
    from roceview.generate import generate, write_capture

    path = tmp_path / f"{name}.pcap"
    write_capture(generate(name, seed=3), path)
    return str(path)


SAMPLES = sorted(p.name for p in (REPO / "captures").glob("*.pcap"))


@pytest.mark.parametrize("source", SAMPLES + ["pfc-storm", "pfc-pause-train", "slow-receiver"])
def test_each_keys_paused_time_over_the_buckets_is_pfc_csvs(source, tmp_path):
    path = str(REPO / "captures" / source) if source.endswith(".pcap") else _generated(tmp_path, source)
    result = roceview.analyze([path])
    pfc, timeline = result.pfc_table.records(), result.pfc_timeline_table.records()
    assert bool(pfc) == bool(timeline)
    for row in pfc:
        mine = [r for r in timeline if (r["src_mac"], r["priority"]) == (row["src_mac"], row["priority"])]
        assert sum(r["pause_frames"] for r in mine) == row["pause_frames"]
        assert sum(r["resume_frames"] for r in mine) == row["resume_frames"]
        # each paused period's end is rounded to a whole ns here, kept fractional in pfc.csv
        assert sum(r["paused_us"] for r in mine) == pytest.approx(row["paused_us"], abs=0.001 * row["pause_frames"])
    assert all(r["pause_frames"] or r["resume_frames"] or r["paused_us"] > 0 for r in timeline)
    starts = np.array([int(r["bucket_start"].replace(".", "")) for r in timeline], dtype=np.int64)
    bucket_ns = round(result.summary["timeline_bucket_ms"] * MS)
    assert (starts % bucket_ns == 0).all() and (np.diff(starts) >= 0).all()


def test_past_the_row_budget_the_first_buckets_in_time_are_kept_whole(tmp_path, monkeypatch):
    module = importlib.import_module("roceview.diagnose.pfc_timeline")     # the package names the function so
    frames = [(900_000, _pfc(SWITCH, 0xFFFF)), (950_000, _pfc(HOST, 0xFFFF)), (1_200_000, _pfc(SWITCH, 0)),
              (2_500_000, _pause(HOST, 0xFFFF))] + [(3_800_000 + k * 250_000, _pfc(SWITCH, 0xFFFF)) for k in range(8)]
    whole = _at(_rows(frames, tmp_path))        # 2 keys in buckets 0 and 1: a budget never splits a bucket
    assert len(whole) == 8 and [r[0] for r in whole] == [0, 0, 1, 1, 2, 3, 4, 5]
    for budget in range(1, len(whole) + 1):
        monkeypatch.setattr(module, "MAX_ROWS", budget)
        kept = _at(_rows(frames, tmp_path))
        assert kept == whole[:len(kept)] and budget - 1 <= len(kept) <= budget, budget


# ROCEVIEW_FUZZ_EXAMPLES=500 pytest tests/diagnose/test_pfc_timeline.py -k random: a longer run
EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "25"))


def _random_frames(rng: random.Random) -> list[tuple[int, bytes]]:
    """Pause, refresh and resume frames of a few MACs and priorities (802.3x PAUSE too), some
    closer than their pause time, some apart; at most 4 ms, in 0.25 - 1 ms buckets."""
    t, out = 0, []
    for _ in range(rng.randint(1, 40)):
        t += rng.choice([1, 100, 5_000, 200_000, 340_000, 600_000])
        mac = rng.choice([SWITCH, HOST])
        quanta = rng.choice([0, 1, 100, 0x7FFF, 0xFFFF])
        out.append((t, _pause(mac, quanta) if rng.random() < 0.2 else _pfc(mac, quanta, prio=rng.choice([3, 4]))))
    return out


def test_random_pause_trains_keep_pfc_csvs_counts_and_paused_time_in_their_buckets(tmp_path):
    rng = random.Random(33)
    for example in range(EXAMPLES):
        frames = _random_frames(rng)
        bucket_ms = rng.choice([0.25, 0.5, 1.0])
        path = tmp_path / "cap.pcapng"
        write_pcapng(path, [f for _, f in frames], [T0 + t for t, _ in frames])
        result = roceview.analyze([str(path)], bucket_ms=bucket_ms)
        records = result.pfc_timeline_table.records()
        pfc, rows = result.pfc_table.records(), _at(records)
        for row in pfc:
            mine = [r for r in rows if r[1:3] == (row["src_mac"], row["priority"])]
            assert sum(r[3] for r in mine) == row["pause_frames"], example
            assert sum(r[4] for r in mine) == row["resume_frames"], example
            assert sum(r[5] for r in mine) == pytest.approx(row["paused_us"] * 1000, abs=1 + row["pause_frames"]), example
        bucket_ns = round(bucket_ms * MS)
        assert all(0 <= r[5] <= bucket_ns for r in rows), example           # never more than its bucket
        keys = [(r["bucket_start"], r["src_mac"], r["priority"]) for r in records]
        assert keys == sorted(set(keys)), example                             # one row a key and bucket, in order
