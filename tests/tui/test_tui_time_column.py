"""The packet list's time column is `dissect`'s: the file's precision (9 decimals on a ns
capture), tshark's -t formats (T cycles them, `tui -t` picks one) and -u hms (U); the display
filter reads frame.time_relative, frame.time_delta and frame.time_delta_displayed as `dissect -Y`."""
from __future__ import annotations

import json
import time

import pytest

from helpers.cli import run
from helpers.tui import SAMPLES, app_for, loaded, scanned, text_of
from roceview.packets.times import FORMATS
from roceview.tui import Options
from roceview.tui.base import compile_filter

SAMPLE = "network-loss.pcap"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def dissect_times(*args) -> list[str]:
    code, out, err = run("dissect", SAMPLES / SAMPLE, "--jsonl", *args)
    assert code == 0, err
    return [json.loads(line)["time"] for line in out.splitlines()]


def list_times(plist, count: int) -> list[str]:
    """The time of each of the first lines: the text between the frame number and the source."""
    out = []
    for i in range(count):
        line = plist.line(i)
        frame_end = len(line) - len(line.lstrip()) + len(line.split()[0])
        out.append(line[frame_end:line.index(" 10.0.0.")].strip())
    return out


@pytest.mark.asyncio
async def test_the_list_shows_nanoseconds_and_t_cycles_tsharks_formats():
    app = app_for(SAMPLE)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        plist = app.screen.plist
        assert list_times(plist, 30) == dissect_times("-c", "30")          # 0.000000008, not 0.000000
        for fmt in FORMATS[1:] + FORMATS[:1]:
            await pilot.press("T")
            await pilot.pause()
            assert plist.time_format == fmt
            assert list_times(plist, 30) == dissect_times("-c", "30", "-t", fmt), fmt
            status = text_of(app.screen.query_one("#packets-status"))
            assert ("time:" in status) == (fmt != "r")
        await pilot.press("U")
        await pilot.pause()
        assert list_times(plist, 30) == dissect_times("-c", "30", "-u", "hms")
        assert str(app.screen.query_one("#packet-tree").root.label).split()[2].endswith("s")


@pytest.mark.asyncio
async def test_tui_t_and_u_pick_the_format_and_dd_counts_from_the_row_listed_before():
    app = app_for(SAMPLE, options=Options(time_format="dd", hms=True))
    text = "infiniband.bth.opcode == 17"
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        app.apply_filter(text, compile_filter(text)[0])
        await scanned(pilot, app.screen)
        plist = app.screen.plist
        n = len(plist.rows)
        assert n > 5 and list_times(plist, n) == dissect_times("-Y", text, "-t", "dd", "-u", "hms")


@pytest.mark.asyncio
async def test_the_filter_reads_relative_times_as_dissect_y():
    app = app_for(SAMPLE)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        for text in ("frame.time_relative > 0.00002", "frame.time_delta > 0.0000001",
                     "frame.number == 1 || frame.time_delta_displayed > 0.000001"):
            _, out, _ = run("dissect", SAMPLES / SAMPLE, "-Y", text)
            expected = [int(line.split()[0]) - 1 for line in out.splitlines()]
            app.apply_filter(text, compile_filter(text)[0])      # as the filter bar's Enter does
            await scanned(pilot, app.screen)
            assert len(expected) > 3 and app.screen.plist.rows.tolist() == expected, text


def test_tui_refuses_an_unknown_time_format_in_one_line():
    code, out, err = run("tui", SAMPLES / SAMPLE, "-t", "x")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
