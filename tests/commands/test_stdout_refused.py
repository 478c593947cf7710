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
    ["live", "-r", SAMPLE],
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
