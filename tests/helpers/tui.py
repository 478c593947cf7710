"""Helpers for the TUI tests: an app on a sample capture, waiting for its loader."""
from __future__ import annotations

import asyncio
from pathlib import Path

from roceview.tui import Options, make_app

SAMPLES = Path(__file__).resolve().parents[2] / "captures"


def app_for(name: str, **kwargs):
    options = kwargs.pop("options", None) or Options()
    return make_app([str(SAMPLES / name)], title=f"roceview {name}", options=options, **kwargs)


async def loaded(pilot, timeout: float = 60.0) -> None:
    """Wait until the loader posted its final snapshot and the screen rendered it."""
    app = pilot.app
    waited = 0.0
    while not (app.snapshot is not None and app.snapshot.done):
        await asyncio.sleep(0.05)
        waited += 0.05
        assert waited < timeout, "the capture did not finish loading"
    await pilot.pause()
    await pilot.pause()


def text_of(widget) -> str:
    """The plain text a Static shows."""
    content = widget.render()
    return str(getattr(content, "plain", content))


async def scanned(pilot, screen, polls: int = 200) -> None:
    """Until the packet screen's filter scan is done (at most `polls` x 50 ms)."""
    for _ in range(polls):
        await pilot.pause(0.05)
        if not screen.scanning and screen.filtered is not None:
            return
