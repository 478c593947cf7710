"""`--json /dev/stdout` is `--json -`: the JSON alone on stdout, the report on stderr, whether
stdout is a pipe or a redirected file (which must not be replaced: the report would be lost).
Named as /proc/self/fd/1, what /dev/stdout links to: a broken writer must not be able to
replace the system's /dev/stdout."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = str(REPO / "captures" / "network-loss-receiver-side.pcap")
pytestmark = pytest.mark.skipif(not Path("/proc/self/fd/1").exists(), reason="no /proc/self/fd")


def _analyze(stdout, json_path: str):
    return subprocess.run([sys.executable, "-m", "roceview", "analyze", SAMPLE, "--json", json_path],
                          cwd=REPO, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


def test_json_to_stdout_through_a_pipe_is_json_alone():
    proc = _analyze(subprocess.PIPE, "/proc/self/fd/1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["packets"] == 225
    assert "Capture " in proc.stderr


def test_json_to_a_redirected_stdout_keeps_the_file_and_the_report(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        inode = out.stat().st_ino
        proc = _analyze(fh, "/proc/self/fd/1")
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_ino == inode, "the redirected stdout was replaced"
    assert json.loads(out.read_text())["summary"]["packets"] == 225
    assert "Capture " in proc.stderr
