"""Pilot tests of `roceview tui`: every screen and key on the sample captures."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from textual.widgets import DataTable, Tree

from roceview.tui import Options, make_app
from roceview.tui.base import NO_FILTERS, FilterBar
from roceview.tui.help import HelpScreen
from roceview.tui.overview import OverviewScreen
from roceview.tui.packets_screen import PacketsScreen
from roceview.tui.pfc_screen import PfcScreen
from roceview.tui.qp_detail import QpDetailScreen
from roceview.tui.qps import QueuePairsScreen
from helpers.tui import SAMPLES, app_for, loaded, text_of

SIZE = (100, 30)
pytestmark = pytest.mark.asyncio


def _filter_module_present() -> bool:
    try:
        import roceview.filter  # noqa: F401
    except ImportError:
        return False
    return True


async def test_overview_lists_findings_and_quits_with_zero():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one("#findings", DataTable)
        assert table.row_count == 1
        assert "network_loss" in str(table.get_row_at(0)[1])
        assert "235 packets" in text_of(app.screen.query_one("#summary"))
        await pilot.press("q")
    assert app.return_code == 0


async def test_quit_with_fail_on_exits_three_like_analyze():
    app = app_for("network-loss.pcap", options=Options(fail_on="warning"))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("q")
    assert app.return_code == 3


async def test_queue_pairs_sort_and_open_a_qp_with_its_ladder_and_packets():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        screen = app.screen
        assert isinstance(screen, QueuePairsScreen)
        assert len(screen.query_one("#qps").rows) == 2
        assert "sorted by worst" in text_of(screen.query_one("#qp-status"))
        await pilot.press("s")
        assert "sorted by packets" in text_of(screen.query_one("#qp-status"))
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, QpDetailScreen)
        ladder = text_of(detail.query_one("#qp-ladder"))
        # the requests, the responses, the NAKs and the go-back-N resends are all drawn
        for mark in "·∘NR":
            assert mark in ladder, mark
        assert detail.query_one("#qp-counters", DataTable).row_count > 10
        assert detail.query_one("#qp-events", DataTable).row_count > 0
        await pilot.press("p")
        await pilot.pause()
        packets = app.screen
        assert isinstance(packets, PacketsScreen)
        assert len(packets.plist.rows) == 235          # both directions of the only QP pair
        await pilot.press("escape")                    # back to the QP detail
        await pilot.pause()
        assert isinstance(app.screen, QpDetailScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, QueuePairsScreen)


async def test_f_on_a_finding_with_flows_opens_those_queue_pairs():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        app.screen.query_one("#findings", DataTable).focus()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, QueuePairsScreen)
        assert "2 of 2 flows" in text_of(app.screen.query_one("#qp-status"))


async def test_enter_on_a_pfc_finding_shows_its_pause_frames():
    app = app_for("pfc-storm.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        records = app.snapshot.result.findings_table.records()
        assert records[0]["flows"] == "" and records[0]["frames"]
        app.screen.query_one("#findings", DataTable).focus()
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, PacketsScreen)
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.scanning and screen.filtered is not None:
                break
        assert len(screen.plist.rows) == records[0]["frame_count"]
        assert screen.plist.rows[0] + 1 == int(records[0]["frames"].split(";")[0])


async def test_packets_tree_and_hex_follow_the_cursor():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        screen = app.screen
        assert len(screen.plist.rows) == 235
        await pilot.press("down")
        await pilot.pause()
        tree = screen.query_one("#packet-tree", Tree)
        assert str(tree.root.label).startswith("Frame 2 ")
        titles = [str(node.label) for node in tree.root.children]
        assert any(t.startswith("Ethernet") for t in titles)
        assert any("(BTH," in t for t in titles)
        bth = next(node for node in tree.root.children if "(BTH," in str(node.label))
        assert any(str(leaf.label).startswith("psn = ") for leaf in bth.children)
        hex_text = text_of(screen.query_one("#packet-hex"))
        frame = app.index.frame_bytes(1)[0]
        assert hex_text.startswith("0000  " + frame[:8].hex(" "))
        await pilot.press("end")
        await pilot.pause()
        assert str(tree.root.label).startswith("Frame 235 ")


async def test_packet_list_decodes_only_the_visible_blocks():
    from roceview.tui import packet_list

    app = app_for("pfc-storm.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        plist = app.screen.plist
        assert len(plist.rows) == 1036
        assert list(plist._blocks) == [0]                      # rows 0..127 cover the screen
        await pilot.press("end")
        await pilot.pause()
        top, height = int(plist.scroll_offset.y), plist.size.height
        on_screen = set(range(top // packet_list.BLOCK, (top + height - 1) // packet_list.BLOCK + 1))
        assert top > 0 and set(plist._blocks) == {0} | on_screen


@pytest.mark.skipif(_filter_module_present(), reason="roceview.filter exists: the bar uses it")
async def test_filter_bar_without_the_filter_language_says_so():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2", "slash")
        bar = app.screen.query_one(FilterBar)
        assert bar.display
        await pilot.press(*"psn == 3", "enter")
        await pilot.pause()
        assert text_of(app.screen.query_one("#filter-message")) == NO_FILTERS
        assert isinstance(app.screen, QueuePairsScreen)
        await pilot.press("escape")
        assert not bar.display


class _EvenPsn:
    def mask(self, batch):
        return (batch.cols["psn"] % 2 == 0) & batch.mask("psn")


def _fake_filter_module():
    module = types.ModuleType("roceview.filter")

    class FilterError(ValueError):
        pass

    def compile_filter(text):
        if text != "even":
            raise FilterError(f"unknown filter {text!r}\nsecond line not shown")
        return _EvenPsn()

    module.FilterError, module.compile_filter = FilterError, compile_filter
    return module


async def test_filter_bar_applies_a_filter_and_shows_a_bad_one(monkeypatch):
    """The UI side of the filter language, through a stand-in with its API."""
    import roceview

    module = _fake_filter_module()
    monkeypatch.setitem(sys.modules, "roceview.filter", module)
    monkeypatch.setattr(roceview, "filter", module, raising=False)
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("1", "slash", *"bad", "enter")
        await pilot.pause()
        assert text_of(app.screen.query_one("#filter-message")) == "unknown filter 'bad'"
        await pilot.press("ctrl+a", "ctrl+k", *"even", "enter")
        screen = app.screen
        assert isinstance(screen, PacketsScreen)
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.scanning and screen.filtered is not None:
                break
        batch = app.index.decode(np.arange(235))
        expected = np.flatnonzero(_EvenPsn().mask(batch))
        assert screen.plist.rows.tolist() == expected.tolist()
        assert "filter: even" in text_of(screen.query_one("#packets-status"))
        await pilot.press("c")
        assert len(screen.plist.rows) == 235


@pytest.mark.skipif(not _filter_module_present(), reason="roceview.filter (the filter language) is not on this branch")
async def test_filter_bar_shows_a_bad_filter_of_the_real_language():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("slash", *"((", "enter")
        await pilot.pause()
        message = text_of(app.screen.query_one("#filter-message"))
        assert message and "\n" not in message and message != NO_FILTERS


@pytest.mark.skipif(not _filter_module_present(), reason="roceview.filter (the filter language) is not on this branch")
async def test_filter_bar_applies_a_filter_of_the_real_language():
    from roceview.filter import compile_filter

    text = "infiniband.bth.opcode == 0x11"          # RC ACKNOWLEDGE
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("2", "slash", *text, "enter")
        screen = app.screen
        assert isinstance(screen, PacketsScreen)
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.scanning and screen.filtered is not None:
                break
        expected = np.flatnonzero(compile_filter(text).mask(app.index.decode(np.arange(235))))
        assert len(expected) and screen.plist.rows.tolist() == expected.tolist()


async def test_pfc_screen_shows_pause_share_and_timeline():
    app = app_for("pfc-storm.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PfcScreen)
        row = screen.query_one("#pfc", DataTable).get_row_at(0)
        assert [str(c).strip() for c in row[:3]] == ["0e:c0:de:00:00:11", "3", "100.0"]
        assert "█" in text_of(screen.query_one("#pfc-timeline"))


async def test_help_lists_every_key_and_esc_goes_back():
    app = app_for("clean.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = text_of(app.screen.query_one("#help-text"))
        for key in ("1 2 3 4", "Enter", "s ", "p ", "/ ", "Esc", "? ", "q "):
            assert key in text, key
        await pilot.press("escape")
        assert isinstance(app.screen, PfcScreen)
        await pilot.press("escape")                    # back to the screen visited before
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("t")
        assert app.theme == "textual-light"


async def test_q_quits_from_the_help_screen():
    """Help is modal: the app's q was switched off under it, and q did nothing there."""
    app = app_for("clean.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0


async def test_a_live_stream_of_batches_and_its_stats():
    from roceview.packets.read import iter_batches

    batches = iter_batches([str(SAMPLES / "network-loss.pcap")], prefetch=False)
    app = make_app(batches, title="live", live_stats=lambda: {"kernel drops": 7, "our drops": 0})
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "kernel drops 7" in text_of(app.screen.query_one("#summary"))
        await pilot.press("3")
        await pilot.pause()
        status = text_of(app.screen.query_one("#packets-status"))
        assert "a stream: the most recent 235 of 235 packets are kept" in status
        await pilot.press("down")
        await pilot.pause()
        tree = app.screen.query_one("#packet-tree", Tree)
        assert str(tree.root.label).startswith("Frame 2 ")
        assert "not kept" in str(tree.root.children[0].label)


async def test_bad_capture_is_shown_not_raised(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    app = make_app([str(bad)], title="bad")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "stopped:" in text_of(app.screen.query_one("#summary"))
        await pilot.press("2", "3", "4")
        await pilot.press("q")
    assert app.return_code == 0



async def test_mouse_click_selects_a_packet_and_double_click_opens_a_qp():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        await pilot.click("#packet-list", offset=(5, 4))   # the list's first line is its header
        await pilot.pause()
        assert app.screen.plist.current_row() == 3
        assert str(app.screen.query_one("#packet-tree", Tree).root.label).startswith("Frame 4 ")
        await pilot.press("2")
        await pilot.pause()
        await pilot.click("#qps", offset=(5, 1), times=2)
        await pilot.pause()
        assert isinstance(app.screen, QpDetailScreen) and app.screen.flow_row == app.screen_stack[0].query_one("#qps").rows[1]
