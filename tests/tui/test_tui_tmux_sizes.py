"""The real `python -m roceview tui` in tmux at 80x24 and 120x40, from finding to frame: the
first finding's advice can be read whole on the Overview (Tab reaches the detail pane, PageDown
scrolls it), Enter on the finding lists its packets under its roceview.finding filter, and Enter
on an event of a QP's detail lands on that event's frame. One session per size walks all three."""
from __future__ import annotations

import re
import shlex
import sys
import time

import pytest

import roceview
from test_tui_tmux import REPO, Tmux, tmux  # noqa: F401  (tmux: the fixture, one server per test)

pytestmark = pytest.mark.skipif(__import__("shutil").which("tmux") is None, reason="tmux is not installed")

SAMPLE = "network-loss.pcap"
# scrollbars and borders are drawn with block and box characters: not part of the text read
_DRAWING = re.compile("[\u2500-\u259f]")


def flat(text: str) -> str:
    """The words of a screen (or of a text) in order, one space apart: a line wrapped at a space
    reads as the text did, a token folded mid-word does not."""
    return " ".join(_DRAWING.sub(" ", text).split())


def wait_until(tmux: Tmux, what: str, ok, timeout: float = 60.0) -> str:
    """The screen once ok(screen) holds; a generous deadline turns a freeze into a failure."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux.screen()
        if ok(screen):
            return screen
        assert time.monotonic() < deadline, f"{what} never showed; the screen:\n{screen}"
        time.sleep(0.2)


def _event_frame(screen: str, row: int) -> int:
    """The frame of the QP detail's events row `row` (0 = the first under its header)."""
    lines = screen.splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r"\s*frame\s", line))
    return int(lines[header + 1 + row].split()[0])


@pytest.mark.parametrize("width,height", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_from_a_finding_to_its_frames_at_real_terminal_sizes(tmux, tmp_path, width, height):
    record = roceview.analyze([str(REPO / "captures" / SAMPLE)]).findings_table.records()[0]
    status = tmp_path / "status"
    tmux("new-session", "-d", "-s", "tui", "-x", str(width), "-y", str(height), "-e", "TERM=xterm-256color",
         # COLUMNS=80 LINES=24 reach tmux's environment under pytest (GNU readline exports them at
         # C level, os.environ never sees them): they would pin the app at 80x24 whatever the pane
         f"unset COLUMNS LINES; cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -m roceview tui captures/{SAMPLE}; "
         f"echo $? > {shlex.quote(str(status))}; sleep 60")
    tmux.wait_for("loaded")
    screen = tmux.wait_for("q Quit")
    assert record["kind"] in screen and flat(record["summary"]) in flat(screen), screen   # whole, in the pane

    # the advice: Tab reaches the detail pane, PageDown scrolls it to the advice's end
    advice = flat(record["advice"])
    if height >= 40:                       # 120x40: the whole detail fits without scrolling
        assert advice in flat(screen), screen
    tmux.keys("Tab", "PageDown", "PageDown", "PageDown")
    wait_until(tmux, "the whole advice", lambda s: advice in flat(s), timeout=20)

    # Enter on the finding: its packets, under its filter, its first frame listed and shown
    first = int(record["frames"].split(";")[0])
    tmux.keys("BTab", "Enter")             # Shift+Tab: back to the findings
    screen = tmux.wait_for(f'roceview.finding == "{record["kind"]}"')
    screen = tmux.wait_for(f"Frame {first} ")
    assert re.search(rf"^\s*{first}\s", screen, re.M), screen

    # Enter on the second event of the first QP's detail: the packet list at that frame (all
    # packets first: `c` drops the finding's filter, which would hide frames that are no evidence)
    tmux.keys("c", "2", "Enter")
    tmux.wait_for("Its packets")
    tmux.keys("Tab", "Tab")                # the QP detail's body, its counters, its events
    screen = wait_until(tmux, "the events table", lambda s: re.search(r"^\s*frame\s", s, re.M))
    frame = _event_frame(screen, 1)
    tmux.keys("Down", "Enter")
    tmux.wait_for(f"at frame {frame}")
    screen = tmux.wait_for(f"Frame {frame} ")
    assert re.search(rf"^\s*{frame}\s", screen, re.M), screen      # its row in the list, in view

    tmux.keys("q")
    wait_until(tmux, "the exit status", lambda s: status.exists() and status.read_text().strip(), timeout=20)
    assert status.read_text().strip() == "0"
    assert "Traceback" not in tmux.screen()
