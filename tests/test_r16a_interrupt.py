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
