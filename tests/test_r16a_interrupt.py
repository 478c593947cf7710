"""Review of issue 16 item 1: a Ctrl-C while `convert --partition-by flow` fills its hidden
`.NAME.partial` dataset folder left that folder (and its Parquet files) behind, exit 130;
it is removed now (roceview.interrupt's "tree" registration)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_c16a_interrupt import write_big_capture

REPO = Path(__file__).resolve().parents[1]


def test_sigint_while_a_partitioned_dataset_is_written_leaves_nothing(tmp_path):
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 1_000_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "roceview", "convert", big, "--partition-by", "flow",
                             "-o", work / "ds"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    partial = work / ".ds.partial"
    while proc.poll() is None and not partial.exists():
        time.sleep(0.002)                   # the dataset is being written from now on
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:                # finished before the signal arrived: a complete dataset
        assert (work / "ds").is_dir() and not partial.exists()
        pytest.skip("the conversion ended before the Ctrl-C")
    assert (proc.returncode, err) == (130, "")
    assert list(work.iterdir()) == []


def _convert(big: Path, out: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "roceview", "convert", big, "-o", out], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, **popen)


def _wait_for_part(proc, folder: Path) -> None:
    while proc.poll() is None and not any(".part" in p.name for p in folder.iterdir()):
        time.sleep(0.002)                   # the output's temporary file exists from now on


def test_sigterm_removes_the_temporary_file_and_exits_143(tmp_path):
    """`timeout 60 roceview convert ...` sends SIGTERM: it left `.p.parquet.XXXX.part`."""
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 1_000_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = _convert(big, work / "p.parquet")
    _wait_for_part(proc, work)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the conversion ended before the signal")
    assert (proc.returncode, err) == (143, "")
    assert list(work.iterdir()) == []


def test_a_sigint_the_parent_ignores_stays_ignored(tmp_path):
    """A shell script's `roceview ... &` runs with SIGINT ignored (CPython then installs no
    handler of its own); roceview installed its handler over it, so a Ctrl-C meant for the
    script's foreground job ended the background conversion."""
    pytest.importorskip("pyarrow")
    big = write_big_capture(tmp_path / "big.pcap", 300_000)
    work = tmp_path / "work"
    work.mkdir()
    proc = _convert(big, work / "p.parquet", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    _wait_for_part(proc, work)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert [p.name for p in work.iterdir()] == ["p.parquet"]
