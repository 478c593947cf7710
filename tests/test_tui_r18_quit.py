"""Review r18: quitting the TUI of a live source that is waiting for its next packet (a quiet
interface) ended the app's screen but hung the process: Textual waits for the loader thread,
blocked in the source. The app now asks a source with stop() to stop."""
from __future__ import annotations

import asyncio
import threading

import pytest

from roceview.packets import iter_batches
from roceview.tui import Options, make_app
from tui_helpers import SAMPLES

pytestmark = pytest.mark.asyncio


class QuietSource:
    """A live source: one batch, then nothing until stop() (as tcpdump on an idle link)."""

    def __init__(self):
        self.stopped = threading.Event()

    def __iter__(self):
        yield from iter_batches([str(SAMPLES / "network-loss.pcap")], prefetch=False)
        self.stopped.wait(30)

    def stop(self):
        self.stopped.set()


async def test_q_stops_a_source_waiting_for_packets():
    source = QuietSource()
    app = make_app(source, title="live", options=Options())

    async def drive():
        async with app.run_test(size=(80, 24)) as pilot:
            while app.snapshot is None or app.snapshot.packets == 0:
                await asyncio.sleep(0.05)
            await pilot.press("q")

    await asyncio.wait_for(drive(), timeout=20)     # before: waited the source's 30 s
    assert source.stopped.is_set() and app.return_code == 0
