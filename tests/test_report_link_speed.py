"""The report states the link speed pause times were computed at (issue 15, item 9): quanta are
512 bit times, so a pause's length depends on a speed the capture rarely shows."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _report(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "roceview", "analyze", *args], cwd=REPO, capture_output=True,
                          text=True, check=True, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"}).stdout


def test_the_pfc_table_names_the_assumed_link_speed():
    out = _report("captures/pfc-storm.pcap", "--link-speed", "25")
    assert "pause times at an assumed 25 Gb/s link (--link-speed)" in out.split("PFC / PAUSE", 1)[1]


def test_no_speed_line_without_pause_frames():
    assert "assumed" not in _report("captures/clean.pcap").split("PFC / PAUSE", 1)[1]
