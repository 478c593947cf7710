"""The TUI's filter knows roceview.finding as dissect -Y does: a finding's packets, from the
findings of what is loaded."""
from __future__ import annotations

import pytest

from helpers.cli import run
from helpers.tui import SAMPLES, app_for, loaded, scanned
from roceview.tui.base import compile_filter


@pytest.mark.asyncio
@pytest.mark.parametrize("sample,kind", [("network-loss.pcap", "network_loss"), ("incast.pcap", "incast"),
                                         ("pfc-storm.pcap", "pfc_storm")])
async def test_the_finding_filter_shows_the_packets_dissect_shows(sample, kind):
    text = f'roceview.finding == "{kind}"'
    _, out, _ = run("dissect", SAMPLES / sample, "-Y", text)
    expected = [int(line.split()[0]) - 1 for line in out.splitlines()]
    app = app_for(sample)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        app.apply_filter(text, compile_filter(text)[0])      # as the filter bar's Enter does
        await scanned(pilot, app.screen)
        assert len(expected) > 3 and app.screen.plist.rows.tolist() == expected
        assert not app.errors


@pytest.mark.asyncio
async def test_the_operation_fields_filter_as_dissect_filters_them():
    """roceview.op.* in the filter bar: the packets dissect -Y shows (the operations of the whole
    file, read once more as dissect's first pass reads them)."""
    text = "roceview.op.latency > 4 || roceview.op.op == \"CMP_SWAP\""
    _, out, _ = run("dissect", SAMPLES / "ops-mixed.pcap", "-Y", text)
    expected = [int(line.split()[0]) - 1 for line in out.splitlines()]
    app = app_for("ops-mixed.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        app.apply_filter(text, compile_filter(text)[0])
        await scanned(pilot, app.screen)
        assert len(expected) > 10 and app.screen.plist.rows.tolist() == expected
        assert not app.errors
