"""`roceview live` with the TUI analyses each packet once: the TUI's loader feeds the live
session's analysis (with its live bounds), whose result the TUI shows and --csv gets. Before,
the session and the loader each ran an Analyzer over every batch."""
from __future__ import annotations

import asyncio
import io

from roceview.analysis.engine import Analyzer
from roceview.cli import Environment, main
from roceview.tui.app import RoceviewApp
from test_live_cli import LOSS, packet_count, reference_csv, same_csvs
from tui_helpers import loaded


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_live_tui_run_analyses_each_packet_once_and_writes_analyzes_csvs(tmp_path, monkeypatch):
    fed, seen = [], {}
    feed = Analyzer.feed
    monkeypatch.setattr(Analyzer, "feed", lambda self, batch: fed.append(batch.n) or feed(self, batch))

    def run(app, *args, **kwargs):
        """Pilot instead of a terminal: wait for the end of the stream, look at screen 3, q."""
        async def drive():
            async with app.run_test(size=(80, 24)) as pilot:
                await loaded(pilot)
                await pilot.press("3")
                await pilot.pause()
                seen["line"] = app.screen.plist.line(45)
                seen["result"] = app.snapshot.result
                await pilot.press("q")
        asyncio.run(drive())
        return app.return_value

    monkeypatch.setattr(RoceviewApp, "run", run)
    from roceview.live import session as session_module

    sessions = []
    monkeypatch.setattr(session_module.LiveSession, "result", _recorded(session_module.LiveSession.result, sessions))
    err = io.StringIO()
    code = main(["live", "-r", str(LOSS), "--csv", str(tmp_path / "live")], Environment(stdout=Terminal(), stderr=err))
    assert code == 0, err.getvalue()
    assert sum(fed) == packet_count(LOSS)                       # once, not twice
    assert sessions == [seen["result"]]                         # the TUI's final result is the one written
    assert "[Retransmission of frame 38]" in seen["line"]       # the ring's flags: the session's analysis
    same_csvs(tmp_path / "live", reference_csv(LOSS, tmp_path / "ref"))


def _recorded(method, into: list):
    def wrapper(self):
        result = method(self)
        into.append(result)
        return result
    return wrapper
