"""The TUI driven by random keys and resizes (Textual's Pilot), seeded: bursts of keys as a
terminal sends them, mixed with resizes down to 1x1 and up to 250x80, each step under a
deadline. No step may raise, freeze (a freeze fails the test, it does not hang CI) or leave
an error shown; Ctrl-C quits at the end. A few sessions in CI; a longer run:
ROCEVIEW_TUI_FUZZ_SESSIONS=40 ROCEVIEW_TUI_FUZZ_STEPS=40 pytest tests/tui/test_tui_fuzz.py"""
from __future__ import annotations

import asyncio
import ctypes
import os
import random
import threading

import pytest

from helpers.tui import app_for, loaded

SESSIONS = int(os.environ.get("ROCEVIEW_TUI_FUZZ_SESSIONS", "2"))
STEPS = int(os.environ.get("ROCEVIEW_TUI_FUZZ_STEPS", "10"))
STEP_DEADLINE = 30.0           # seconds: a step takes well under 1 s; only a freeze reaches this
CAPTURES = ("network-loss.pcap", "pfc-storm.pcap", "incast.pcap")
KEYS = ("1", "2", "3", "4", "enter", "enter", "p", "escape", "s", "c", "slash", "tab", "up", "down",
        "pagedown", "pageup", "home", "end", "question_mark", "t", "x", "2", "3", "p")
SIZES = ((100, 30), (1, 1), (250, 80), (2, 1), (1, 6), (80, 24), (12, 3), (40, 2))


class StepFrozen(Exception):
    """A step ran past its deadline with the event loop blocked (asyncio's timeout cannot fire)."""


class Watchdog:
    """Raises StepFrozen in the test's thread when a step outlives its deadline by 10 s: a render
    looping in one call blocks the event loop, and asyncio.wait_for never gets to time out."""

    def __init__(self, deadline: float):
        self.deadline, self.timer = deadline, None

    def __enter__(self):
        thread = threading.get_ident()

        def fire() -> None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(StepFrozen))

        self.timer = threading.Timer(self.deadline + 10.0, fire)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()


def _burst(rnd: random.Random) -> list[tuple[str, object]]:
    out = []
    for _ in range(rnd.randint(1, 6)):
        out.append(("resize", rnd.choice(SIZES)) if rnd.random() < 0.2 else ("key", rnd.choice(KEYS)))
    return out


async def _play(pilot, burst) -> None:
    keys: list[str] = []
    for what, arg in burst + [("end", None)]:
        if what != "key" and keys:
            await pilot.press(*keys)          # back to back, as a terminal sends a burst
            keys = []
        if what == "key":
            keys.append(arg)
        elif what == "resize":
            await pilot.resize_terminal(*arg)
    await pilot.pause()


async def session(seed: int, steps: int) -> list[str]:
    """One random session; returns what went wrong (empty: nothing)."""
    rnd = random.Random(seed)
    app = app_for(CAPTURES[seed % len(CAPTURES)])
    async with app.run_test(size=(100, 30)) as pilot:
        if rnd.random() < 0.5:
            await loaded(pilot)               # else the keys race the loader's snapshots
        for step in range(steps):
            burst = _burst(rnd)
            with Watchdog(STEP_DEADLINE):
                try:
                    await asyncio.wait_for(_play(pilot, burst), STEP_DEADLINE)
                except (asyncio.TimeoutError, StepFrozen):
                    return [f"seed {seed} step {step}: froze on {burst}"]
            if not app.is_running:
                return [f"seed {seed} step {step}: the app ended on {burst}"]
        await pilot.resize_terminal(100, 30)
        await asyncio.wait_for(pilot.press("ctrl+c"), STEP_DEADLINE)
    problems = [f"seed {seed}: error shown: {e}" for e in app.errors]
    if app.return_code != 0:
        problems.append(f"seed {seed}: exit {app.return_code}")
    return problems


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(SESSIONS))
async def test_random_keys_and_resizes_never_crash_or_freeze(seed):
    assert await session(seed, STEPS) == []
