"""Enter on a finding shows its frames in Packets, with the filter that selects them in the filter
bar; f opens its flows."""
from __future__ import annotations

import pytest

from helpers.cli import run
from helpers.tui import SAMPLES, app_for, loaded, scanned
from roceview.diagnose.evidence_frames import finding_filter


def test_a_findings_filter_names_its_kind_and_its_queue_pairs():
    record = {"kind": "network_loss", "frames": "46;47", "flows": "10.0.0.1>10.0.0.2:0x034405;10.0.0.2>10.0.0.1:0x03d6e5"}
    assert finding_filter(record) == 'roceview.finding == "network_loss" && infiniband.bth.destqp in {0x034405, 0x03d6e5}'
    assert finding_filter({"kind": "pfc_storm", "frames": "49", "flows": ""}) == 'roceview.finding == "pfc_storm"'
    assert finding_filter({"kind": "pmtu_mismatch", "frames": "", "flows": ""}) is None


@pytest.mark.asyncio
async def test_enter_on_a_finding_shows_its_frames_and_the_filter():
    sample = "network-loss.pcap"
    app = app_for(sample)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        record = app.snapshot.result.findings_table.records()[0]
        await pilot.press("enter")
        await scanned(pilot, app.screen)
        assert app.current_mode == "packets"
        assert app.filter_text == finding_filter(record)
        _, out, _ = run("dissect", SAMPLES / sample, "-Y", app.filter_text, "-T", "fields", "-e", "frame.number")
        assert [r + 1 for r in app.screen.plist.rows.tolist()] == [int(x) for x in out.split()]
        assert len(out.split()) == record["frame_count"]


@pytest.mark.asyncio
async def test_f_on_a_finding_opens_its_flows():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("f")
        await pilot.pause()
        assert app.current_mode == "qps"


@pytest.mark.asyncio
async def test_enter_on_an_event_of_a_qp_lands_on_its_frame():
    from roceview.tui.packets_screen import PacketsScreen
    from roceview.tui.qp_detail import QpDetailScreen

    app = app_for("network-loss.pcap")
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("2", "enter")
        for _ in range(50):
            await pilot.pause(0.05)
            if isinstance(app.screen, QpDetailScreen) and app.screen._event_frames:
                break
        detail = app.screen
        frame = detail._event_frames[0]
        assert str(frame) in detail.event_table.get_row_at(0)[0]
        assert detail.event_table.get_row_at(0)[1].startswith("0.0000")   # since the first packet, not epoch
        detail.event_table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PacketsScreen)
        assert app.screen.plist.current_row() == frame - 1


def test_the_overview_line_shows_one_rate_the_traffics():
    """While loading, a second pkt/s (how fast roceview reads) beside the traffic's read as two
    different traffic rates."""
    from types import SimpleNamespace

    from roceview.tui.loader import Snapshot
    from roceview.tui.overview import summary_text

    result = SimpleNamespace(summary={"duration_ns": 2_000_000_000, "roce_packets": 10, "flows": 1, "detected": {}})
    for done in (False, True):
        text = summary_text(Snapshot(result, packets=1000, elapsed=0.01, fraction=0.5, done=done)).plain
        assert text.count("pkt/s") == 1 and "500 pkt/s" in text, text


async def _open_event(pilot, app, event: int):
    """Enter on the `event`-th event of the first QP's detail; its frame number."""
    from roceview.tui.qp_detail import QpDetailScreen

    await pilot.press("2", "enter")
    for _ in range(100):
        await pilot.pause(0.05)
        if isinstance(app.screen, QpDetailScreen) and len(app.screen._event_frames) > event:
            break
    detail = app.screen
    detail.event_table.focus()
    detail.event_table.move_cursor(row=event)
    await pilot.pause()
    frame = detail._event_frames[event]
    await pilot.press("enter")
    for _ in range(100):
        await pilot.pause(0.05)
        if app.current_mode == "packets" and app.screen.plist.current_row() == frame - 1:
            break
    return frame


@pytest.mark.asyncio
async def test_an_event_far_down_the_list_lands_on_screen_on_first_showing_packets():
    """Packets never shown before: the cursor's row is scrolled into view once the list has its size."""
    app = app_for("network-loss.pcap")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        frame = await _open_event(pilot, app, 5)
        plist = app.screen.plist
        await pilot.pause(0.2)
        assert plist.current_row() == frame - 1
        top = int(plist.scroll_offset.y)
        assert top <= plist.cursor < top + plist._rows_shown(), (top, plist.cursor)


@pytest.mark.asyncio
async def test_an_event_lands_on_its_frame_while_a_filter_is_on():
    """The filter of a finding shown, then Enter on a QP event: the cursor goes to the event's
    frame once the filter's scan has listed it (it stayed on the first row found)."""
    app = app_for("network-loss.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("enter")                # the first finding's frames, under its filter
        await scanned(pilot, app.screen)
        assert app.filter_text
        listed = set(app.screen.plist.rows.tolist())
        frame = await _open_event(pilot, app, 1)
        await scanned(pilot, app.screen)
        await pilot.pause(0.2)
        assert frame - 1 in listed                # the event's frame is one of the finding's
        assert app.screen.plist.current_row() == frame - 1
