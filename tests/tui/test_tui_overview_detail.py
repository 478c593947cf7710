"""The Overview at real terminal sizes: the highlighted finding's detail pane holds its whole
summary, flows, frames, evidence and advice, scrolls, and Tab reaches it; the findings list
takes the rows it needs (at least 5 at 80x24), no empty lines; tokens wrap at spaces only."""
from __future__ import annotations

import pytest
from textual.geometry import Region
from textual.widgets import DataTable

from helpers.tui import SAMPLES, loaded
from roceview.tui import Options, make_app

def _app(*names: str):
    return make_app([str(SAMPLES / n) for n in names], title="roceview", options=Options())


def _lines(widget) -> list[str]:
    """The lines the widget draws, all of them (the part scrolled out of view too)."""
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, *widget.outer_size))]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.asyncio
@pytest.mark.parametrize("width", [80, 60])
async def test_the_detail_holds_the_whole_finding_and_breaks_no_token(width):
    app = _app("network-loss.pcap")
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(pilot)
        record = app.snapshot.result.findings_table.records()[0]
        lines = _lines(app.screen.query_one("#finding-detail"))
        text = _words(" ".join(lines))
        for part in ("summary", "evidence", "advice"):
            assert _words(record[part]) in text, (part, lines)
        for flow in record["flows"].split(";"):        # each flow whole on one line
            assert any(flow in line for line in lines), (flow, lines)
        for frame in record["frames"].split(";"):
            assert f" {frame}," in text or f" {frame} " in text, (frame, lines)


@pytest.mark.asyncio
async def test_tab_reaches_the_detail_its_keys_scroll_it_and_shift_tab_goes_back():
    app = _app("network-loss.pcap")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        findings = app.screen.query_one("#findings", DataTable)
        assert app.focused is findings
        await pilot.press("tab")
        pane = app.focused
        assert pane is not None and pane.query_one("#finding-detail") is not None
        assert pane.max_scroll_y > 0            # 80x24: the advice is below the fold
        await pilot.press("pagedown")
        await pilot.pause(0.3)
        assert pane.scroll_y > 0
        await pilot.press("end")
        await pilot.pause(0.3)
        assert pane.scroll_y == pane.max_scroll_y
        await pilot.press("shift+tab")
        assert app.focused is findings


@pytest.mark.asyncio
async def test_one_finding_leaves_no_empty_lines_above_the_detail():
    app = _app("network-loss.pcap")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        findings = app.screen.query_one("#findings", DataTable)
        detail = app.screen.query_one("#finding-detail")
        assert findings.row_count == 1
        # the header, the row, at most a horizontal scrollbar and the pane's top rule: the detail
        assert detail.region.y - findings.region.y <= 4, (findings.region, detail.region)


@pytest.mark.asyncio
@pytest.mark.parametrize("width", [80, 120])
async def test_a_long_summary_row_is_cut_at_a_word_and_the_table_never_scrolls_sideways(width):
    app = _app("network-loss.pcap")
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(pilot)
        findings = app.screen.query_one("#findings", DataTable)
        summary = app.snapshot.result.findings_table.records()[0]["summary"]
        shown = str(findings.get_row_at(0)[2])
        assert findings.max_scroll_x == 0, findings.virtual_size
        if shown != summary:
            assert shown.endswith("…") and summary.startswith(shown[:-1] + " "), shown


@pytest.mark.asyncio
@pytest.mark.parametrize("size,rows", [((80, 24), 5), ((120, 40), 10)])
async def test_many_findings_keep_rows_and_the_detail_keeps_room(size, rows):
    app = _app("pfc-without-ecn.pcap", "priority-mismatch.pcap", "incast.pcap", "slow-receiver.pcap",
               "pfc-storm.pcap", "cnp-missing.pcap", "rnr.pcap", "tap-skew.pcap")
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        findings = app.screen.query_one("#findings", DataTable)
        footer = app.screen.query_one("Footer")
        assert findings.row_count > rows
        header = 1
        assert findings.scrollable_content_region.height - header >= rows, findings.region
        assert footer.region.y - findings.region.bottom >= 8, (findings.region, footer.region)


def test_the_summary_line_says_1_flow_not_1_flows():
    from types import SimpleNamespace

    from roceview.tui.loader import Snapshot
    from roceview.tui.overview import summary_text

    for flows, words in ((1, "1 flow "), (2, "2 flows "), (1234, "1,234 flows ")):
        result = SimpleNamespace(summary={"duration_ns": 10**9, "roce_packets": 5, "flows": flows, "detected": {}})
        text = summary_text(Snapshot(result, packets=5, elapsed=0.01, fraction=1.0, done=True)).plain
        assert words in text, text


@pytest.mark.asyncio
async def test_a_capture_without_findings_says_what_the_report_says():
    """No finding: the pane says what was (not) detected, as the report does, not a blank screen."""
    from roceview.render.report import no_findings

    app = _app("clean.pcap")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert not app.snapshot.result.findings_table.records()
        text = _words(" ".join(_lines(app.screen.query_one("#finding-detail"))))
        assert "no findings" in text
        for line in no_findings(app.snapshot.result.summary):
            assert _words(line) in text
