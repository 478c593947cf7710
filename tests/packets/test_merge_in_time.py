"""Several files are merged in time order (roceview.packets.merge): two mirror ports' captures of the
same minutes analyze as the one capture they were split from; a ring buffer's files pass
through batch by batch."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from roceview.packets.batch import Batch
from roceview.capture.readers import read_records
from roceview.capture.writer import write_pcap
from roceview.packets.merge import merge_in_time
from roceview.packets.read import iter_batches

from conftest import REPO, SAMPLES

TABLES = ("qps.csv", "pfc.csv", "events.csv", "timeline.csv", "findings.csv")


def _source(ts: list[int], tag: int, size: int) -> list[Batch]:
    ts = np.asarray(ts, dtype=np.int64)
    tags = np.full(len(ts), tag, np.int64)
    return [Batch(len(ts[k:k + size]), {"ts_ns": ts[k:k + size], "tag": tags[k:k + size],
                                        "row": np.arange(k, k + len(ts[k:k + size]))})
            for k in range(0, len(ts), size)]


@pytest.mark.parametrize("seed", range(40))
def test_rows_come_out_by_time_ties_in_file_order_each_files_own_order_kept(seed):
    """The order is a stable sort by (running maximum of the file's timestamps, file, row):
    whatever the batch sizes; a row stamped before its predecessor stays behind it."""
    rng = np.random.default_rng(seed)
    sources = []
    for tag in range(int(rng.integers(2, 6))):
        start = int(rng.integers(0, 2000)) if seed % 2 else tag * 10_000      # overlapping, or a ring
        n = int(rng.integers(0, 300))
        ts = np.sort(start + rng.integers(0, 3000, n) // 7 * 7)
        if seed % 3 == 0 and n > 10:                                          # some steps back in time
            back = rng.choice(n, n // 10, replace=False)
            ts[back] -= rng.integers(0, 50, len(back))
        sources.append(_source(ts.tolist(), tag, int(rng.integers(1, 80))))
    starts = [int(s[0].cols["ts_ns"][0]) if s else -(1 << 62) for s in sources]
    order = sorted(range(len(sources)), key=lambda k: starts[k])
    sources, starts = [sources[k] for k in order], [starts[k] for k in order]
    chunk_rows = int(rng.integers(1, 500))
    out = list(merge_in_time(starts, lambda k, n: iter(sources[k]), chunk_rows))
    got = [(g, r) for b in out for g, r in zip(b.cols["tag"].tolist(), b.cols["row"].tolist())]
    want = []
    for rank, src in enumerate(sources):
        ts = np.concatenate([b.cols["ts_ns"] for b in src]) if src else np.zeros(0, np.int64)
        key = np.maximum.accumulate(ts) if len(ts) else ts
        tags = [b.cols["tag"][0] for b in src][:1]
        want += [(int(k), rank, int(tags[0]), r) for r, k in enumerate(key.tolist())]
    assert got == [(g, r) for _, _, g, r in sorted(want)]
    assert all(b.n <= max(chunk_rows, 80) for b in out)
    frames = np.concatenate([b.cols["frame"] for b in out]) if out else np.zeros(0)
    assert frames.tolist() == list(range(1, len(want) + 1))


def test_a_ring_buffers_batches_pass_through_uncopied():
    sources = [_source(list(range(k * 100, k * 100 + 50)), k, 20) for k in range(3)]
    flat = [b for s in sources for b in s]
    out = list(merge_in_time([0, 100, 200], lambda k, n: iter(sources[k]), 1000))
    assert len(out) == len(flat) and all(a is b for a, b in zip(out, flat))


def _split(path, out_dir, parts: int = 2):
    """The capture's packets dealt round-robin into `parts` files (two mirror ports)."""
    frames, ts, wire = [], [], []
    for chunk in read_records(str(path), 4096, lambda m: None):
        frames += [chunk.frame(i) for i in range(chunk.n)]
        ts += chunk.ts.tolist()
        wire += chunk.wire.tolist()
    out_dir.mkdir()
    for p in range(parts):
        sel = range(p, len(frames), parts)
        write_pcap(out_dir / f"port{p}.pcap", np.frombuffer(b"".join(frames[i] for i in sel), np.uint8),
                   [len(frames[i]) for i in sel], [ts[i] for i in sel], wire_lengths=[wire[i] for i in sel])
    return len(frames)


@pytest.mark.parametrize("name", ["capture-drop.pcap", "incast.pcap", "network-loss-receiver-side.pcap",
                                  "pfc-storm.pcap"])
def test_two_ports_split_from_one_capture_analyze_as_that_capture(name, tmp_path):
    n = _split(SAMPLES / name, tmp_path / "ports")
    ts = np.concatenate([b.cols["ts_ns"] for b in iter_batches(str(tmp_path / "ports"), chunk_packets=n // 3)])
    assert len(ts) == n and (np.diff(ts) >= 0).all()         # interleaved, not one file after the other
    for src, out in ((SAMPLES / name, "one"), (tmp_path / "ports", "two")):
        subprocess.run([sys.executable, "-m", "roceview", "analyze", str(src), "--csv", str(tmp_path / out)],
                       cwd=REPO, check=True, capture_output=True)
    for table in TABLES:
        text = (tmp_path / "one" / table).read_text()
        assert (tmp_path / "two" / table).read_text() == text, table


def _frames_ts(name: str):
    frames, ts = [], []
    for chunk in read_records(str(SAMPLES / name), 4096, lambda m: None):
        frames += [chunk.frame(i) for i in range(chunk.n)]
        ts += chunk.ts.tolist()
    return frames, ts


def _write(path, frames, ts):
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames], ts)


def test_a_files_step_back_in_time_survives_the_merge(tmp_path):
    """A file's own order is kept, so a timestamp that steps back is still seen (and reported)
    when another file overlaps it."""
    import roceview

    frames, ts = _frames_ts("capture-drop.pcap")
    back = list(ts[:120])
    back[60] = back[59] - 5_000                                   # one packet stamped 5 us early
    (tmp_path / "d").mkdir()
    _write(tmp_path / "d" / "a.pcap", frames[:120], back)
    _write(tmp_path / "d" / "b.pcap", frames[120:], ts[120:])
    merged = np.concatenate([b.cols["ts_ns"] for b in iter_batches(str(tmp_path / "d"), chunk_packets=50)])
    assert merged.tolist()[:120] == back                          # file a first (b starts later), its order kept
    kinds = set(roceview.analyze(str(tmp_path / "d"), chunk_packets=50, warn=lambda m: None).findings["kind"])
    assert "timestamps_backwards" in kinds


@pytest.mark.parametrize("chunk", [4, 7, 1 << 16])
def test_several_files_keep_distinct_interfaces_when_a_pcapng_shows_one_late(tmp_path, chunk):
    from roceview.capture.writer import pcapng_bytes

    frames, _ = _frames_ts("capture-drop.pcap")
    t0 = 1_700_000_000_000_000_000
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.pcapng").write_bytes(pcapng_bytes(frames[:16], [t0 + 10 * i for i in range(16)],
                                                           interfaces=[(1, 9), (1, 9)], if_ids=[0] * 8 + [1] * 8))
    _write(tmp_path / "d" / "b.pcap", frames[16:24], [t0 + 45 + 10 * i for i in range(8)])
    (tmp_path / "d" / "c.pcapng").write_bytes(pcapng_bytes(frames[24:40], [t0 + 50 + 10 * i for i in range(16)],
                                                           interfaces=[(1, 9), (1, 9)], if_ids=[0] * 9 + [1] * 7))
    seen: dict[int, set] = {0: set(), 1: set(), 2: set()}
    for b in iter_batches(str(tmp_path / "d"), chunk_packets=chunk, prefetch=False):
        for f, i in zip(b.cols["_file"].tolist(), b.cols["interface"].tolist()):
            seen[f].add(i)
    assert [len(seen[f]) for f in range(3)] == [2, 1, 2]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_equal_times_keep_file_order_whatever_the_batch_size(size):
    """a: 0, 5, 5, 6; b: 5, 7. At 5, both of a's rows come before b's, even when a's second
    row at 5 arrives in a later batch than b's."""
    a, b = _source([0, 5, 5, 6], 0, size), _source([5, 7], 1, size)
    out = list(merge_in_time([0, 5], lambda k, n: iter((a, b)[k]), 100))
    got = [(t, g) for x in out for t, g in zip(x.cols["ts_ns"].tolist(), x.cols["tag"].tolist())]
    assert got == [(0, 0), (5, 0), (5, 0), (5, 1), (6, 0), (7, 1)]


def test_paths_given_as_a_one_shot_iterator_are_read_once():
    import roceview

    one = SAMPLES / "clean.pcap"
    assert len(roceview.read_packets(iter([str(one)]))) == len(roceview.read_packets(str(one))) > 0
    two = [str(SAMPLES / "clean.pcap"), str(SAMPLES / "rnr.pcap")]
    assert len(roceview.read_packets(iter(two))) == len(roceview.read_packets(two))
