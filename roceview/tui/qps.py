"""Screen 2, Queue pairs: the qps.csv columns that fit the width, worst first, under the report's
names and in its number style (tui/text.py: '1,698', '1.829 us', '17.7', blank for none, numbers
right-aligned); `s` cycles the sort column; Enter opens the QP detail. A virtual list: each
snapshot costs a numpy sort of the flows, and only the rows on screen are formatted (100 k queue
pairs scroll like 10)."""
from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from rich.text import Text
from textual.widgets import Static

from roceview.tui.base import RoceScreen
from roceview.tui.text import cell_text, head, is_number
from roceview.tui.virtual import VirtualList
from roceview.units import count, plural

SAMPLE_ROWS = 200     # column widths from the first rows and the extremes (names of the rest are cut)
# qps.csv columns by what a triage reads first; as many as fit are shown, in this order
PRIORITY = ("flow", "packets", "gap_psns", "unrecovered_psns", "retransmitted_packets", "naks_seq",
            "naks_rnr", "ecn_ce", "cnp_packets", "goodput_gbps", "rtt_p99_us", "bytes", "transport",
            "peer_qp", "naks_other", "gap_events", "rtt_p50_us", "data_packets", "acks", "payload_bytes",
            "retransmitted_bytes", "ecn_not_ect", "src_ip", "dst_ip", "dest_qp", "first_ts", "last_ts")
SORTS = ("worst", "packets", "bytes", "gap_psns", "retransmitted_packets", "naks_seq", "ecn_ce",
         "cnp_packets", "goodput_gbps", "rtt_p99_us", "flow")


class QpList(VirtualList):
    """Every flow, in `rows` order (flows-table rows); a line's cells are formatted when drawn."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.flows = None
        self.columns: tuple = ()
        self.widths: tuple = ()

    def show(self, flows, order: np.ndarray, columns: tuple, widths: tuple) -> None:
        selected = self.current_row()
        self.flows, self.rows, self.columns, self.widths = flows, order, columns, widths
        self.resized()
        at = np.flatnonzero(order == selected) if selected is not None else ()
        self.cursor = int(at[0]) if len(at) else min(self.cursor, max(len(order) - 1, 0))
        self.refresh()

    def line(self, i: int) -> str:
        row = int(self.rows[i])
        return aligned([cell(self.flows, c, row) for c in self.columns], self.columns, self.widths)


def cell(flows, column: str, row: int) -> str:
    return cell_text(column, flows.data[column][row])


def aligned(texts: list[str], columns: tuple, widths: tuple) -> str:
    """A line of cells, each `width` wide with 2 spaces after it: numbers right-aligned (never
    cut: a row past the sampled ones may be wider), names left-aligned and cut."""
    return " " + "".join(f"{t:>{w - 2}}  " if is_number(c) else f"{t[:w - 1]:<{w}}"
                         for t, c, w in zip(texts, columns, widths))


def widest(flows, column: str) -> list[str]:
    """The texts of a number column's extremes: with the sampled rows, the column's width (a
    count is widest at its maximum)."""
    if not is_number(column) or not len(flows):
        return []
    values = np.asarray(flows.data[column], dtype=np.float64)
    if np.isnan(values).all():
        return []
    return [cell_text(column, v) for v in (np.nanmax(values), np.nanmin(values))]


class QueuePairsScreen(RoceScreen):
    MODE = "qps"
    TITLE_TEXT = "2 Queue pairs"
    BINDINGS = [Binding("s", "sort", "Sort"), Binding("c", "clear_restriction", "All QPs", show=False)]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sort = 0
        self.only: set[str] | None = None
        self._flows = None

    def body(self) -> ComposeResult:
        yield Static("", id="qp-status")
        yield Static("", id="qps-header")
        yield QpList(id="qps")

    def restrict(self, names) -> None:
        """Only these flows (Enter on a finding)."""
        self.only = set(names) if names else None
        self._refill()

    def action_clear_restriction(self) -> None:
        self.restrict(None)

    def action_sort(self) -> None:
        self.sort = (self.sort + 1) % len(SORTS)
        self._refill()

    def show(self, snapshot) -> None:
        self._flows = snapshot.result.flows_table
        self._refill()

    def on_resize(self) -> None:
        self._refill()

    def _order(self, flows) -> np.ndarray:
        key = SORTS[self.sort]
        if key == "worst":
            from roceview.render.report import worst_first

            order = worst_first(flows)
        elif key == "flow":
            order = np.argsort(np.asarray(flows.data["flow"], dtype=object), kind="stable")
        else:
            values = np.nan_to_num(np.asarray(flows.data[key], dtype=np.float64), nan=-1.0)
            order = np.argsort(-values, kind="stable")
        if self.only is not None:
            names = flows.data["flow"]
            order = np.array([i for i in order.tolist() if names[i] in self.only], dtype=np.int64)
        return np.asarray(order, np.int64)

    def _refill(self) -> None:
        """The order (numpy over every flow) and the columns that fit; lines are drawn lazily."""
        flows = self._flows
        if flows is None:
            return
        order = self._order(flows)
        sample = order[:SAMPLE_ROWS].tolist()
        texts = {c: [cell(flows, c, r) for r in sample] + widest(flows, c) for c in PRIORITY}
        sort = SORTS[self.sort]
        columns = fitting(texts, self.size.width or 80, sort)
        heads = [head(c) + (" ▼" if c == sort else "") for c in columns]
        widths = tuple(max([len(h)] + [len(t) for t in texts[c]]) + 2 for c, h in zip(columns, heads))
        self.query_one("#qps-header", Static).update(Text(aligned(heads, columns, widths), style="bold"))
        self.query_one(QpList).show(flows, order, columns, widths)
        self._status(len(flows), len(order))

    def _status(self, total: int, matching: int) -> None:
        what = plural(total, "flow") if self.only is None else f"{count(matching)} of {plural(total, 'flow')} (c: all)"
        self.query_one("#qp-status", Static).update(f"{what}; sorted by {SORTS[self.sort]} (s: next)")

    def on_virtual_list_selected(self, event: QpList.Selected) -> None:
        if event.row is not None:
            self.app.open_qp(int(event.row))


def fitting(texts: dict, width: int, sort: str) -> tuple:
    """PRIORITY columns, in order, while their widths fit (the sort column always)."""
    out, used = [], 0
    for c in sorted(PRIORITY, key=lambda c: c not in ("flow", sort)):
        name = len(head(c)) + (2 if c == sort else 0)
        w = max([name] + [len(t) for t in texts[c]]) + 2    # the gap between columns
        if used + w > width - 2 and out:
            break
        out.append(c)
        used += w
    return tuple(sorted(out, key=PRIORITY.index))
