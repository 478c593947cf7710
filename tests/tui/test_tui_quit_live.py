"""Quitting the TUI of a live source that is waiting for its next packet (a quiet
interface) ended the app's screen but hung the process: Textual waits for the loader thread,
blocked in the source. The app now asks a source with stop() to stop."""
from __future__ import annotations

import asyncio
import threading

import pytest

from roceview.packets.read import iter_batches
from roceview.tui import Options, make_app
from helpers.tui import SAMPLES



class QuietSource:
    """A live source: one batch, then nothing until stop() (as tcpdump on an idle link)."""

    def __init__(self, chunk: int = 1 << 16):
        self.stopped, self.chunk = threading.Event(), chunk

    def __iter__(self):
        yield from iter_batches([str(SAMPLES / "network-loss.pcap")], prefetch=False, chunk_packets=self.chunk)
        self.stopped.wait(30)

    def stop(self):
        self.stopped.set()


@pytest.mark.asyncio
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


def test_a_live_source_gone_quiet_gets_its_findings_shown():
    """A burst then silence: the last snapshot has every row and the findings of analyze (the
    findings were made at most every 2 s, on a batch: a quiet link kept them stale)."""
    from roceview.api import analyze
    from roceview.tui.loader import Loader

    path = str(SAMPLES / "network-loss.pcap")
    source = QuietSource(chunk=16)
    posted = []
    loader = Loader(source, Options(chunk_packets=16), on_snapshot=posted.append)
    loader._findings_at = float("inf")            # as if the diagnoser had just run
    worker = threading.Thread(target=loader.run)
    worker.start()
    try:
        for _ in range(200):
            if posted and posted[-1].packets == 235 and len(posted[-1].result.findings_table):
                break
            threading.Event().wait(0.05)
        last = posted[-1]
        assert last.packets == 235 and not last.done
        assert last.result.findings_table.records() == analyze(path).findings_table.records()
    finally:
        loader.request_stop()
        worker.join(10)
    assert not worker.is_alive()


@pytest.mark.asyncio
@pytest.mark.parametrize("key", ["ctrl+c", "q"])
async def test_ctrl_c_quits_like_q_and_stops_the_source(key):
    source = QuietSource()
    app = make_app(source, title="live", options=Options(fail_on="warning"))

    async def drive():
        async with app.run_test(size=(80, 24)) as pilot:
            while app.snapshot is None or app.snapshot.packets == 0:
                await asyncio.sleep(0.05)
            await pilot.press("/")                   # even from the filter bar
            await pilot.press(key) if key != "q" else await pilot.press("escape", "q")

    await asyncio.wait_for(drive(), timeout=20)
    assert source.stopped.is_set() and app.return_code == 3       # network_loss is a warning
