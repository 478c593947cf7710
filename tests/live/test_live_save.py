"""It opened the path with open(path, "wb"), so a
capture that failed to start emptied an existing file (or filled it with what stdin held), a
FIFO with --count ended in an "Illegal seek" traceback (the cut called tell() on the pipe), and
a Ctrl-C before the capture began left a file. Now -w is an OutputFile like every writer, and
a capture that saved no whole file header leaves no file (an empty one is no capture)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.cli import run_err as run

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "clean.pcap"


def live(tmp_path, *argv, stdin=None):
    return subprocess.Popen([sys.executable, "-m", "roceview", "live", "--no-tui", *map(str, argv)], cwd=tmp_path,
                            stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_source_that_does_not_open_leaves_the_existing_file(tmp_path):
    old = tmp_path / "old.pcap"
    old.write_bytes(b"mine")
    code, err = run("live", "--no-tui", "-r", tmp_path / "missing.pcap", "-w", old)
    assert code == 2 and "cannot open" in err
    assert old.read_bytes() == b"mine" and sorted(p.name for p in tmp_path.iterdir()) == ["old.pcap"]


def test_a_stream_that_is_not_a_capture_leaves_the_existing_file(tmp_path):
    old = tmp_path / "old.pcap"
    old.write_bytes(b"mine")
    proc = live(tmp_path, "-r", "-", "-w", old, stdin=subprocess.PIPE)
    _, err = proc.communicate(b"not a capture at all, no".decode(), timeout=120)
    assert proc.returncode == 2 and "not a pcap" in err
    assert old.read_bytes() == b"mine" and sorted(p.name for p in tmp_path.iterdir()) == ["old.pcap"]


def test_count_with_a_fifo_is_written_directly(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, err = run("live", "--no-tui", "-r", CAPTURE, "--count", "5", "-w", fifo)
    reader.join(60)
    assert code == 0, err
    assert got and got[0] == CAPTURE.read_bytes()[:len(got[0])] and len(got[0]) > 24   # not cut: a pipe
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"] and fifo.is_fifo()


def test_ctrl_c_keeps_what_was_captured_and_a_second_one_too(tmp_path):
    data = CAPTURE.read_bytes()
    for presses in (1, 2):
        out = tmp_path / f"out{presses}.pcap"
        proc = live(tmp_path, "-r", "-", "-w", out, stdin=subprocess.PIPE)
        os.write(proc.stdin.fileno(), data)
        line = proc.stderr.readline()            # the first status line: the stream is being read
        assert line.startswith("live "), line
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.05)
        rest = proc.stderr.read()
        code = proc.wait(120)
        proc.stdin.close()
        assert code in ((0,) if presses == 1 else (0, 130)), (code, rest)
        assert "Traceback" not in rest
        assert out.read_bytes() == data           # every record read, the file in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out1.pcap", "out2.pcap"]


def test_ctrl_c_before_the_capture_starts_leaves_no_file(tmp_path):
    for k in range(3):
        out = tmp_path / f"out{k}.pcap"
        proc = live(tmp_path, "-r", "-", "-w", out, stdin=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not any(tmp_path.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.001)                     # -w is open: the source and analysis are starting
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 130) and "Traceback" not in err, err
        assert list(tmp_path.iterdir()) == [], (k, err)   # (0: the live handler took it: nothing was read)


def test_a_closed_terminal_keeps_what_was_captured_and_leaves_no_part_file(tmp_path):
    """SIGHUP (the terminal or ssh session gone) during `live -w`: exit 129, the records read
    are in the file, no `.out.pcap.*.part` is left (it was: SIGHUP had no handler)."""
    data = CAPTURE.read_bytes()
    out = tmp_path / "out.pcap"
    proc = live(tmp_path, "-r", "-", "-w", out, stdin=subprocess.PIPE)
    os.write(proc.stdin.fileno(), data)
    line = proc.stderr.readline()                # the first status line: the stream is being read
    assert line.startswith("live "), line
    proc.send_signal(signal.SIGHUP)
    rest = proc.stderr.read()
    code = proc.wait(120)
    proc.stdin.close()
    assert code == 129 and "Traceback" not in rest, (code, rest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pcap"]
    assert out.read_bytes() == data
