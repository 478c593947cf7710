"""A burst of terminal resizes while a mode switch batches updates must not freeze the TUI.

Textual 8 lays a screen out for each Resize in its queue and posts itself a Resize of that size
again; with two sizes queued and other messages between them (a SIGWINCH burst seen late, while
a mode switch's delay_update holds the refresh), the two bounced forever: 100 % CPU, q and
Ctrl-C unread (seen in a real terminal, 2 of 61 tmux sessions). The app runs in a child process:
a starved event loop cannot time itself out."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from textual import events, messages
    from textual.geometry import Size
    from roceview.tui import make_app

    async def main():
        app = make_app(["captures/incast.pcap"], title="t")
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(1.0)
            for key in sys.argv[1:]:
                await pilot.press(key)
                await pilot.pause(0.3)
            screen = app.screen_stack[-2] if len(app.screen_stack) > 1 else app.screen
            a, b = Size(250, 80), Size(40, 10)
            app.delay_update(1.0)              # as switch_mode() (keys 1-4) does for 50 ms
            for size in (a, b):                # two sizes queued, other messages between them
                screen.post_message(events.Resize(size, size))
                screen.post_message(messages.Prompt())
            await pilot.resize_terminal(40, 10)
            await pilot.pause(0.5)
            assert screen.size == app.size == b, (screen.size, app.size)
            await pilot.press("q")

    asyncio.run(main())
''')


@pytest.mark.parametrize("keys", [["3"], ["question_mark"], ["2", "enter"]], ids=["packets", "help", "qp-detail"])
def test_a_resize_burst_during_a_mode_switch_does_not_freeze(keys):
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, *keys], cwd=REPO, timeout=90,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the TUI froze: no answer in 90 s after two queued resizes")
    assert done.returncode == 0, done.stderr[-2000:]
