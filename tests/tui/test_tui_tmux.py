"""The real `python -m roceview tui captures/network-loss.pcap` in a terminal: tmux with its
own server and no user config, 80x24; keys sent, the screen read back with capture-pane."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, tmp_path: Path):
        # its own server, its socket in the test's directory (nothing left behind in /tmp/tmux-*)
        self.base = ["tmux", "-S", str(tmp_path / f"tmux-{uuid.uuid4().hex[:8]}"), "-f", "/dev/null"]
        self.tmp = tmp_path

    def __call__(self, *args: str) -> str:
        return subprocess.run(self.base + list(args), check=True, capture_output=True, text=True,
                              timeout=30).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "tui")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The screen once it shows `text` (the first paint and the loader take a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            assert time.monotonic() < deadline, f"{text!r} never appeared; the screen:\n{screen}"
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        for key in keys:                  # one at a time: Esc then a key would read as Alt+key
            self("send-keys", "-t", "tui", key)
            time.sleep(0.3)


@pytest.fixture
def tmux(tmp_path):
    """A Tmux whose server is killed after the test, whatever its outcome."""
    server = Tmux(tmp_path)
    yield server
    subprocess.run(server.base + ["kill-server"], capture_output=True, timeout=30)


def _start(tmux: Tmux, shell: str) -> None:
    tmux("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", "-e", "TERM=xterm-256color",
         f"cd {shlex.quote(str(REPO))} && {shell}")


def _quit_status(tmux: Tmux, status: Path) -> str:
    tmux.keys("q")
    deadline = time.monotonic() + 20
    while not status.exists() or not status.read_text().strip():
        assert time.monotonic() < deadline, f"roceview tui did not quit; the screen:\n{tmux.screen()}"
        time.sleep(0.2)
    return status.read_text().strip()


def test_tui_reads_a_capture_piped_on_stdin_and_keys_from_the_terminal(tmux, tmp_path):
    status = tmp_path / "status"
    python = shlex.quote(sys.executable)
    _start(tmux, f"cat captures/incast.pcap | {python} -m roceview tui -; echo $? > {shlex.quote(str(status))}; "
                 "sleep 60")
    tmux.wait_for("incast")
    tmux.wait_for("q Quit")              # the footer: the screen is mounted and takes keys
    tmux.keys("3")
    screen = tmux.wait_for("packets listed")
    assert "a stream: the most recent 157 of 157 packets are kept" in screen and "Ethernet II" in screen
    assert _quit_status(tmux, status) == "0"


def test_tui_in_tmux(tmux, tmp_path):
    status = tmp_path / "status"
    _start(tmux, f"{shlex.quote(sys.executable)} -m roceview tui captures/network-loss.pcap; "
                 f"echo $? > {shlex.quote(str(status))}; sleep 60")
    tmux.wait_for("network_loss")
    screen = tmux.wait_for("loaded")     # the findings can show a snapshot before the load ends
    assert "1 Overview" in screen and "235 packets" in screen and "network_loss" in screen
    tmux.keys("2")
    screen = tmux.wait_for("sorted by")
    assert "10.0.0.1>10.0.0.2:0x034405" in screen and "sorted by worst" in screen
    tmux.keys("Enter")
    # its footer ("p Its packets") is the last part painted: a key sent while the screen was
    # still mounting could be lost under load (a Textual push/switch race), as a person would not
    screen = tmux.wait_for("Its packets")
    assert "QP 10.0.0.1>10.0.0.2:0x034405" in screen and "R retransmission" in screen
    tmux.keys("3")
    screen = tmux.wait_for("packets listed")
    assert "235 packets listed" in screen and "QP=0x034405 PSN=3531312" in screen and "Ethernet II" in screen
    tmux.keys("/")
    tmux.wait_for("display filter")
    tmux("send-keys", "-t", "tui", "-l", "psn == 3531313")
    tmux.keys("Enter")
    screen = tmux.wait_for("filter", timeout=10)
    assert "display filters not available" in screen or "filter: psn == 3531313" in screen
    tmux.keys("Escape")
    assert _quit_status(tmux, status) == "0"
    assert "Traceback" not in tmux.screen()


def test_live_from_a_pipe_opens_the_tui_with_keys_from_the_terminal(tmux, tmp_path):
    """`tcpdump -w - | roceview live -r -`: the stream is the pipe, the keys come from the
    terminal (Textual reads fd 0: without the swap it decoded pcap bytes as keys and crashed),
    the overview shows the live line, and q ends with the report and exit 0."""
    status = tmp_path / "status"
    python = shlex.quote(sys.executable)
    _start(tmux, f"cat captures/network-loss.pcap | {python} -m roceview live -r -; echo $? > {shlex.quote(str(status))}; "
                 "sleep 60")
    flat = " ".join(tmux.wait_for("network_loss").split())     # 80 columns wrap the live line
    assert "kernel drops unknown" in flat and "roceview drops 0" in flat
    assert _quit_status(tmux, status) == "0"
