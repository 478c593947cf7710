"""`live -w FILE.pcapng` writes pcapng (the name decides, as in `generate`), from the pcap stream
tcpdump gives: the same frames and timestamps, whole blocks only, --count honoured."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roceview.capture.readers import read_records
from roceview.capture.writer import write_pcap

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "captures" / "incast.pcap"


def _live(stdin: bytes, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roceview", "live", "-r", "-", "--no-tui", *argv],
                          input=stdin, capture_output=True, cwd=REPO, timeout=120)


def _records(path):
    chunks = list(read_records(str(path), 1 << 20, lambda m: pytest.fail(m)))
    frames = [c.frame(i) for c in chunks for i in range(c.n)]
    return frames, np.concatenate([c.ts for c in chunks]).tolist()


@pytest.mark.parametrize("nanosecond", [True, False], ids=["ns-pcap", "us-pcap"])
def test_a_pcap_stream_is_saved_as_pcapng_with_the_same_frames_and_times(nanosecond, tmp_path):
    frames, ts = _records(SAMPLE)
    if not nanosecond:
        ts = [t // 1000 * 1000 for t in ts]
    stream = tmp_path / "in.pcap"
    write_pcap(stream, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames], ts, nanosecond=nanosecond)
    done = _live(stream.read_bytes(), "-w", str(tmp_path / "out.pcapng"))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out.pcapng"
    assert out.read_bytes()[:4] == bytes.fromhex("0a0d0d0a")
    assert _records(out) == (frames, ts)


def test_count_cuts_the_pcapng_after_the_nth_packet(tmp_path):
    done = _live(SAMPLE.read_bytes(), "-w", str(tmp_path / "out.pcapng"), "--count", "10")
    assert done.returncode == 0, done.stderr
    frames, _ = _records(tmp_path / "out.pcapng")
    assert frames == _records(SAMPLE)[0][:10]


def test_a_stream_cut_mid_record_leaves_whole_blocks(tmp_path):
    data = SAMPLE.read_bytes()
    done = _live(data[:len(data) - 37], "-w", str(tmp_path / "out.pcapng"))
    frames, _ = _records(tmp_path / "out.pcapng")
    assert frames == _records(SAMPLE)[0][:len(frames)] and len(frames) == 156, done.stderr


def test_tshark_reads_it_whole(tmp_path, tshark):
    _live(SAMPLE.read_bytes(), "-w", str(tmp_path / "out.pcapng"))
    done = subprocess.run([tshark, "-r", str(tmp_path / "out.pcapng")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 157, done.stderr
    assert "cut short" not in done.stderr
