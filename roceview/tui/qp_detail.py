"""QP detail (2 → Enter): its counters in both directions (under the Queue pairs screen's names,
in its number style: tui/text.py), a PSN-vs-time ladder, its rate plot over the timeline with a
mark at each CNP it received and its CE marks, and its DCQCN reaction numbers (tui/rate_plot.py),
its events, its operations (tui/qp_ops.py); `p` lists its packets."""
from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from roceview.render.report import capture_span, relative
from roceview.tui import ladder
from roceview.tui.base import RoceScreen
from roceview.tui.qp_ops import QpOperations
from roceview.tui.rate_plot import rate_text
from roceview.tui.text import cell_text, head, right

COUNTERS = ("packets", "bytes", "data_packets", "acks", "naks_seq", "naks_rnr", "naks_other", "gap_events",
            "gap_psns", "unrecovered_psns", "retransmitted_packets", "ecn_ce", "cnp_packets",
            "rtt_p50_us", "rtt_p99_us", "goodput_gbps")
EVENT_MARKS = {"gap": "G", "retransmit": "R", "timeout_retransmit": "R", "nak_seq": "N", "nak_rnr": "N",
               "nak_other": "N", "cnp": "P", "ecn_ce": "c"}
MAX_EVENTS = 500


def peer_row(flows, row: int) -> int | None:
    """The flow of the other direction: its destination QP is our peer QP, endpoints swapped."""
    d = flows.data
    peer = int(d["peer_qp"][row])
    if peer < 0:
        return None
    src, dst = d["src_ip"][row], d["dst_ip"][row]
    for i in np.flatnonzero(np.asarray(d["dest_qp"]) == peer).tolist():
        if d["src_ip"][i] == dst and d["dst_ip"][i] == src:
            return i
    return None


class QpDetailScreen(RoceScreen):
    TITLE_TEXT = "2 Queue pairs › QP detail (Esc: back)"
    BINDINGS = [Binding("p", "packets", "Its packets")]

    def __init__(self, flow_row: int):
        super().__init__()
        self.flow_row = flow_row
        self.peer: int | None = None
        self._ladder_key = None
        # built here, not in body(): a handler (on_mount, show) can never miss them. Closed
        # faster than it composed (Enter then Esc), the screen's children were pruned before
        # they mounted and on_mount's query found no '#qp-counters' (NoMatches, exit 1)
        self.title_view = Static("", id="qp-title")
        self.ladder_view = Static("", id="qp-ladder")
        self.counter_table = DataTable(cursor_type="row", id="qp-counters")
        self.counter_table.add_columns("counter", right("→ this"), right("← peer"))
        self.event_table = DataTable(cursor_type="row", id="qp-events")
        self.event_table.add_columns("frame", "time", "dir", "kind", "psn", "detail")
        self._event_frames: list[int] = []      # the frame of each events row: Enter jumps to it
        self.rate_view = Static("", id="qp-rate")
        self.ops_view = QpOperations(id="qp-ops")

    def body(self) -> ComposeResult:
        with VerticalScroll(id="qp-body"):
            yield self.title_view
            yield self.ladder_view
            yield Static(ladder.legend(), id="qp-legend")
            with Horizontal(id="qp-top"):
                yield self.counter_table
                with Vertical(id="qp-sparks"):
                    yield self.rate_view
            yield self.event_table
            yield self.ops_view

    def show(self, snapshot) -> None:
        flows = snapshot.result.flows_table
        if self.flow_row >= len(flows):
            return
        self.peer = peer_row(flows, self.flow_row)
        name = flows.data["flow"][self.flow_row]
        peer = flows.data["flow"][self.peer] if self.peer is not None else "(no peer seen)"
        self.title_view.update(f"[b]QP {name}[/b]  peer {peer}")
        self._counters(flows)
        if not self.due(snapshot):
            return
        self._rate(snapshot.result)
        events = self._events(snapshot.result.events_table, flows)
        span = self._span()
        self.ops_view.show(snapshot.result, self._names(flows), span[0] if span else None)
        key = (snapshot.packets, self.size.width)
        if key != self._ladder_key:          # the ladder decodes packets: only when they changed
            self._ladder_key = key
            self._ladder(events)

    def _counters(self, flows) -> None:
        table = self.counter_table
        table.clear()
        for c in COUNTERS:
            values = flows.data[c]
            table.add_row(head(c), *(right(cell_text(c, values[r]) if r is not None else "")
                                     for r in (self.flow_row, self.peer)))

    def _rate(self, result) -> None:
        """The rate plot beside the counters: the screen's width less theirs (44), the panel's
        padding and a scrollbar's column."""
        width = max((self.size.width or 80) - 44 - 4, 24)
        rows = [self.flow_row] + ([self.peer] if self.peer is not None else [])
        self.rate_view.update(rate_text(result, rows, width))

    def _names(self, flows) -> dict:
        out = {flows.data["flow"][self.flow_row]: "→"}
        if self.peer is not None:
            out[flows.data["flow"][self.peer]] = "←"
        return out

    def _events(self, events, flows) -> list[tuple]:
        names = self._names(flows)
        picked = [i for i, f in enumerate(events.data["flow"]) if f in names]
        table = self.event_table
        table.clear()
        span = self._span()
        ts = [relative(int(t) - span[0]) if span else str(t) for t in np.asarray(events.data["ts"])[picked].tolist()]
        out, self._event_frames = [], []
        for k, i in enumerate(picked):
            kind, psn = events.data["kind"][i], int(events.data["psn"][i])
            out.append((kind, int(events.data["ts"][i]), psn))
            if k < MAX_EVENTS:
                frame = int(events.data["frame"][i])
                self._event_frames.append(frame)
                table.add_row(f"{frame:>7}", ts[k], names[events.data["flow"][i]], kind, "" if psn < 0 else str(psn),
                              events.data["detail"][i])
        return out

    def _span(self) -> tuple[int, int] | None:
        """The capture's first and last packet (ns): times are shown as seconds since the first
        packet, as Packets (-t r) and the report's "when" show them."""
        return capture_span(self.app.snapshot.result.summary) if self.app.snapshot is not None else None

    def on_data_table_row_selected(self, event) -> None:
        """Enter on an event: the packet list, all packets, the cursor on the event's frame."""
        if event.data_table is not self.event_table or not 0 <= event.cursor_row < len(self._event_frames):
            return
        self.app.show_packets(None, f"at frame {self._event_frames[event.cursor_row]}",
                              self._event_frames[event.cursor_row] - 1)

    def _ladder(self, events: list[tuple]) -> None:
        index = self.app.index
        fids = [self.flow_row] + ([self.peer] if self.peer is not None else [])
        rows = index.flow_rows(fids)
        if len(rows) > ladder.LADDER_MAX:
            rows = rows[np.linspace(0, len(rows) - 1, ladder.LADDER_MAX).astype(np.int64)]
        layers = {}
        if len(rows):
            batch = index.decode(rows)
            mine = index.flow.a[rows] == self.flow_row
            psn = batch.cols["psn"].astype(np.int64)
            ts = batch.cols["ts_ns"]
            layers["·"] = (ts[mine], ladder.unwrap_psn(psn[mine]))
            layers["∘"] = (ts[~mine], ladder.unwrap_psn(psn[~mine]))
        for mark in set(EVENT_MARKS.values()):
            hits = [(t, p) for kind, t, p in events if EVENT_MARKS.get(kind) == mark and p >= 0]
            if hits:
                t, p = zip(*hits)
                layers[mark] = (np.array(t), ladder.unwrap_psn(np.array(p)))
        width = max((self.size.width or 80) - 4, 20)
        text = "\n".join(ladder.draw(layers, width, 10))
        self.ladder_view.update(text)

    def action_packets(self) -> None:
        fids = [self.flow_row] + ([self.peer] if self.peer is not None else [])
        label = "packets of this QP" + (" and its peer" if self.peer is not None else "")
        self.app.show_packets(self.app.index.flow_rows(fids), label)
