"""The UI comes first: the loader's imports run before the first frame, and after a key or a
click the loader steps aside (Loader.defer) so the UI thread answers without sharing the GIL."""
from __future__ import annotations

import asyncio
import threading
import time

from roceview.tui.loader import Loader

from helpers.tui import app_for, loaded


class _Counted:
    """A live-like source: batches of a sample, counting how many were taken."""

    def __init__(self, batches):
        self.batches, self.taken = batches, 0

    def __iter__(self):
        for b in self.batches:
            self.taken += 1
            yield b


def _sample_batches():
    from roceview.packets.read import iter_chunks
    from helpers.tui import SAMPLES

    return [b for _, b in iter_chunks([str(SAMPLES / "network-loss-receiver-side.pcap")], chunk_packets=64)]


def test_a_deferred_loader_feeds_nothing_until_the_ui_has_had_its_time():
    source = _Counted(_sample_batches())
    loader = Loader(source)
    loader.prepare()
    loader.defer(0.6)
    worker = threading.Thread(target=loader.run)
    worker.start()
    time.sleep(0.3)
    assert loader.analyzer.rows_seen == 0, "the loader fed batches while it was told to wait"
    worker.join(30)
    assert loader.latest is not None and loader.latest.done
    assert loader.latest.packets == sum(b.n for b in source.batches)


def test_prepare_keeps_an_error_for_the_screen(tmp_path):
    from roceview.tui.loader import Options
    from helpers.tui import SAMPLES

    loader = Loader([str(SAMPLES / "network-loss-receiver-side.pcap")],
                    Options(config=str(tmp_path / "missing.toml")))
    loader.prepare()                              # on the UI thread: must not raise
    assert isinstance(loader._prepared, BaseException)
    loader.run()
    assert loader.latest.done and "missing.toml" in loader.latest.error


def test_the_app_prepares_before_its_first_frame_and_a_key_defers_the_loader():
    async def run():
        app = app_for("network-loss-receiver-side.pcap")
        async with app.run_test(size=(80, 24)) as pilot:
            assert app.loader._prepared is True       # on_mount ran it, before any frame
            await loaded(pilot)
            before = time.monotonic()
            await pilot.press("2")
            assert app.loader._defer_until > before
    asyncio.run(run())


def test_a_key_held_down_slows_loading_but_never_stops_it():
    """Auto-repeat (a key held down, a wheel spun) defers the loader every 20-30 ms, each time
    for UI_FIRST_S: the loader must still take a chunk now and then, or loading never ends."""
    source = _Counted(_sample_batches())
    loader = Loader(source)
    loader.prepare()
    held = threading.Event()

    def hold_a_key():
        while not held.is_set():
            loader.defer()
            time.sleep(0.02)

    keys = threading.Thread(target=hold_a_key, daemon=True)
    keys.start()
    worker = threading.Thread(target=loader.run, daemon=True)
    worker.start()
    worker.join(20)                  # 4 chunks: well under a second unless starved
    finished = not worker.is_alive()
    held.set()
    loader.request_stop()
    worker.join(10)
    assert finished, "loading stalled while a key was held down"
    assert loader.latest.done and loader.latest.packets == sum(b.n for b in source.batches)


def test_quitting_mid_load_does_not_finish_an_analysis_nobody_will_see(monkeypatch):
    """q while loading: the app waits for the loader thread, which went on to Analyzer.finish
    and the diagnoser over the rows read so far (2.9 s on 1.1 M of 6 M packets, 65 k QPs:
    the quit took 5.8 s). The exit status comes from the last snapshot shown; `roceview
    live` finishes its own session's analysis after the app."""
    from roceview import api

    finished = []
    monkeypatch.setattr(api.Analysis, "finish", lambda self, *a: finished.append(1))
    batches = _sample_batches()
    loader = Loader(_Counted(batches))

    class QuitAfterTheFirst:
        def __iter__(self):
            yield batches[0]
            loader.request_stop()              # q pressed
            yield batches[1]

    loader.source = QuitAfterTheFirst()
    loader.run()
    assert finished == []
    assert loader.latest is not None and not loader.latest.done


def test_the_other_screens_are_built_before_the_first_frame():
    """A screen's first visit composed it while the loader ran (100-140 ms on 10 M packets):
    they are built in on_mount now, so the first '2', '3' or '4' only shows them."""
    async def run():
        app = app_for("network-loss-receiver-side.pcap")
        async with app.run_test(size=(80, 24)):
            stacks = getattr(app, "_screen_stacks", None)
            if stacks is None:
                import pytest

                pytest.skip("this Textual keeps its modes elsewhere")
            assert app.current_mode == "overview"
            assert {m for m in ("qps", "packets", "pfc") if stacks.get(m)} == {"qps", "packets", "pfc"}
            await loaded_after(app)
    asyncio.run(run())


async def loaded_after(app):
    while not (app.snapshot is not None and app.snapshot.done):
        await asyncio.sleep(0.05)


def test_the_start_up_objects_are_frozen_while_the_app_runs_and_thawed_after():
    """A full collection over the app's start-up objects paused a screen switch 100-140 ms now
    and then: they are frozen (gc.freeze) after the screens are built, thawed when it ends."""
    import gc

    gc.unfreeze()

    async def run():
        app = app_for("network-loss-receiver-side.pcap")
        async with app.run_test(size=(80, 24)):
            assert gc.get_freeze_count() > 1000
            await loaded_after(app)
    asyncio.run(run())
    assert gc.get_freeze_count() == 0
