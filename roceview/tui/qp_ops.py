"""QP detail's Operations part: the RDMA messages of a queue pair (→, its own requests) and of
its peer (←), as the analysis gives them: per operation kind the count, latency p50 / p99 / max
and the message sizes (op_stats, the report's Operations section), then the operations one a
line (ops.csv), in first-frame order. Enter on one opens Packets on its first frame, `c` on the
frame that completed it.

The list is a virtual list (tui/virtual.py): only the lines on screen are written, so every
operation ops.csv lists for the QP is there (a DataTable measured every cell it was given:
2,000 operations took seconds to open). When ops.csv itself stopped listing (its row budget,
docs/columns.md), a line says so. Nothing here computes a statistic: the numbers are
op_stats' and ops.csv's, written in the report's number style."""
from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from roceview.analysis.ops_stats import SIZE_COLUMNS, SIZE_LABELS
from roceview.analysis.tables import Coded
from roceview.render.report import relative
from roceview.tui.guard import Guarded
from roceview.tui.text import cell_text, right
from roceview.tui.virtual import VirtualList
from roceview.units import count

STAT_COLUMNS = ("latency_p50_us", "latency_p99_us", "latency_max_us")
# the list's columns: (head, alignment, least width: the widest value any row can have)
LIST_COLUMNS = (("frame", ">", 0), ("dir", "<", 1), ("op", "<", len("ATOMIC_WRITE")), ("first PSN", ">", 8),
                ("pkts", ">", 0), ("bytes", ">", 0), ("start", ">", 0), ("latency", ">", len("999.999 us")),
                ("retx", "<", 3), ("outst", ">", 0), ("completion", ">", 0))
SHOWN_LINES = 10         # operations on screen at once (the detail scrolls to them)


def rows_of(column, names) -> np.ndarray:
    """The rows of a flow column (a list or a Coded column) naming one of `names`, in order."""
    coded = Coded.of(column)
    wanted = np.flatnonzero(np.fromiter((n in names for n in coded.names), bool, len(coded.names)))
    return np.flatnonzero(np.isin(coded.codes, wanted))


class OpsList(Guarded, VirtualList):
    """The operations, one a line: `rows` are ops table rows, written when drawn."""

    HEADER_ROWS = 1
    BINDINGS = [Binding("c", "completion", "Its completion frame", show=False)]   # (not to push q Quit off)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.data: dict = {}
        self.marks: dict = {}
        self.first_ts: int | None = None
        self.widths = [max(len(h), least) for h, _, least in LIST_COLUMNS]

    def set_ops(self, data: dict, rows: np.ndarray, marks: dict, first_ts: int | None) -> None:
        """List these rows of the ops table (`data`: its columns); `marks`: flow -> '→' / '←'.
        The cursor stays on its operation when that is still listed."""
        old = self.current_row()
        self.data, self.rows, self.marks, self.first_ts = data, rows, marks, first_ts
        self.widths = self._widths()
        at = np.flatnonzero(rows == old) if old is not None else ()
        self.cursor = int(at[0]) if len(at) else min(self.cursor, max(len(rows) - 1, 0))
        self.styles.height = min(max(len(rows), 1), SHOWN_LINES) + self.HEADER_ROWS + 1   # + a scrollbar
        self.resized()
        self.refresh()

    def _widths(self) -> list[int]:
        """Each column as wide as its widest value (from the largest numbers: a count's text
        grows with it) or its head, so no column moves while scrolling."""
        d, rows = self.data, self.rows
        if not len(rows):
            return [max(len(h), least) for h, _, least in LIST_COLUMNS]
        top = {c: int(np.asarray(d[c])[rows].max()) for c in ("first_frame", "completion_frame", "packets",
                                                              "bytes", "outstanding", "start_ts")}
        frame = len(str(max(top["first_frame"], top["completion_frame"])))
        start = len(self._start(top["start_ts"]))
        values = (frame, 0, 0, 0, len(count(top["packets"])), len(count(top["bytes"])), start, 0, 0,
                  len(count(top["outstanding"])), frame)
        return [max(len(h), least, v) for (h, _, least), v in zip(LIST_COLUMNS, values)]

    def _start(self, ts: int) -> str:
        return relative(ts - self.first_ts) if self.first_ts is not None else str(ts)

    def cells(self, i: int) -> list[str]:
        """The i-th listed operation's values, as the columns show them."""
        d, r = self.data, int(self.rows[i])
        done = int(d["completion_frame"][r])
        return [str(int(d["first_frame"][r])), self.marks.get(d["flow"][r], ""), d["op"][r],
                str(int(d["first_psn"][r])), cell_text("packets", d["packets"][r]), cell_text("bytes", d["bytes"][r]),
                self._start(int(d["start_ts"][r])), cell_text("latency_us", d["latency_us"][r]),
                "yes" if d["retransmitted"][r] else "", cell_text("outstanding", d["outstanding"][r]),
                str(done) if done > 0 else ""]

    def _join(self, values) -> str:
        return " " + "  ".join(v.rjust(w) if align == ">" else v.ljust(w)
                               for v, w, (_, align, _) in zip(values, self.widths, LIST_COLUMNS))

    def line(self, i: int) -> str:
        return self._join(self.cells(i))

    def header(self) -> str:
        return self._join([h for h, _, _ in LIST_COLUMNS])

    def wide(self) -> int:
        """The lines' width, and the vertical scrollbar's: scrolled sideways, the last column shows whole."""
        return len(self.header()) + self.styles.scrollbar_size_vertical

    def frame(self, column: str) -> int:
        """The frame in `column` (first_frame, completion_frame) of the operation under the cursor; -1: none."""
        row = self.current_row()
        return -1 if row is None else int(self.data[column][int(row)])

    def action_completion(self) -> None:
        """c: Packets on the frame that completed the operation under the cursor."""
        if self.current_row() is None:
            return
        frame = self.frame("completion_frame")
        if frame <= 0:
            self.notify("no completion captured for this operation (no response covering it was seen)")
            return
        self.app.show_packets(None, f"at frame {frame}", frame - 1)


class QpOperations(Guarded, Vertical):
    """The Operations part of QP detail; `show` renders a result for a QP and its peer."""

    DEFAULT_CSS = """
    QpOperations { height: auto; }
    QpOperations > Static { height: auto; padding: 0 1; }
    QpOperations #qp-op-stats { height: auto; max-height: 10; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # built here, not in compose (as QpDetailScreen's own): a show() before mounting finds them
        self.head = Static("[b]Operations[/b]  → this QP's requests, ← its peer's; latency from the first "
                           "packet to the completion seen. Enter: Packets at its first frame, c: at its "
                           "completion", id="qp-ops-head")
        self.stats = DataTable(cursor_type="row", id="qp-op-stats")
        self.stats.add_columns("dir", "op", right("ops"), right("p50"), right("p99"), right("max"), "sizes (bytes)")
        self.list = OpsList(id="qp-ops-list")
        self.note = Static("", id="qp-ops-note")
        self._key = None

    def compose(self) -> ComposeResult:
        yield self.head
        yield self.stats
        yield self.list
        yield self.note

    def show(self, result, names: dict, first_ts: int | None) -> None:
        """`names`: flow name -> its direction mark ('→' this QP, '←' its peer); `first_ts`: the
        capture's first packet (ns), the origin of the start column."""
        ops = result.ops_table
        key = (id(ops), len(ops), tuple(names), first_ts, str(result.summary.get("operations")))
        if key == self._key:
            return
        self._key = key
        self._stats(getattr(result, "op_stats_table", None), names)
        rows = rows_of(ops.data["flow"], names) if len(ops) else np.zeros(0, np.int64)
        self.list.set_ops(ops.data, rows, names, first_ts)
        self._note(len(rows), result.summary.get("operations") or {})

    def _stats(self, st, names: dict) -> None:
        table = self.stats
        table.clear()
        if st is None or not len(st):
            return
        d = st.data
        rows = rows_of(d["flow"], names)
        for name, mark in names.items():             # this QP's kinds first, then the peer's
            for i in (i for i in rows.tolist() if d["flow"][i] == name):
                sizes = ", ".join(f"{label} {count(d[c][i])}" for label, c in zip(SIZE_LABELS, SIZE_COLUMNS)
                                  if int(d[c][i]))
                table.add_row(mark, d["op"][i], right(count(d["operations"][i])),
                              *(right(cell_text(c, d[c][i])) for c in STAT_COLUMNS), sizes)

    def _note(self, listed: int, info: dict) -> None:
        lines = []
        if listed == 0:
            lines.append("no operations of this QP or its peer listed")
        if info.get("not_listed"):
            lines.append(f"ops.csv lists the capture's first {count(info.get('listed', 0))} operations; "
                         f"{count(info['not_listed'])} later ones are not listed here either (the statistics "
                         "above count them)")
        self.note.update("\n".join(lines))
        self.note.display = bool(lines)

    def on_virtual_list_selected(self, event: VirtualList.Selected) -> None:
        """Enter on an operation: Packets, all packets, the cursor on its first frame."""
        if event.source is not self.list:
            return
        event.stop()
        frame = self.list.frame("first_frame")
        if frame > 0:
            self.app.show_packets(None, f"at frame {frame}", frame - 1)
