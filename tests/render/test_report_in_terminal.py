"""The analyze report in a real terminal (tmux): colour on a TTY, none with NO_COLOR, lines cut
at the terminal's edge, UTF-8 table rules. Pipes are covered by test_analyze_cli.py.

tmux is installed by .ci/run; ROCEVIEW_REQUIRE_TSHARK=1 (which .ci/run sets for every tool
it installs) makes its absence a failure instead of a skip.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "capture-drop.pcap"       # has warning and critical findings
COLS, ROWS = 100, 60
SGR = "\x1b["


@pytest.fixture(scope="module")
def tmux():
    exe = shutil.which("tmux")
    if exe is None:
        if os.environ.get("ROCEVIEW_REQUIRE_TSHARK") == "1":
            pytest.fail("tmux is not installed but .ci/run's tools are required", pytrace=False)
        pytest.skip("tmux is not installed")
    return exe


def _run_in_tmux(exe: str, env: str = "", cols: int = COLS, args: str = "--max-qps 3",
                 capture: Path = CAPTURE) -> str:
    """Run `roceview analyze` in a detached tmux window of cols x ROWS; its screen with styles."""
    name = f"roceview-test-{uuid.uuid4().hex[:8]}"
    tmux = exe
    done = f"__done_{name}__"
    cmd = (f"cd {shlex.quote(str(REPO))} && {env} {shlex.quote(sys.executable)} -m roceview analyze "
           f"{shlex.quote(str(capture))} {args}; echo {done}")
    socket = Path(tempfile.gettempdir()) / f"{name}.sock"
    tmux = [tmux, "-S", str(socket), "-f", "/dev/null"]   # own server and socket, no user config
    subprocess.run([*tmux, "new-session", "-d", "-s", name, "-x", str(cols), "-y", str(ROWS),
                    "env", "-u", "COLUMNS", "LANG=C.UTF-8", "TERM=xterm-256color", "sh", "-c", f"{cmd}; sleep 30"], check=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # -J: a line the terminal wrapped comes back whole, so a too-wide line is seen as such
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-e", "-J", "-S", "-2000", "-t", name],
                                    capture_output=True, text=True, check=True).stdout
            if done in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"roceview analyze did not finish in tmux:\n{screen}")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        socket.unlink(missing_ok=True)                    # nothing left behind in /tmp


def _plain(screen: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", screen)


def test_report_on_a_terminal_has_colour_and_fits_its_width(tmux):
    screen = _run_in_tmux(tmux)
    text = _plain(screen)
    assert "Findings" in text and "Queue pairs" in text, text
    assert SGR in screen, "no colour on a terminal"
    lines = [line for line in text.splitlines() if "__done_" not in line]
    assert max(len(line) for line in lines) <= COLS, "a line wider than the terminal"
    assert any("━" in line for line in lines), "UTF-8 table rule missing"
    severe = [line for line, styled in zip(text.splitlines(), screen.splitlines())
              if ("CRITICAL" in line or "WARNING" in line) and SGR in styled]
    assert severe, "severities are not coloured"


def test_no_color_turns_colour_off_on_a_terminal(tmux):
    screen = _run_in_tmux(tmux, env="NO_COLOR=1")
    assert "Findings" in screen and SGR not in screen.replace(SGR + "0m", "").replace(SGR + "m", "")


COMPACT = ["flow", "gaps", "unrecov", "retx", "NAKs", "CE", "CNP", "RTT p50", "Gb/s"]
WIDE = ["flow", "peer", "tr", "pkts", "gaps", "gap PSNs", "unrecov", "retx", "NAK seq", "RNR", "NAK other",
        "CE", "CNP", "RTT p50", "RTT p99", "Gb/s"]


def _qp_heads(text: str) -> list[str]:
    """The QP table's column heads (the line after 'Queue pairs')."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Queue pairs"))
    return [h.strip() for h in lines[at + 1].split("┃")]


@pytest.mark.parametrize("cols, args, heads", [
    (80, "", COMPACT), (200, "", WIDE), (200, "--wide", WIDE), (80, "--max-qps 0", COMPACT)])
def test_report_fits_80_and_200_columns_compact_or_all_columns(tmux, cols, args, heads):
    """incast: 12 flows, findings with long flow lists; at 80 columns the telling columns,
    at 200 all of them; no line wider than the terminal either way."""
    text = _plain(_run_in_tmux(tmux, cols=cols, args=args, capture=REPO / "captures" / "incast.pcap"))
    lines = [line for line in text.splitlines() if "__done_" not in line]
    assert max(len(line) for line in lines) <= cols, "\n".join(line for line in lines if len(line) > cols)
    assert _qp_heads(text) == heads
    if heads == COMPACT:
        assert "--wide shows all" in text
    assert not any(line.rstrip().endswith("…") for line in lines), "a line was cut: it did not fit"


def test_wide_at_80_columns_shows_every_column_uncut(tmux):
    """--wide: the table keeps every column; the terminal wraps it (capture-pane -J joins)."""
    text = _plain(_run_in_tmux(tmux, cols=80, args="--wide", capture=REPO / "captures" / "incast.pcap"))
    assert _qp_heads(text) == WIDE
    assert max(len(line) for line in text.splitlines()) > 80
