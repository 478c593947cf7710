"""Standard output that refuses writes: a full disk (/dev/full: ENOSPC) or a terminal that went
away (EIO). Every command ends with one line on stderr and exit 2, never a traceback; a broken
pipe (`| head`) stays quiet with exit 0, as tshark's does."""
from __future__ import annotations

import errno
import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from roceview.cli import Environment, main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = str(REPO / "captures" / "clean.pcap")
COMMANDS = [
    ["analyze", SAMPLE], ["analyze", SAMPLE, "--json", "-"], ["dissect", SAMPLE], ["dissect", "-V", SAMPLE],
    ["dissect", "-x", SAMPLE], ["dissect", "--jsonl", SAMPLE], ["dissect", "-T", "fields", "-e", "frame.number", SAMPLE],
    ["generate", "list"], ["generate", "clean", "-o", "-"], ["convert", SAMPLE, "-o", "-"],
    ["live", "-r", SAMPLE], ["--help"], ["--version"], ["analyze", "--help"],
]


def _run(argv, stdout, stdin=subprocess.DEVNULL):
    return subprocess.run([sys.executable, "-m", "roceview", *argv], stdout=stdout, stdin=stdin,
                          stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_full_disk_on_stdout_is_one_line_and_exit_2(argv):
    if argv[0] == "convert":
        pytest.importorskip("pyarrow")
    with open("/dev/full", "w") as full:
        proc = _run(argv, full)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1:] == ["roceview: error: cannot write to standard output: No space left on device"]
    assert "Traceback" not in proc.stderr


def test_a_terminal_gone_is_one_line_and_exit_2():
    """A terminal whose other side closed answers writes with EIO (the ssh session dropped)."""
    master, slave = pty.openpty()
    os.close(master)
    try:
        proc = _run(["dissect", SAMPLE], slave)
    finally:
        os.close(slave)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "roceview: error: cannot write to standard output: Input/output error"


class _Refusing(io.StringIO):
    def write(self, text):
        raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_refused_write_in_process_is_one_line_and_exit_2():
    from roceview.commands.base import GuardedStream

    err = io.StringIO()
    code = main(["dissect", SAMPLE], Environment(stdout=GuardedStream(_Refusing(), "standard output"), stderr=err))
    assert code == 2
    assert err.getvalue() == "roceview: error: cannot write to standard output: Input/output error\n"


def test_a_closed_pipe_stays_quiet_with_exit_0():
    proc = subprocess.Popen([sys.executable, "-m", "roceview", "dissect", SAMPLE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b""


@pytest.mark.parametrize("argv", [["generate", "network-loss", "-o", "-"], ["convert", SAMPLE, "-o", "-"],
                                  ["generate", "network-loss", "-o", "{tmp}/x.pcap", "--truth", "-"]],
                         ids=["generate", "convert", "truth"])
def test_a_closed_pipe_after_a_dash_output_stays_quiet_with_exit_0(argv, tmp_path):
    if argv[0] == "convert":
        pytest.importorskip("pyarrow")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.Popen([sys.executable, "-m", "roceview", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    assert proc.stderr.read() == b""


class _Partial(io.BytesIO):
    """Takes at most 10 bytes a write, then nothing (a stream closing under a large write)."""

    def __init__(self, budget: int):
        super().__init__()
        self.budget = budget

    def write(self, data):
        n = min(10, len(data), self.budget)
        self.budget -= n
        return super().write(bytes(data[:n]))


def test_a_write_taken_in_part_is_finished_or_an_error_never_shortened():
    from roceview.commands.base import GuardedStream
    from roceview.errors import OutputError

    whole = GuardedStream(_Partial(10**6), "standard output")
    assert whole.write(b"x" * 1000) == 1000 and whole._stream.getvalue() == b"x" * 1000
    with pytest.raises(OutputError, match="only 100 of 1,000 bytes were written"):
        GuardedStream(_Partial(100), "standard output").write(b"x" * 1000)
