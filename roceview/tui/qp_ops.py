"""QP detail's Operations part: the RDMA messages of a queue pair (→, its own requests) and of
its peer (←), as the analysis gives them: per operation kind the count, latency p50 / p99 / max
and the message sizes (op_stats, the report's Operations section), then the operations one a
row (ops.csv), in first-frame order. Enter on one opens Packets on its first frame, `c` on the
frame that completed it.

The list stops at MAX_OPS rows (a DataTable of tens of thousands of rows takes seconds to build,
and nobody scrolls it) and says how many it leaves out, and when ops.csv itself stopped listing
(its row budget, docs/columns.md). Nothing here computes a statistic: the numbers are op_stats'
and ops.csv's, written in the report's number style."""
from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from roceview.analysis.ops_stats import SIZE_COLUMNS, SIZE_EDGES
from roceview.analysis.tables import Coded
from roceview.render.report import relative
from roceview.tui.guard import Guarded
from roceview.tui.text import cell_text, right
from roceview.units import count

MAX_OPS = 2_000
STAT_COLUMNS = ("latency_p50_us", "latency_p99_us", "latency_max_us")
LIST_HEADS = ("frame", "dir", "op", "first PSN", "pkts", "bytes", "start", "latency", "retx", "outst", "completion")


def size_label(edge: int | None) -> str:
    """A size bucket's name as the report writes it: '<=1k' (at most 1,024 bytes), '>1M' for
    the last bucket (edge None: above the last edge)."""
    top = int(SIZE_EDGES[-1])
    value = top if edge is None else int(edge)
    for unit, scale in (("M", 1 << 20), ("k", 1 << 10), ("", 1)):
        if value % scale == 0:
            return f"{'>' if edge is None else '<='}{value // scale}{unit}"
    return str(value)


SIZE_LABELS = tuple(size_label(e) for e in SIZE_EDGES.tolist()) + (size_label(None),)


def rows_of(column, names) -> np.ndarray:
    """The rows of a flow column (a list or a Coded column) naming one of `names`, in order."""
    coded = Coded.of(column)
    wanted = np.flatnonzero(np.fromiter((n in names for n in coded.names), bool, len(coded.names)))
    return np.flatnonzero(np.isin(coded.codes, wanted))


class OpsList(Guarded, DataTable):
    """The operations, one a row; the frames of each row (first, completion) kept for the keys."""

    # not in the footer: at 80 columns it would push `q Quit` off (the heading and help say them)
    BINDINGS = [Binding("enter", "select_cursor", "Its first frame", show=False),
                Binding("c", "completion", "Its completion frame", show=False)]

    def __init__(self, **kwargs):
        super().__init__(cursor_type="row", **kwargs)
        self.add_columns(*LIST_HEADS)
        self.frames: list[tuple[int, int]] = []     # (first_frame, completion_frame or -1) per row

    def action_completion(self) -> None:
        """c: Packets on the frame that completed the operation under the cursor."""
        if not 0 <= self.cursor_row < len(self.frames):
            return
        frame = self.frames[self.cursor_row][1]
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
    QpOperations #qp-ops-list { height: auto; max-height: 12; }
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
        self._list(ops.data, rows[:MAX_OPS], names, first_ts)
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

    def _list(self, d, rows: np.ndarray, names: dict, first_ts: int | None) -> None:
        table = self.list
        table.clear()
        flow = [d["flow"][i] for i in rows.tolist()]
        first, done = np.asarray(d["first_frame"])[rows].tolist(), np.asarray(d["completion_frame"])[rows].tolist()
        start = np.asarray(d["start_ts"])[rows].tolist()
        table.frames = list(zip(first, done))
        for k, i in enumerate(rows.tolist()):
            when = relative(start[k] - first_ts) if first_ts is not None else str(start[k])
            table.add_row(right(str(first[k])), names[flow[k]], d["op"][i], right(str(int(d["first_psn"][i]))),
                          *(right(cell_text(c, d[c][i])) for c in ("packets", "bytes")), when,
                          right(cell_text("latency_us", d["latency_us"][i])),
                          "yes" if d["retransmitted"][i] else "", right(cell_text("outstanding", d["outstanding"][i])),
                          right(str(done[k]) if done[k] > 0 else ""))

    def _note(self, total: int, info: dict) -> None:
        lines = []
        if total == 0:
            lines.append("no operations of this QP or its peer")
        elif total > MAX_OPS:
            lines.append(f"{count(total - MAX_OPS)} more operations not shown (the first {count(MAX_OPS)} are; "
                         "`roceview analyze --csv DIR` writes them all to ops.csv)")
        if info.get("not_listed"):
            lines.append(f"ops.csv lists the capture's first {count(info.get('listed', 0))} operations; "
                         f"{count(info['not_listed'])} later ones are not listed here either (the statistics "
                         "above count them)")
        self.note.update("\n".join(lines))
        self.note.display = bool(lines)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on an operation: Packets, all packets, the cursor on its first frame."""
        if event.data_table is not self.list:
            return
        event.stop()
        if 0 <= event.cursor_row < len(self.list.frames):
            frame = self.list.frames[event.cursor_row][0]
            self.app.show_packets(None, f"at frame {frame}", frame - 1)
