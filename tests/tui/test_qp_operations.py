"""QP detail's Operations part: the QP's (and its peer's) RDMA messages as ops.csv lists them,
their latency percentiles and message sizes as op_stats has them; Enter on an operation lands on
its first frame in Packets, c on its completion frame. Driven with Pilot on a generated capture
(ops-mixed: every kind of RC operation, coalesced ACKs, resends, re-reads)."""
from __future__ import annotations

import asyncio
import math
import os
import random

import pytest
from helpers.tui import loaded

from roceview import units
from roceview.generate import generate, write_capture
from roceview.render.report import capture_span, relative
from roceview.tui import make_app
from roceview.tui.packets_screen import PacketsScreen
from roceview.tui.qp_detail import QpDetailScreen

pytestmark = pytest.mark.asyncio
SIZE_LABELS = ("<=64", "<=256", "<=1k", "<=4k", "<=16k", "<=64k", "<=256k", "<=1M", ">1M")


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("ops") / "ops-mixed.pcap"
    write_capture(generate("ops-mixed", seed=0), path)
    return path


def cells(table, row: int) -> list[str]:
    return [str(getattr(c, "plain", c)) for c in table.get_row_at(row)]


def busiest_flow(result) -> tuple[str, int]:
    """The requester flow with the most operations, and its row in the QP table."""
    names = list(result.ops_table.data["flow"])
    name = max(set(names), key=names.count)
    return name, list(result.flows_table.data["flow"]).index(name)


async def open_detail(pilot, app, flow_row: int) -> QpDetailScreen:
    """The detail of the QP table's row `flow_row`, over Queue pairs (as Enter there opens it)."""
    await loaded(pilot)
    await pilot.press("2")
    app.open_qp(flow_row)
    for _ in range(100):
        await pilot.pause(0.05)
        if isinstance(app.screen, QpDetailScreen) and len(app.screen.ops_view.list.rows):
            break
    assert isinstance(app.screen, QpDetailScreen)
    return app.screen


def expected_ops(result, name: str) -> list[list[str]]:
    """The ops.csv rows of one requester flow, in the QP detail's words (seconds since the first
    packet, the report's durations and counts, blank for no completion)."""
    d, first = result.ops_table.data, capture_span(result.summary)[0]
    out = []
    for i in (i for i, f in enumerate(d["flow"]) if f == name):
        latency = float(d["latency_us"][i])
        done = int(d["completion_frame"][i]) > 0
        out.append([str(int(d["first_frame"][i])), "→", d["op"][i], str(int(d["first_psn"][i])),
                    units.count(d["packets"][i]), units.count(d["bytes"][i]),
                    relative(int(d["start_ts"][i]) - first),
                    "" if math.isnan(latency) else units.duration(latency * 1000),
                    "yes" if d["retransmitted"][i] else "", units.count(d["outstanding"][i]),
                    str(int(d["completion_frame"][i])) if done else ""])
    return out


def expected_stats(result, name: str) -> list[list[str]]:
    """op_stats' rows of one requester flow, in the report's words."""
    st, sizes = result.op_stats_table.data, [c for c in result.op_stats_table.columns if c.startswith("size_")]
    out = []
    for i in (i for i, f in enumerate(st["flow"]) if f == name):
        hist = ", ".join(f"{label} {units.count(st[c][i])}" for label, c in zip(SIZE_LABELS, sizes) if st[c][i])
        out.append(["→", st["op"][i], units.count(st["operations"][i])]
                   + [units.duration(float(st[c][i]) * 1000) for c in
                      ("latency_p50_us", "latency_p99_us", "latency_max_us")] + [hist])
    return out


async def test_the_operations_part_is_ops_csv_rows_and_op_stats_of_the_qp(capture):
    app = make_app([str(capture)])
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        result = app.snapshot.result
        name, row = busiest_flow(result)
        detail = await open_detail(pilot, app, row)
        ops = detail.query_one("#qp-ops-list")
        got = [ops.cells(r) for r in range(len(ops.rows))]
        want = expected_ops(result, name)
        assert len(want) > 20
        assert [g for g in got if g[1] == "→"] == want
        # the peer's requests are its own flow's rows, marked ←; all in first-frame order
        peer = result.flows_table.data["flow"][detail.peer]
        assert len([g for g in got if g[1] == "←"]) == list(result.ops_table.data["flow"]).count(peer)
        frames = [int(g[0]) for g in got]
        assert frames == sorted(frames)
        # each drawn line (under the header) holds its values in the columns' order
        top = int(ops.scroll_offset.y)
        for y in range(1, min(len(got), 8) + 1):
            assert " ".join(ops.render_line(y).text.split()) == " ".join(v for v in got[top + y - 1] if v), y
        stats = detail.query_one("#qp-op-stats")
        want = expected_stats(result, name)
        assert len(want) >= 5
        assert [g for g in (cells(stats, r) for r in range(stats.row_count)) if g[0] == "→"] == want
        assert not detail.query_one("#qp-ops-note").display         # nothing left out: no note


async def test_enter_on_an_operation_lands_on_its_first_frame_and_c_on_its_completion(capture):
    app = make_app([str(capture)])
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        _, row = busiest_flow(app.snapshot.result)
        detail = await open_detail(pilot, app, row)
        ops = detail.query_one("#qp-ops-list")
        pick = next(r for r in range(5, len(ops.rows)) if ops.cells(r)[10])
        first, completion = int(ops.cells(pick)[0]), int(ops.cells(pick)[10])
        ops.focus()
        ops.cursor = pick
        await pilot.pause()
        assert "c" in detail.active_bindings          # the footer says the key while the list has focus
        await pilot.press("enter")
        await landed(pilot, app, first)
        await pilot.press("escape")                   # back to the QP detail, the cursor where it was
        await pilot.pause()
        assert app.screen is detail and ops.cursor == pick
        ops.focus()
        await pilot.press("c")
        await landed(pilot, app, completion)


async def landed(pilot, app, frame: int) -> None:
    for _ in range(100):
        await pilot.pause(0.05)
        if isinstance(app.screen, PacketsScreen) and app.screen.plist.current_row() == frame - 1:
            break
    assert isinstance(app.screen, PacketsScreen)
    assert app.screen.plist.current_row() == frame - 1


async def test_c_on_an_operation_without_completion_says_so(capture):
    app = make_app([str(capture)])
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        d = app.snapshot.result.ops_table.data
        d["completion_frame"][:] = -1                 # none completed: the key has nowhere to go
        _, row = busiest_flow(app.snapshot.result)
        detail = await open_detail(pilot, app, row)
        detail.query_one("#qp-ops-list").focus()
        await pilot.press("c")
        await pilot.pause()
        assert app.screen is detail and not app.errors
        assert any("no completion" in str(n.message) for n in app._notifications)


async def test_a_capped_ops_listing_is_said(capture):
    """When ops.csv stopped listing (summary.operations.not_listed), the list says so."""
    app = make_app([str(capture)])
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        result = app.snapshot.result
        result.summary["operations"].update(listed=60, not_listed=1234)
        _, row = busiest_flow(result)
        detail = await open_detail(pilot, app, row)
        note = str(detail.query_one("#qp-ops-note").render())
        assert "first 60 operations" in note and "1,234" in note, note


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_operations_list_is_reachable_at_80x24_and_120x40(capture, size):
    """Tab to the list scrolls the detail to it; down and End keep the cursor's operation on the
    screen, above the footer."""
    app = make_app([str(capture)])
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        _, row = busiest_flow(app.snapshot.result)
        detail = await open_detail(pilot, app, row)
        ops = detail.query_one("#qp-ops-list")
        for _ in range(6):
            if app.focused is ops:
                break
            await pilot.press("tab")
            await pilot.pause()
        assert app.focused is ops
        for keys, cursor in ((("down", "down"), 2), (("end",), len(ops.rows) - 1)):
            await pilot.press(*keys)
            await pilot.pause(0.2)
            assert ops.cursor == cursor
            y = 1 + ops.cursor - int(ops.scroll_offset.y)          # its line in the list (under the header)
            assert 1 <= y < ops.size.height and 0 <= ops.region.y + y < size[1] - 1, (ops.region, y)
            assert ops.render_line(y).text.split()[0] == ops.cells(cursor)[0]


async def test_the_operation_keys_clash_with_no_other_key_and_help_lists_them():
    from textual.binding import Binding

    from roceview.tui.app import RoceviewApp
    from roceview.tui.base import RoceScreen
    from roceview.tui.help import KEYS
    from roceview.tui.qp_ops import OpsList, QpOperations

    chain = [RoceviewApp, RoceScreen, QpDetailScreen, QpOperations, OpsList]
    keys = [k.strip() for cls in chain for c in cls.__mro__ for b in c.__dict__.get("BINDINGS", ())
            for k in (b.key if isinstance(b, Binding) else b[0]).split(",")]
    assert keys.count("c") == 1
    helped = {k: text for k, text in KEYS}
    assert "completion" in helped.get("Enter c", ""), helped


# random keys and resizes on the operations part: seeded, a few sessions in CI; a longer run:
# ROCEVIEW_FUZZ_EXAMPLES=30 pytest tests/tui/test_qp_operations.py -k random
SESSIONS = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "1"))
# keys of QP detail and Packets: Enter and c go to Packets, 2 back to the detail (Esc would walk
# back to the Overview, whose own Enter is tested elsewhere)
FUZZ_KEYS = ("tab", "tab", "down", "up", "pagedown", "end", "home", "enter", "c", "c", "2", "shift+tab")
FUZZ_SIZES = ((80, 24), (120, 40), (40, 10), (1, 1), (250, 80))


@pytest.mark.parametrize("seed", range(SESSIONS))
async def test_random_keys_on_the_operations_never_fail_nor_freeze(capture, seed):
    from test_tui_fuzz import STEP_DEADLINE, StepFrozen, Watchdog, _play

    rnd = random.Random(seed)
    app = make_app([str(capture)])
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        result = app.snapshot.result
        flows = list(result.flows_table.data["flow"])
        detail = await open_detail(pilot, app, rnd.randrange(len(flows)))
        for step in range(12):
            burst = [("resize", rnd.choice(FUZZ_SIZES)) if rnd.random() < 0.2 else ("key", rnd.choice(FUZZ_KEYS))
                     for _ in range(rnd.randint(1, 5))]
            with Watchdog(STEP_DEADLINE):
                try:
                    await asyncio.wait_for(_play(pilot, burst), STEP_DEADLINE)
                except (TimeoutError, StepFrozen):
                    pytest.fail(f"seed {seed} step {step}: froze on {burst}")
            assert app.is_running and not app.errors, (seed, step, burst, app.errors)
            if isinstance(app.screen, QpDetailScreen):
                detail = app.screen
                names = {flows[detail.flow_row]} | ({flows[detail.peer]} if detail.peer is not None else set())
                total = sum(f in names for f in result.ops_table.data["flow"])
                assert len(detail.query_one("#qp-ops-list").rows) == total, (seed, step)
        await pilot.press("ctrl+c")
    assert app.return_code == 0 and not app.errors
