"""The TUI writes numbers as the `analyze` report does (roceview/units.py): the report's column
names, counts with thousands separators, durations and Gb/s through units, right-aligned numbers,
a blank where there is no value, microseconds spelled one way, plurals right."""
from __future__ import annotations

import re

import numpy as np
import pytest
from rich.text import Text
from textual.widgets import DataTable

from roceview.render.report import qp_cells, worst_first
from roceview.tui.qps import QpList
from roceview.units import count, duration
from helpers.tui import SAMPLES, app_for, loaded, text_of

pytestmark = pytest.mark.asyncio
WIDE = (400, 40)                  # every qps.csv column of the Queue pairs screen fits
TEXT_COLUMNS = {"flow", "peer", "tr", "src_ip", "dst_ip", "first_ts", "last_ts", "dest_qp"}
UNIT = re.compile(r"\d (ns|us|µs|ms|s)\b")


def screen_text(app) -> str:
    """Every character the current screen shows, line by line."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def qp_table(screen) -> tuple[list[str], list[list[str]]]:
    """The Queue pairs screen's heads and the cells of each row, cut at the column widths (each
    column is its text and a gap of 2), not stripped: alignment is part of what is checked."""
    plist = screen.query_one(QpList)
    header = text_of(screen.query_one("#qps-header"))
    bounds = np.cumsum((1,) + plist.widths)
    cut = lambda line: [line[a:b] for a, b in zip(bounds[:-1], bounds[1:])]  # noqa: E731
    return cut(header), [cut(plist.line(i)) for i in range(len(plist.rows))]


@pytest.mark.parametrize("name", ["network-loss.pcap", "pfc-storm.pcap", "incast.pcap"])
async def test_queue_pairs_columns_are_the_reports(name):
    app = app_for(name)
    async with app.run_test(size=WIDE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        heads, rows = qp_table(app.screen)
        flows = app.snapshot.result.flows_table
    report_heads, report_rows, _ = qp_cells(flows.take(worst_first(flows)), True, 10_000)
    heads = [h.strip() for h in heads]
    assert set(report_heads) <= set(heads), set(report_heads) - set(heads)
    for k, head in enumerate(report_heads):
        mine = [row[heads.index(head)].strip() for row in rows]
        assert mine == [r[k] for r in report_rows], head


async def test_queue_pairs_numbers_are_right_aligned_and_blank_without_a_value():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=WIDE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        heads, rows = qp_table(app.screen)
    names = [h.strip() for h in heads]
    for k, head in enumerate(heads):
        if names[k] in TEXT_COLUMNS:
            continue
        for cell in [head] + [row[k] for row in rows]:
            assert cell.endswith("  ") and (not cell.strip() or cell[-3] != " "), (names[k], cell)
    assert "bytes" in names and any("," in row[names.index("bytes")] for row in rows)
    rtt = [row[names.index("RTT p50")].strip() for row in rows]
    assert rtt[0].endswith(" us") and rtt[1] == ""                  # the responder measured none


async def test_sorting_by_a_renamed_column_marks_its_head():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=WIDE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        for _ in range(3):                                          # worst, packets, bytes, gap_psns
            await pilot.press("s")
        await pilot.pause()
        heads, _ = qp_table(app.screen)
        assert "gap PSNs ▼" in [h.strip() for h in heads]
        assert "sorted by gap_psns" in text_of(app.screen.query_one("#qp-status"))


def _cells(table: DataTable, row: int) -> list:
    return list(table.get_row_at(row))


async def test_pfc_screen_has_the_reports_names_and_units():
    app = app_for("pfc-storm.pcap")
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        table = app.screen.query_one("#pfc", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        row = _cells(table, 0)
        pfc = app.snapshot.result.pfc_table.data
        status = text_of(app.screen.query_one("#pfc-status"))
    for name in ("source MAC", "priority", "paused", "longest", "pauses", "resumes"):
        assert name in labels, labels
    by = dict(zip(labels, row))
    assert str(by["paused"]) == duration(float(pfc["paused_us"][0]) * 1000)
    assert str(by["longest"]) == duration(float(pfc["longest_pause_us"][0]) * 1000)
    assert str(by["pauses"]) == count(pfc["pause_frames"][0])
    for name in ("paused %", "paused", "longest", "pauses", "resumes"):
        assert isinstance(by[name], Text) and by[name].justify == "right", name
    assert status.startswith("1 (source MAC, priority) pair sent")       # one pair: no plural s


async def test_qp_detail_counters_read_as_the_queue_pairs_table():
    app = app_for("network-loss.pcap")
    async with app.run_test(size=WIDE) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        heads, rows = qp_table(app.screen)
        await pilot.press("enter")
        await pilot.pause()
        table = app.screen.query_one("#qp-counters", DataTable)
        counters = {str(r[0]): r[1] for r in (table.get_row_at(i) for i in range(table.row_count))}
    names = [h.strip() for h in heads]
    shared = [n for n in counters if n in names]
    assert {"pkts", "gap PSNs", "NAK seq", "RTT p50", "RTT p99", "Gb/s", "bytes"} <= set(shared)
    for name in shared:
        assert str(counters[name]) == rows[0][names.index(name)].strip(), name
        assert isinstance(counters[name], Text) and counters[name].justify == "right", name


async def test_every_screen_spells_microseconds_one_way():
    """Overview, Queue pairs, QP detail, Packets and PFC of every sample at once (the files are
    merged, as `roceview tui a.pcap b.pcap` does: one run, every sample's findings, QPs and
    pauses): "us", never "µs"."""
    from roceview.tui import Options, make_app

    app = make_app([str(p) for p in sorted(SAMPLES.glob("*.pcap"))], title="samples", options=Options())
    texts = []
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        for keys in ((), ("2",), ("enter",), ("escape", "3"), ("4",)):
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            texts.append(screen_text(app))
    units = {m.group(1) for text in texts for m in UNIT.finditer(text)}
    assert "us" in units and "µs" not in units and not any("µs" in t for t in texts), units


async def test_cells_are_blank_without_a_value_and_counts_have_separators():
    from roceview.tui import text

    assert [text.cell_text(c, float("nan")) for c in ("rtt_p50_us", "rtt_p99_us", "goodput_gbps")] == [""] * 3
    assert text.cell_text("peer_qp", -1) == "" and text.cell_text("peer_qp", 0x3D6E5) == "0x03d6e5"
    assert text.cell_text("bytes", 155120) == "155,120" and text.cell_text("goodput_gbps", 0.0) == "0"
    assert text.cell_text("paused_us", 149992.0) == "149.992 ms" and text.duration(0.150018) == "150.018 ms"
