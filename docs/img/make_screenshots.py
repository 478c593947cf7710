"""The TUI screenshots of the README and docs/commands.md (Textual's save_screenshot), from the
sample captures:

    python docs/img/make_screenshots.py
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers.tui import app_for, loaded  # noqa: E402

SHOTS = (("tui-overview.svg", "network-loss.pcap", ()), ("tui-queue-pairs.svg", "incast.pcap", ("2",)),
         ("tui-qp-detail.svg", "network-loss.pcap", ("2", "enter")),
         ("tui-packets.svg", "network-loss.pcap", ("3",) + ("pagedown",) * 3 + ("down",) * 8), ("tui-pfc.svg", "pfc-storm.pcap", ("4",)))


async def shoot(filename: str, capture: str, keys) -> None:
    app = app_for(capture)
    async with app.run_test(size=(100, 32)) as pilot:
        await loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause(0.3)
        app.save_screenshot(filename=filename, path=str(HERE))


if __name__ == "__main__":
    for shot in SHOTS:
        asyncio.run(shoot(*shot))
        print(HERE / shot[0])
