"""Review r18: `roceview live` with the TUI says when its stream has ended; rates under 10 pkt/s."""
from __future__ import annotations

import io
import sys
import types

from tui_helpers import SAMPLES

LOSS = SAMPLES / "network-loss.pcap"


def test_the_overview_says_the_stream_ended_not_capturing(monkeypatch, tmp_path):
    """After the last packet of `cat x.pcap | roceview live -r -` the overview said
    'capture capturing' next to 'loaded' until q."""
    import roceview
    from roceview.cli import Environment, main
    from roceview.tui import Options

    seen = {}

    def run_app(source, *, title, options, live_stats):
        seen["during"] = live_stats()["capture"]
        for batch in source:
            source.analysis.feed(batch)
        seen["after"] = live_stats()["capture"]

    fake = types.SimpleNamespace(run_app=run_app, Options=Options)
    monkeypatch.setitem(sys.modules, "roceview.tui", fake)
    monkeypatch.setattr(roceview, "tui", fake)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = io.StringIO()
    assert main(["live", "-r", str(LOSS)], Environment(stdout=Terminal(), stderr=err)) == 0, err.getvalue()
    assert seen == {"during": "capturing", "after": "ended (end of stream)"}


def test_a_slow_capture_rate_is_not_zero():
    from roceview.tui.overview import _rate

    assert (_rate(43 / 250.573), _rate(4_380_651.2), _rate(12.4)) == ("0.17", "4,380,651", "12")
