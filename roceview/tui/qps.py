"""Screen 2, Queue pairs: the qps.csv columns that fit the width, worst first; `s` cycles the
sort column; Enter opens the QP detail. Refilled from each snapshot (the worst MAX_ROWS shown)."""
from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from roceview.analysis.tables import DECIMALS, KINDS, slow_text
from roceview.tui.base import RoceScreen

MAX_ROWS = 2000                   # a DataTable builds every row: the worst 2,000 of 100 k QPs
# qps.csv columns by what a triage reads first; as many as fit are shown, in this order
PRIORITY = ("flow", "packets", "gap_psns", "unrecovered_psns", "retransmitted_packets", "naks_seq",
            "naks_rnr", "ecn_ce", "cnp_packets", "goodput_gbps", "rtt_p99_us", "bytes", "transport",
            "peer_qp", "naks_other", "gap_events", "rtt_p50_us", "data_packets", "acks", "payload_bytes",
            "retransmitted_bytes", "ecn_not_ect", "src_ip", "dst_ip", "dest_qp", "first_ts", "last_ts")
SORTS = ("worst", "packets", "bytes", "gap_psns", "retransmitted_packets", "naks_seq", "ecn_ce",
         "cnp_packets", "goodput_gbps", "rtt_p99_us", "flow")
SHORT = {"retransmitted_packets": "retx", "unrecovered_psns": "unrecov", "gap_psns": "gap_psn",
         "goodput_gbps": "Gb/s", "rtt_p99_us": "rtt99us", "rtt_p50_us": "rtt50us", "cnp_packets": "cnp",
         "naks_seq": "nak_seq", "naks_rnr": "nak_rnr", "naks_other": "nak_oth"}


class QueuePairsScreen(RoceScreen):
    MODE = "qps"
    TITLE_TEXT = "2 Queue pairs"
    BINDINGS = [Binding("s", "sort", "Sort"), Binding("c", "clear_restriction", "All QPs", show=False)]

    def body(self) -> ComposeResult:
        yield Static("", id="qp-status")
        yield DataTable(cursor_type="row", id="qps")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sort = 0
        self.only: set[str] | None = None
        self._rows = np.zeros(0, np.int64)
        self._columns: tuple = ()
        self._flows = None

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
        return order

    def _refill(self) -> None:
        flows = self._flows
        if flows is None:
            return
        order = self._order(flows)
        shown = order[:MAX_ROWS]
        table = self.query_one("#qps", DataTable)
        texts = {c: slow_text([flows.data[c][i] for i in shown.tolist()] if KINDS.get(c) == "str"
                              else np.asarray(flows.data[c])[shown], KINDS.get(c, "int"), DECIMALS.get(c, 6))
                 for c in PRIORITY}
        columns = fitting(texts, self.size.width or 80, SORTS[self.sort])
        selected = self._rows[table.cursor_row] if 0 <= table.cursor_row < len(self._rows) else None
        if columns != self._columns:
            table.clear(columns=True)
            for c in columns:
                table.add_column(SHORT.get(c, c) + (" ▼" if c == SORTS[self.sort] else ""), key=c)
            self._columns = columns
        else:
            table.clear()
        table.add_rows(list(zip(*(texts[c] for c in columns))))
        self._rows = shown
        self._status(len(flows), len(order))
        if selected is not None and len(np.flatnonzero(shown == selected)):
            table.move_cursor(row=int(np.flatnonzero(shown == selected)[0]), animate=False)

    def _status(self, total: int, matching: int) -> None:
        what = f"{total:,} flows" if self.only is None else f"{matching:,} of {total:,} flows (c: all)"
        more = f", the first {MAX_ROWS:,} shown" if matching > MAX_ROWS else ""
        self.query_one("#qp-status", Static).update(f"{what}{more}; sorted by {SORTS[self.sort]} (s: next)")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self._rows):
            self.app.open_qp(int(self._rows[event.cursor_row]))


def fitting(texts: dict, width: int, sort: str) -> tuple:
    """PRIORITY columns, in order, while their widths fit (the sort column always)."""
    out, used = [], 0
    for c in sorted(PRIORITY, key=lambda c: c not in ("flow", sort)):
        head = len(SHORT.get(c, c)) + (2 if c == sort else 0)
        w = max([head] + [len(t) for t in texts[c][:200]]) + 2    # the cell padding
        if used + w > width - 2 and out:
            break
        out.append(c)
        used += w
    return tuple(sorted(out, key=PRIORITY.index))
