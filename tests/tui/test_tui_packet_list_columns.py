"""The packet list is a table as termshark's: a header No. | Time | Source | Destination |
Protocol | Length | Info, each column at one width, numbers right-aligned, text left-aligned;
the header scrolls sideways with the rows; at 80 columns a RoCE row's QP and PSN are on the
screen (they lead Info, then the analysis tags, then the opcode)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from rich.style import Style

from helpers.tui import SAMPLES, app_for, loaded

pytestmark = pytest.mark.asyncio
# each column's header labels (the long one when the column is that wide) and its alignment
LABELS = ((("No.",), "right"), (("Time",), "right"), (("Source", "Src"), "left"),
          (("Destination", "Dest"), "left"), (("Protocol", "Proto"), "left"), (("Length", "Len"), "right"),
          (("Info",), "left"))
ROW = re.compile(r"^\s*(\d+) ")


def screen_lines(app) -> list[str]:
    """Every line the screen shows, as text."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def dissect_fields(name: str) -> dict[int, list[str]]:
    """frame -> [frame, time, source, destination, protocol, length] of each `dissect` line."""
    out = subprocess.run([sys.executable, "-m", "roceview", "dissect", str(SAMPLES / name)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    fields = {}
    for line in out:
        head, tail = line.split(" → ", 1)
        frame, time, src = head.split()
        dst, proto, length = tail.split()[:3]
        fields[int(frame)] = [frame, time, src, dst, proto, length]
    return fields


def header_and_rows(lines: list[str]) -> tuple[str, list[str]]:
    """The list's header (the line naming Source and Info) and the rows under it."""
    at = next(i for i, line in enumerate(lines) if "Source" in line or " Src " in line)
    rows = []
    for line in lines[at + 1:]:
        if not ROW.match(line):
            break
        rows.append(line)
    return lines[at], rows


def column_edges(header: str) -> list[int]:
    """Where each column is anchored: a right-aligned column's end, a left-aligned one's start."""
    tokens = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", header)][:7]   # (then a scrollbar)
    edges = []
    for (text, start, end), (labels, align) in zip(tokens, LABELS):
        assert text in labels, (text, labels, header)
        edges.append(end if align == "right" else start)
    return edges


def assert_aligned(header: str, rows: list[str], fields: dict) -> None:
    edges = column_edges(header)
    for row in rows:
        values = fields[int(ROW.match(row).group(1))]
        for value, edge, (_, align) in zip(values, edges, LABELS):
            start = edge - len(value) if align == "right" else edge
            assert row[start: start + len(value)] == value, (value, row)
            assert start == 0 or row[start - 1] == " ", (value, row)
        assert row[edges[6] - 1] == " " and row[edges[6]] != " ", row      # Info starts under its head


async def test_the_columns_line_up_under_their_header():
    """pfc-storm: MAC and IP addresses, RoCEv2 and PFC, lengths of 2 to 4 digits on one screen."""
    name = "pfc-storm.pcap"
    fields = dissect_fields(name)
    app = app_for(name)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        app.screen.plist.goto(58)                     # frames ..59: PFC frames (49..) among RoCE ones
        await pilot.pause()
        header, rows = header_and_rows(screen_lines(app))
        assert len(rows) >= 10
        shown = {int(ROW.match(r).group(1)) for r in rows}
        assert {fields[f][4] for f in shown} == {"RoCEv2", "PFC"}
        assert len({len(fields[f][2]) for f in shown}) == 2           # 8 and 17 characters
        assert len({len(fields[f][5]) for f in shown}) == 3           # 60, 210, 1086
        assert_aligned(header, rows, fields)


async def test_the_header_scrolls_sideways_with_the_rows():
    name = "network-loss.pcap"
    app = app_for(name)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        lines = screen_lines(app)
        header, rows = header_and_rows(lines)
        at, width = lines.index(header), app.screen.plist.scrollable_content_region.width
        for _ in range(6):
            await pilot.press("right")
        await pilot.pause()
        moved = int(app.screen.plist.scroll_offset.x)
        assert moved == 6
        lines = screen_lines(app)
        for k, before in enumerate([header] + rows[:3]):      # the rows moved, and the header with them
            assert lines[at + k][:width - moved] == before[moved:width], k


async def test_qp_and_psn_are_seen_at_80_columns_before_the_tags():
    name = "network-loss.pcap"
    out = subprocess.run([sys.executable, "-m", "roceview", "dissect", str(SAMPLES / name)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    qp_psn = {int(line.split()[0]): re.search(r"QP=0x\S+ PSN=\S+", line).group() for line in out if " QP=" in line}
    app = app_for(name)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        plist = app.screen.plist
        plist.goto(53)                                # frames ..54: a NAK (46), retransmissions
        await pilot.pause()
        _, rows = header_and_rows(screen_lines(app))
        frames = [int(ROW.match(r).group(1)) for r in rows]
        assert 46 in frames and 49 in frames
        for row, frame in zip(rows, frames):
            assert qp_psn[frame] + " " in row, row                 # whole, on the screen
        line = plist.line(48)                          # frame 49: the tag after QP and PSN
        assert "QP=0x034405 PSN=3531350 [Retransmission of frame 40] RC_RDMA_WRITE_MIDDLE VLAN=100" in line
        error = plist.get_component_rich_style("packet-list--error", partial=True).color
        coloured = {seg.text: seg.style.color for seg in plist.segments(48, Style())}
        assert error is not None and coloured["[Retransmission of frame 40]"] == error
        assert "".join(seg.text for seg in plist.segments(48, Style())) == line


@pytest.mark.asyncio
async def test_columns_stay_put_when_end_reaches_longer_frame_numbers():
    """pfc-storm has frames 1-9 and 100+: the No. column is as wide as the last frame's from
    the start, so End does not move every column a place to the right."""
    app = app_for("pfc-storm.pcap")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await pilot.pause()
        plist = app.screen.plist
        before = plist.header()
        await pilot.press("end")
        await pilot.pause()
        assert plist.header()[:12] == before[:12]
