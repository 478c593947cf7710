"""Snapshot tests (pytest-textual-snapshot) of each screen at 80x24 on the sample captures.
Update after a deliberate change of the screens: `pytest tests/tui/test_tui_snapshots.py --snapshot-update`."""
from __future__ import annotations

import pytest

from helpers.tui import app_for, loaded

SIZE = (80, 24)


def _after(*keys):
    async def run_before(pilot):
        await loaded(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause()
    return run_before


@pytest.mark.parametrize("name, keys", [
    ("network-loss.pcap", ()),                          # 1 Overview
    ("network-loss.pcap", ("2",)),                      # 2 Queue pairs
    ("network-loss.pcap", ("2", "enter")),              # QP detail: counters, ladder, sparklines
    ("network-loss.pcap", ("3", "down", "down")),       # 3 Packets: list, tree, hex
    ("network-loss-receiver-side.pcap", ("3",) + ("pagedown",) * 5 + ("down",) * 5),   # flags: frame 46
    ("pfc-storm.pcap", ("4",)),                         # 4 PFC
    ("pfc-storm.pcap", ("question_mark",)),             # ? help
], ids=["overview", "queue-pairs", "qp-detail", "packets", "packets-flags", "pfc", "help"])
def test_screen(snap_compare, name, keys):
    assert snap_compare(app_for(name), terminal_size=SIZE, run_before=_after(*keys))


def test_overview_light_theme(snap_compare):
    assert snap_compare(app_for("pfc-storm.pcap", light=True), terminal_size=SIZE, run_before=_after())
