"""Small batches (file ends: ring buffers of many small files) are joined in order into
batches of at most the chunk size before the analysis; full ones pass through uncopied."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

from roceview.packets.batch import Batch
from roceview.packets.read import coalesced, iter_batches

from conftest import REPO


def _batch(start: int, n: int, ts0: int | None = None) -> Batch:
    values = np.arange(start, start + n, dtype=np.int64)
    ts = values * 10 if ts0 is None else ts0 + np.arange(n, dtype=np.int64)
    return Batch(n, {"frame": values, "ts_ns": ts}, {"frame": values % 3 != 0})


def test_batches_that_overlap_in_time_are_not_joined():
    """Two files of the same moments (two mirror ports): joining them would put rows out of
    time order into one batch, and results would depend on the chunk size."""
    a, b, c = _batch(0, 10, ts0=1000), _batch(10, 10, ts0=1005), _batch(20, 10, ts0=2000)
    out = list(coalesced(iter([a, b, c]), 64))
    assert [x.n for x in out] == [10, 20]
    assert out[0] is a and out[1].cols["frame"].tolist() == list(range(10, 30))


def test_small_batches_are_joined_in_order_up_to_the_target():
    sizes = [10, 10, 70, 5, 100, 3, 30, 31, 2]
    batches, start = [], 0
    for n in sizes:
        batches.append(_batch(start, n))
        start += n
    out = list(coalesced(iter(batches), 64))
    assert [b.n for b in out] == [20, 70, 5, 100, 64, 2]
    assert out[1] is batches[2] and out[3] is batches[4]             # full batches are not copied
    frames = np.concatenate([b.cols["frame"] for b in out])
    assert frames.tolist() == list(range(start))
    assert np.concatenate([b.valid["frame"] for b in out]).tolist() == (frames % 3 != 0).tolist()
    assert max(b.n for b in out if all(b is not x for x in batches)) <= 64


def test_a_directory_of_small_files_analyses_as_one_file(tmp_path):
    """A PFC storm's 1,036 packets as one file and as 11 files of up to 100: identical CSVs,
    and the 11 files reach the analysis as batches of the chunk size."""
    one = tmp_path / "one.pcap"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "pfc-storm", "-o", str(one)], cwd=REPO,
                   check=True, capture_output=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    subprocess.run(["editcap", "-F", "nsecpcap", "-c", "100", str(one), str(parts / "p.pcap")], check=True,
                   capture_output=True)
    assert len(list(parts.iterdir())) == 11
    assert [b.n for b in iter_batches(str(parts), chunk_packets=300)] == [300, 300, 300, 136]
    for src, out in ((one, "a"), (parts, "b")):
        subprocess.run([sys.executable, "-m", "roceview", "analyze", str(src), "--csv", str(tmp_path / out)],
                       cwd=REPO, check=True, capture_output=True)
    for name in ("qps.csv", "pfc.csv", "events.csv", "timeline.csv", "findings.csv"):
        text = (tmp_path / "a" / name).read_text()
        assert text.count("\n") > 1, name
        assert (tmp_path / "b" / name).read_text() == text, name


def test_files_overlapping_in_time_are_merged_and_dissect_warns(tmp_path):
    """Two mirror ports' captures of the same moments: the packets table interleaves them by
    time, silently; dissect (file after file) says it does not; a ring buffer says nothing."""
    from roceview.capture.readers import read_records
    from roceview.capture.writer import write_pcap
    from roceview.packets.read import iter_chunks

    frames, ts = [], []
    for chunk in read_records(str(REPO / "captures" / "capture-drop.pcap"), 4096, lambda m: None):
        frames += [chunk.frame(i) for i in range(chunk.n)]
        ts += chunk.ts.tolist()
    for name, sel in (("ports", [range(0, len(frames), 2), range(1, len(frames), 2)]),
                      ("ring", [range(0, len(frames) // 2), range(len(frames) // 2, len(frames))])):
        (tmp_path / name).mkdir()
        for k, rows in enumerate(sel):
            write_pcap(tmp_path / name / f"p{k}.pcap", np.frombuffer(b"".join(frames[i] for i in rows), np.uint8),
                       [len(frames[i]) for i in rows], [ts[i] for i in rows])
    warnings = []
    merged = np.concatenate([b.cols["ts_ns"] for b in iter_batches(str(tmp_path / "ports"), warn=warnings.append)])
    assert merged.tolist() == sorted(ts) and warnings == []
    n = sum(b.n for _, b in iter_chunks(str(tmp_path / "ports"), warn=warnings.append))
    assert n == len(frames) and len(warnings) == 1
    assert "p1.pcap starts at" in warnings[0] and "one after the other" in warnings[0]
    warnings.clear()
    assert sum(b.n for _, b in iter_chunks(str(tmp_path / "ring"), warn=warnings.append)) == len(frames)
    assert warnings == []
