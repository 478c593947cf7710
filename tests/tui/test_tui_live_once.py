"""`roceview live` with the TUI analyses each packet once: the TUI's loader feeds the live
session's analysis (with its live bounds), whose result the TUI shows and --csv gets. Before,
the session and the loader each ran an Analyzer over every batch."""
from __future__ import annotations

import asyncio
import io

from roceview.analysis.analyzer import Analyzer
from roceview.cli import Environment, main
from roceview.tui.app import RoceviewApp
from helpers.live import LOSS, packet_count, reference_csv, same_csvs
from helpers.tui import loaded


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _pilot_instead_of_a_terminal(monkeypatch, seen: dict) -> None:
    """RoceviewApp.run driven by Pilot: wait for the end of the stream, look at screen 3, q."""
    def run(app, *args, **kwargs):
        async def drive():
            async with app.run_test(size=(80, 24)) as pilot:
                await loaded(pilot)
                await pilot.press("3")
                await pilot.pause()
                seen["line"] = app.screen.plist.line(45)
                seen["result"], seen["error"] = app.snapshot.result, app.snapshot.error
                seen["rtt_samples"] = sum(len(f) for f in app.loader.analyzer.rtt.sample_flow)
                await pilot.press("q")
        asyncio.run(drive())
        return app.return_value

    monkeypatch.setattr(RoceviewApp, "run", run)


def test_a_live_tui_run_analyses_each_packet_once_and_writes_analyzes_csvs(tmp_path, monkeypatch):
    fed, seen = [], {}
    feed = Analyzer.feed
    monkeypatch.setattr(Analyzer, "feed", lambda self, batch: fed.append(batch.n) or feed(self, batch))
    _pilot_instead_of_a_terminal(monkeypatch, seen)
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


def test_the_live_tuis_analysis_has_the_live_bounds(monkeypatch):
    """The RTT samples (16 bytes each, one per answered request) are bounded on a live
    capture (session.RTT_SAMPLES): the TUI's analysis is the session's, so it is too."""
    from roceview.live import session as session_module

    seen = {}
    _pilot_instead_of_a_terminal(monkeypatch, seen)
    monkeypatch.setattr(session_module, "RTT_SAMPLES", 4)
    err = io.StringIO()
    assert main(["live", "-r", str(LOSS)], Environment(stdout=Terminal(), stderr=err)) == 0, err.getvalue()
    assert 0 < seen["rtt_samples"] <= 4            # 20 RTT samples in the capture


def _recorded(method, into: list):
    def wrapper(self):
        result = method(self)
        into.append(result)
        return result
    return wrapper


def test_a_live_tui_on_a_stream_that_is_not_a_capture_exits_2_as_without_the_tui(tmp_path, monkeypatch):
    """The loader shows the source's error on the screen; after q the command exited 0 with
    empty CSVs, while `--no-tui` says what is wrong and exits 2."""
    bad = tmp_path / "bad.pcap"
    bad.write_text("garbage garbage garbage garbage garbage\n")
    seen = {}
    _pilot_instead_of_a_terminal(monkeypatch, seen)
    err = io.StringIO()
    code = main(["live", "-r", str(bad), "--csv", str(tmp_path / "csv")], Environment(stdout=Terminal(), stderr=err))
    assert "not a pcap or pcapng capture" in seen["error"]             # shown on the screen
    assert code == 2 and "not a pcap or pcapng capture" in err.getvalue()
    assert not (tmp_path / "csv").exists()
