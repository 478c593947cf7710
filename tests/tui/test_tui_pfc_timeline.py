"""The PFC screen's timeline: one row per pausing (source MAC, priority), its blocks where the
pause was in effect, and under them on the same time axis the CE marks and the retransmissions
of all RoCE traffic where the timeline has them."""
from __future__ import annotations

import numpy as np
import pytest

from roceview.render.report import capture_span
from roceview.tui import Options, make_app
from roceview.tui.pfc_screen import PfcScreen
from roceview.tui.pfc_timeline import LABEL
from helpers.tui import SAMPLES, loaded, text_of

pytestmark = pytest.mark.asyncio
SIZE = (100, 30)


async def _timeline(path, bucket_ms: float = 1.0) -> tuple[list[str], object]:
    """The timeline's lines on screen 4, and the result."""
    app = make_app([str(path)], title="t", options=Options(bucket_ms=bucket_ms))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        assert isinstance(app.screen, PfcScreen)
        text = text_of(app.screen.query_one("#pfc-timeline"))
        await pilot.press("q")
    return text.splitlines(), app.snapshot.result


def _row(lines: list[str], label: str) -> str:
    hits = [line[LABEL:] for line in lines if line.startswith(label)]
    assert len(hits) == 1, lines
    return hits[0]


def _columns(starts, bucket_ns: int, span: tuple[int, int], width: int) -> set[int]:
    """The columns of [t0, t1] split in `width` that the buckets at `starts` overlap."""
    t0, t1 = span
    out = set()
    for b in starts:
        lo, hi = max(b, t0), min(b + bucket_ns, t1)
        if hi > lo:
            first = (lo - t0) * width // (t1 - t0)
            last = min(-(-(hi - t0) * width // (t1 - t0)) - 1, width - 1)
            out |= set(range(first, last + 1))
    return out


async def test_a_pause_storm_has_one_row_paused_over_the_storm(tmp_path):
    from roceview.generate import generate, write_capture

    path = tmp_path / "storm.pcap"
    write_capture(generate("pfc-storm", seed=2), path)
    lines, result = await _timeline(path)
    pfc = result.pfc_table.records()
    assert len(pfc) == 1
    pauses = [line for line in lines if line[:17].count(":") == 5]
    assert len(pauses) == 1, lines
    bar = _row(lines, f"{pfc[0]['src_mac']} p{pfc[0]['priority']}")
    assert len(bar) == SIZE[0] - 2 - LABEL
    assert set(bar[1:-1]) == {"█"}          # paused all through the storm, to the edges' buckets
    share = pfc[0]["paused_us"] * 1000 / result.summary["duration_ns"]
    assert share > 0.99


async def test_each_pausing_mac_and_priority_has_its_row_blank_where_it_did_not_pause():
    lines, result = await _timeline(SAMPLES / "pfc-without-ecn.pcap", bucket_ms=0.001)
    span = capture_span(result.summary)
    t = result.pfc_timeline_table.records()
    for row in result.pfc_table.records():
        bar = _row(lines, f"{row['src_mac']} p{row['priority']}")
        starts = [int(r["bucket_start"].replace(".", "")) for r in t
                  if (r["src_mac"], r["priority"]) == (row["src_mac"], row["priority"]) and r["paused_us"] > 0]
        drawn = {i for i, c in enumerate(bar) if c != " "}
        assert drawn and drawn == _columns(starts, 1000, span, len(bar)), bar


@pytest.mark.parametrize("sample,column,label", [("cnp-missing.pcap", "ecn_ce", "CE marks, all RoCE"),
                                                 ("network-loss.pcap", "retransmitted_packets", "retransmits, all RoCE")])
async def test_ce_and_loss_marks_fall_in_the_columns_of_their_buckets(sample, column, label):
    lines, result = await _timeline(SAMPLES / sample, bucket_ms=0.001)
    d = result.timeline_table.data
    starts = np.asarray(d["bucket_start"])[np.asarray(d[column]) > 0].tolist()
    row = _row(lines, label)
    drawn = {i for i, c in enumerate(row) if c != " "}
    assert drawn and drawn == _columns(starts, 1000, capture_span(result.summary), len(row)), row
    other = _row(lines, [m for m in ("CE marks, all RoCE", "retransmits, all RoCE") if m != label][0])
    assert other.strip() == "(none)"
    assert lines[-1].strip().startswith("0.000000000 s") and lines[-1].rstrip().endswith(
        f"0.{result.summary['duration_ns']:09d} s")


async def test_the_timeline_is_drawn_again_for_the_new_width_after_a_resize():
    app = make_app([str(SAMPLES / "pfc-storm.pcap")], title="t", options=Options())
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        await pilot.resize_terminal(140, 30)
        await pilot.pause()
        await pilot.pause()
        lines = text_of(app.screen.query_one("#pfc-timeline")).splitlines()
        await pilot.press("q")
    assert len(_row(lines, "0e:c0:de:00:00:11 p3")) == 140 - 2 - LABEL
