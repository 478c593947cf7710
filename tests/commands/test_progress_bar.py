"""A rich progress bar on stderr when stderr is a terminal (run under a
pseudo-terminal here), none when it is a pipe. ROCEVIEW_PROGRESS_DELAY=0 shows it at once
(the default waits 2 s: short work shows nothing)."""
from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))   # test_interrupt beside this file
from test_interrupt import write_big_capture  # noqa: E402

CAPTURE = REPO / "captures" / "clean.pcap"


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return write_big_capture(tmp_path_factory.mktemp("progress") / "p.pcap", 400_000)


def under_pty(argv: list, delay: str = "0", interrupt_on: bytes | None = None) -> tuple[int, str, str]:
    """Run the CLI with stderr a pseudo-terminal, stdout a pipe: (code, stdout, terminal text);
    SIGINT once the terminal shows `interrupt_on`."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "ROCEVIEW_PROGRESS_DELAY": delay, "COLUMNS": "120"}
    proc = subprocess.Popen([sys.executable, "-m", "roceview", *map(str, argv)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:           # EIO: the child closed the terminal's last descriptor
            break
        if not data:
            break
        chunks.append(data)
        if interrupt_on is not None and interrupt_on in b"".join(chunks):
            proc.send_signal(signal.SIGINT)
            interrupt_on = None
    os.close(master)
    out = proc.stdout.read().decode()
    return proc.wait(60), out, b"".join(chunks).decode(errors="replace")


def test_analyze_draws_a_bar_with_bytes_and_rate_on_a_terminal(capture):
    code, out, term = under_pty(["analyze", capture])
    assert code == 0 and "Queue pairs" in out
    assert "analyzing" in term and "pkt/s" in term and "MB" in term, term
    assert "\x1b[" in term                 # drawn and then erased (transient)


def test_convert_draws_a_bar_on_a_terminal(capture, tmp_path):
    pytest.importorskip("pyarrow")
    code, _, term = under_pty(["convert", capture, "-o", tmp_path / "p.parquet"])
    assert code == 0
    assert "converting" in term and "pkt/s" in term, term


def test_generate_shows_its_step_on_a_terminal(tmp_path):
    # scale 100: ~1 s of work, so the bar (rich imported on its timer thread) shows whatever the load
    code, _, term = under_pty(["generate", "incast", "--scale", "100", "-o", tmp_path / "g.pcap"])
    assert code == 0
    assert "generating incast" in term or "writing" in term, term


def test_short_work_shows_no_bar_with_the_default_delay(tmp_path):
    code, _, term = under_pty(["analyze", CAPTURE], delay="2")
    assert code == 0 and "analyzing" not in term and "\x1b[" not in term, term


@pytest.mark.parametrize("argv", [["analyze", "{capture}"], ["generate", "incast", "-o", "{tmp}/g.pcap"]])
def test_no_bar_and_no_escape_codes_when_stderr_is_a_pipe(argv, capture, tmp_path):
    argv = [a.format(capture=capture, tmp=tmp_path) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(REPO), "ROCEVIEW_PROGRESS_DELAY": "0"}
    proc = subprocess.run([sys.executable, "-m", "roceview", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0
    assert "\x1b[" not in proc.stderr and "pkt/s" not in proc.stderr and "analyzing" not in proc.stderr


def test_rich_is_not_imported_when_stderr_is_not_a_terminal(capture, tmp_path):
    script = ("import io, sys\n"               # (never the real /dev/null: a regressed writer replaced it)
              "from roceview.cli import Environment, main\n"
              f"code = main(['analyze', {str(capture)!r}, '--json', {str(tmp_path / 'r.json')!r}], "
              "Environment(stdout=io.StringIO(), stderr=io.StringIO()))\n"
              "sys.stdout.write(f'{code} {sorted(m for m in sys.modules if m.startswith(\"rich.progress\"))}')\n")
    env = {**os.environ, "ROCEVIEW_PROGRESS_DELAY": "0"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.stdout == "0 []", proc.stderr


def test_the_numba_fallback_first_compile_is_named_until_the_first_packets(monkeypatch):
    import io

    from roceview.kernels import backend as kernels
    from roceview.commands.progress import Progress

    monkeypatch.setattr(kernels, "BACKEND", "numba")
    bar = Progress(io.StringIO(), "analyzing")
    assert bar._description() == "compiling decode kernels, once, ~30 s"
    bar.advance(10, 1000)
    assert bar._description() == "analyzing"
    monkeypatch.setattr(kernels, "BACKEND", "c")
    assert Progress(io.StringIO(), "analyzing")._description() == "analyzing"


def test_ctrl_c_while_the_bar_shows_gives_the_cursor_back(capture):
    for _ in range(3):          # the signal may land once the analysis is over (exit 0): again
        code, _, term = under_pty(["analyze", capture, capture, capture], interrupt_on=b"pkt/s")
        if code != 0:
            break
    assert code == 130, term
    assert term.rindex("\x1b[?25h") > term.rindex("\x1b[?25l")     # cursor hidden by rich, shown again
    assert "Traceback" not in term and "KeyboardInterrupt" not in term
