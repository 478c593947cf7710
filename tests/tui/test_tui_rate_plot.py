"""The QP detail's rate plot: the QP's rate over its timeline buckets, a mark under it at each
CNP the QP received (cc.csv's rows of its flow) on the same time axis, and its DCQCN reaction
numbers (qps.csv) in a line."""
from __future__ import annotations

import pytest

from roceview.tui import Options, make_app
from roceview.tui.qp_detail import QpDetailScreen, peer_row
from roceview.tui.rate_plot import CNP_MARK, LABEL
from helpers.tui import SAMPLES, loaded, text_of

pytestmark = pytest.mark.asyncio
SIZE = (120, 40)


async def _plot(path, pick, bucket_ms: float = 1.0) -> tuple[list[str], object, int]:
    """The rate plot's lines of the QP detail of flow row pick(result), the result, the row."""
    app = make_app([str(path)], title="t", options=Options(bucket_ms=bucket_ms))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        row = pick(app.snapshot.result)
        app.open_qp(row)
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, QpDetailScreen)
        text = text_of(app.screen.query_one("#qp-rate"))
        await pilot.press("q")
    return text.splitlines(), app.snapshot.result, row


def _most_cnps(result) -> int:
    flows = result.flows_table.data
    return max(range(len(result.flows_table)), key=lambda r: flows["cnps_received"][r])


async def test_a_dcqcn_senders_plot_marks_each_cnp_at_its_time_and_names_its_reaction(tmp_path):
    from roceview.generate import generate, write_capture

    path = tmp_path / "dcqcn.pcap"
    write_capture(generate("dcqcn-reaction", seed=0), path)
    lines, result, row = await _plot(path, _most_cnps, bucket_ms=0.005)
    flows, cc = result.flows_table.data, result.cc_table.records()
    name = flows["flow"][row]
    cnps = [int(r["cnp_ts"].replace(".", "")) for r in cc if r["flow"] == name]
    assert len(cnps) >= 5
    rows = [row, peer_row(result.flows_table, row)]
    t0, t1 = min(flows["first_ts"][r] for r in rows), max(flows["last_ts"][r] for r in rows)
    marks = [line for line in lines if line.startswith("CNP ")]
    assert len(marks) == 1
    width = len(marks[0]) - LABEL
    drawn = {i for i, c in enumerate(marks[0][LABEL:]) if c == CNP_MARK}
    assert drawn == {min((ts - t0) * width // (t1 - t0), width - 1) for ts in cnps}
    plot = lines[1:5]                                    # the rate, 4 rows: it was sent at a rate
    assert all(len(p) == len(marks[0]) for p in plot) and "█" in plot[-1]
    reaction = lines[-1]
    assert reaction.startswith(f"{flows['cnps_received'][row]} CNPs: reaction p50 "
                               f"{flows['cnp_reaction_us_p50'][row]:.3f} us")
    assert f"cut p50 {flows['rate_cut_pct_p50'][row]:.1f} %" in reaction
    assert f"ignored {flows['cnps_ignored'][row]} of {flows['cnps_judged'][row]} judged" in reaction


async def test_a_qp_without_cnps_says_so_and_a_capture_inside_one_bucket_says_how_to_see_more():
    lines, result, _ = await _plot(SAMPLES / "clean.pcap", lambda result: 0)
    assert "CNP (none)" in lines and "no CNP reached this QP" in lines
    assert lines[-1] == "one bucket: --bucket MS for finer"
