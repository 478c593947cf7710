"""`roceview tui` as a command: bad input is one line on stderr and exit 2, before any screen."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.tui import SAMPLES


@pytest.mark.parametrize("argv, message", [
    (["/nonexistent/x.pcap"], "/nonexistent/x.pcap: no such file"),
    (["README.md"], "README.md: not a pcap or pcapng capture"),
    (["captures/clean.pcap", "--pmtu", "7"], "--pmtu must be one of"),
    (["-r", "/nonexistent/x.pcap"], "/nonexistent/x.pcap: no such file"),     # tshark's -r names it too
    ([], "a capture is required: CAPTURE or -r FILE"),
])
def test_bad_input_is_one_line_and_exit_two_before_the_screen(argv, message):
    done = subprocess.run([sys.executable, "-m", "roceview", "tui", *argv], cwd=SAMPLES.parent,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
