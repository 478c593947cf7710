"""The TUI never dies of its own bugs or of a race: a screen closed or fed a snapshot before it
is built, a handler or a worker that raises, a filter compiler that raises anything. The
error is shown on the screen and `q` still quits with its usual code."""
from __future__ import annotations

import asyncio

import subprocess
import sys

import pytest
from textual.widgets import DataTable, Label

from roceview.tui.app import SnapshotPosted
from roceview.tui.base import FilterBar, compile_filter
from roceview.tui.qp_detail import QpDetailScreen
from roceview.tui.qps import QueuePairsScreen
from helpers.tui import SAMPLES, app_for, loaded, text_of

SIZE = (100, 30)


@pytest.mark.asyncio
async def test_a_qp_detail_closed_before_it_is_built_does_not_crash():
    """Enter then Esc faster than the screen composes: Textual prunes its children before they
    mount, and on_mount found no '#qp-counters' (NoMatches, exit 1)."""
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        app.open_qp(0)
        app.go_back()                  # in the same tick: before the detail's compose ran
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, QueuePairsScreen)
        await pilot.press("q")
    assert app.return_code == 0 and app.errors == []


@pytest.mark.asyncio
async def test_a_snapshot_arriving_before_a_pushed_screen_is_built_is_shown_once_it_is():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        app.open_qp(0)
        app.on_snapshot_posted(SnapshotPosted(app.snapshot))      # before the detail's compose
        await pilot.pause()
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, QpDetailScreen)
        assert detail.query_one("#qp-counters", DataTable).row_count > 10
        assert "QP " in text_of(detail.query_one("#qp-title"))
        await pilot.press("q")
    assert app.return_code == 0 and app.errors == []


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


@pytest.mark.asyncio
async def test_a_crash_in_a_screen_is_shown_and_q_still_quits(monkeypatch):
    monkeypatch.setattr("roceview.tui.qps.fitting", _boom)     # every refill of the QP list raises
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2")          # on_screen_resume -> show -> _refill
        await pilot.press("s")          # an action
        await pilot.pause()
        assert app.errors and all("RuntimeError: boom" in e for e in app.errors)
        assert any("boom" in str(n.message) for n in app._notifications)
        await pilot.press("1")          # the other screens still answer
        assert app.current_mode == "overview"
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_a_crash_in_a_worker_is_shown_and_q_still_quits(monkeypatch):
    """The filter scan's worker hands its rows to the screen; that hand-over raising failed the
    worker, and Textual ended the app (WorkerFailed, exit 1)."""
    from roceview.tui.packets_screen import PacketsScreen

    monkeypatch.setattr(PacketsScreen, "_found", _boom)
    display_filter, message = compile_filter("psn == 12")
    assert message is None
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        app.apply_filter("psn == 12", display_filter)
        for _ in range(100):
            await pilot.pause(0.05)
            if app.errors:
                break
        assert any("boom" in e for e in app.errors)
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_the_filter_bar_shows_any_exception_of_the_compiler_as_its_message(monkeypatch):
    def compile_raising(text):
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")

    monkeypatch.setattr("roceview.filter.compile_filter", compile_raising)
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("slash")
        bar = app.screen.query_one(FilterBar)
        bar.query_one("#filter-input").value = "psn == " + "9" * 5000
        await pilot.press("enter")
        await pilot.pause()
        shown = text_of(bar.query_one("#filter-message", Label))
        assert "4300 digits" in shown and "\n" not in shown
        assert app.display_filter is None
        await pilot.press("escape", "q")
    assert app.return_code == 0


def test_a_5000_digit_literal_is_a_one_line_message_of_the_bar():
    display_filter, message = compile_filter("psn == " + "9" * 5000 + "\n")
    assert display_filter is None and message and "\n" not in message


@pytest.mark.parametrize("data, message", [
    (b"this is not a capture at all\n" * 10, "<stdin>: not a pcap or pcapng capture"),
    (b"", "<stdin>: empty file"),
])
def test_a_stdin_stream_that_is_not_a_capture_is_one_line_and_exit_two(data, message):
    """Decided from the stream's first bytes before the terminal is taken for the keys: `tui -`
    opened the screen, showed 'stopped: ...' and exited 0 on q (`live -r -` exits 2)."""
    done = subprocess.run([sys.executable, "-m", "roceview", "tui", "-"], cwd=SAMPLES.parent, input=data,
                          capture_output=True, timeout=60)
    err = done.stderr.decode()
    assert done.returncode == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert done.stdout == b""


@pytest.mark.asyncio
async def test_a_crash_on_the_apps_own_loop_is_shown_and_q_still_quits():
    """Textual stops a message loop whose handler raised: on the app's own loop that froze
    every key, q and Ctrl-C included."""
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        app.call_later(_boom)
        await asyncio.wait_for(pilot.pause(), 20)
        assert any("boom" in e for e in app.errors)
        await pilot.press("2")
        assert app.current_mode == "qps"
        await pilot.press("q")
    assert app.return_code == 0
