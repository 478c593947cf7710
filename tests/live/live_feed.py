"""What the live stop tests share: a feeder process that writes bytes into `roceview live -r -`
through a pipe and then ends the stream or stalls with it open, and the check that a `-w` file
holds whole records only (a prefix of what was fed, no reader warning, tshark reads it without
"cut short" where tshark is installed)."""
from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from roceview.capture.readers import read_records

REPO = Path(__file__).resolve().parents[2]

FEEDER = """
import sys, time
data = open(sys.argv[1], "rb").read()
step, stall = int(sys.argv[2]), sys.argv[3] == "stall"
out = sys.stdout.buffer
for pos in range(0, len(data), step):     # records and blocks split across writes
    out.write(data[pos:pos + step]); out.flush()
if stall:
    time.sleep(600)                       # the pipe stays open: the stream never ends
"""


class Fed:
    """`roceview live -r - --no-tui ARGV` reading what a feeder writes; stderr is collected on a
    thread (its status lines say the stream is being read)."""

    def __init__(self, tmp_path: Path, data: bytes, *argv, stall: bool = True, step: int = 4096, preexec=None,
                 cwd: Path = REPO):
        src = tmp_path / f"fed-{time.monotonic_ns()}.bin"
        src.write_bytes(data)
        self.feeder = subprocess.Popen([sys.executable, "-c", FEEDER, str(src), str(step),
                                        "stall" if stall else "eof"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL)
        self.proc = subprocess.Popen([sys.executable, "-m", "roceview", "live", "-r", "-", "--no-tui", *map(str, argv)],
                                     cwd=cwd, stdin=self.feeder.stdout, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=preexec,
                                     env={**os.environ, "PYTHONPATH": str(REPO)})
        self.feeder.stdout.close()
        self.err_lines: list[bytes] = []
        self._err = threading.Thread(target=self._collect, daemon=True)
        self._err.start()
        self._out = b""
        self._reader = threading.Thread(target=self._read_out, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        for line in self.proc.stderr:
            self.err_lines.append(line)

    def _read_out(self) -> None:
        self._out = self.proc.stdout.read()

    def status_lines(self) -> int:
        return sum(line.startswith(b"live ") for line in self.err_lines)

    def wait_for_status(self, count: int = 1, deadline_s: float = 60) -> None:
        """Until `count` status lines (one a second) came: the stream is being read."""
        end = time.monotonic() + deadline_s
        while self.status_lines() < count and self.proc.poll() is None:
            assert time.monotonic() < end, "no status line: live hangs"
            time.sleep(0.02)

    def wait_for_handlers(self, deadline_s: float = 60) -> None:
        """Until roceview set its signal handlers (SIGTERM caught, /proc/PID/status SigCgt):
        before, a signal meets the interpreter's own start-up, which no roceview code runs in
        (SIGINT there is Python's "Fatal Python error: init_import_site ... KeyboardInterrupt")."""
        end = time.monotonic() + deadline_s
        bit = 1 << (signal.SIGTERM - 1)
        while self.proc.poll() is None:
            try:
                status = Path(f"/proc/{self.proc.pid}/status").read_text()
            except OSError:
                return
            caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
            if caught & bit:
                return
            assert time.monotonic() < end, "roceview never set its signal handlers"
            time.sleep(0.005)

    def signal(self, *signals, gap_s: float = 0.0) -> None:
        for k, sig in enumerate(signals):
            if k and gap_s:
                time.sleep(gap_s)
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def end_stream(self) -> None:
        self.feeder.kill()
        self.feeder.wait()

    def finish(self, deadline_s: float = 60) -> tuple[int, bytes, str]:
        """Exit status, stdout and stderr; a live that does not end in time fails the test."""
        try:
            code = self.proc.wait(deadline_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("live did not end: it hangs") from None
        finally:
            self.end_stream()
        self._err.join(10)
        self._reader.join(10)
        return code, self._out, b"".join(self.err_lines).decode(errors="replace")


def record_ends(data: bytes) -> list[int]:
    """Offsets just past each record (pcap: the file header and each record; pcapng: each
    block) of a well-formed capture."""
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        order = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        ends, pos = [], 0
        while pos + 8 <= len(data):
            pos += struct.unpack(order + "I", data[pos + 4:pos + 8])[0]
            ends.append(pos)
        return ends
    ends, pos = [24], 24
    while pos + 16 <= len(data):
        pos += 16 + struct.unpack("<I", data[pos + 8:pos + 12])[0]
        ends.append(pos)
    return ends


def check_whole(saved: Path, fed: bytes, boundaries: list[int] | None = None) -> int:
    """The -w file is a prefix of what was fed ending at a record boundary (when `boundaries`
    are given), roceview reads it without a warning, and tshark (where installed) reads it
    without "cut short". Returns its packet count."""
    data = saved.read_bytes()
    assert fed.startswith(data), "the -w file is not what was fed"
    if boundaries is not None:
        assert len(data) in boundaries, f"the -w file ends inside a record ({len(data)} bytes)"
    warnings: list[str] = []
    packets = sum(chunk.n for chunk in read_records(str(saved), 1 << 16, warnings.append))
    assert warnings == [], warnings
    tshark = shutil.which("tshark")
    if tshark is not None:
        proc = subprocess.run([tshark, "-r", str(saved)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "LC_ALL": "C"})
        assert proc.returncode == 0 and "cut short" not in proc.stderr, proc.stderr
    return packets
