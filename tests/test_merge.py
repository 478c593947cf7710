"""Several files are merged in time order (roceview.merge): two mirror ports' captures of the
same minutes analyse as the one capture they were split from; a ring buffer's files pass
through batch by batch."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from roceview.batch import Batch
from roceview.capture.readers import read_records
from roceview.capture.writer import write_pcap
from roceview.merge import merge_in_time
from roceview.packets import iter_batches

from conftest import REPO, SAMPLES

TABLES = ("qps.csv", "pfc.csv", "events.csv", "timeline.csv", "findings.csv")


def _source(ts: list[int], tag: int, size: int) -> list[Batch]:
    ts = np.asarray(ts, dtype=np.int64)
    tags = np.full(len(ts), tag, np.int64)
    return [Batch(len(ts[k:k + size]), {"ts_ns": ts[k:k + size], "tag": tags[k:k + size],
                                        "row": np.arange(k, k + len(ts[k:k + size]))})
            for k in range(0, len(ts), size)]


@pytest.mark.parametrize("seed", range(8))
def test_rows_come_out_in_time_order_ties_in_file_order(seed):
    rng = np.random.default_rng(seed)
    sources = []
    for tag in range(rng.integers(2, 6)):
        start = int(rng.integers(0, 2000)) if seed % 2 else tag * 10_000      # overlapping, or a ring
        n = int(rng.integers(0, 300))
        sources.append(_source(sorted((start + rng.integers(0, 3000, n) // 7 * 7).tolist()), tag,
                               int(rng.integers(1, 80))))
    starts = [int(s[0].cols["ts_ns"][0]) if s else -1 for s in sources]
    order = sorted(range(len(sources)), key=lambda k: starts[k])
    sources, starts = [sources[k] for k in order], [starts[k] for k in order]
    out = list(merge_in_time(starts, lambda k: iter(sources[k])))
    got = [(t, g, r) for b in out for t, g, r in zip(b.cols["ts_ns"].tolist(), b.cols["tag"].tolist(),
                                                    b.cols["row"].tolist())]
    rank = {src[0].cols["tag"][0]: i for i, src in enumerate(sources) if src}
    want = sorted(((t, g, r) for s in sources for b in s for t, g, r in
                   zip(b.cols["ts_ns"].tolist(), b.cols["tag"].tolist(), b.cols["row"].tolist())),
                  key=lambda x: (x[0], rank[x[1]], x[2]))
    assert got == want
    frames = np.concatenate([b.cols["frame"] for b in out]) if out else np.zeros(0)
    assert frames.tolist() == list(range(1, len(want) + 1))


def test_a_ring_buffers_batches_pass_through_uncopied():
    sources = [_source(list(range(k * 100, k * 100 + 50)), k, 20) for k in range(3)]
    flat = [b for s in sources for b in s]
    out = list(merge_in_time([0, 100, 200], lambda k: iter(sources[k])))
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
def test_two_ports_split_from_one_capture_analyse_as_that_capture(name, tmp_path):
    n = _split(SAMPLES / name, tmp_path / "ports")
    ts = np.concatenate([b.cols["ts_ns"] for b in iter_batches(str(tmp_path / "ports"), chunk_packets=n // 3)])
    assert len(ts) == n and (np.diff(ts) >= 0).all()         # interleaved, not one file after the other
    for src, out in ((SAMPLES / name, "one"), (tmp_path / "ports", "two")):
        subprocess.run([sys.executable, "-m", "roceview", "analyze", str(src), "--csv", str(tmp_path / out)],
                       cwd=REPO, check=True, capture_output=True)
    for table in TABLES:
        text = (tmp_path / "one" / table).read_text()
        assert (tmp_path / "two" / table).read_text() == text, table
