"""Screen 4, PFC: per (source MAC, priority) the share of the capture paused, the time paused,
the longest pause (under the report's names, in its number style: tui/text.py), and the PFC
timeline: per pausing (source MAC, priority) the share of time paused over the capture, with
the CE marks and the retransmissions of all RoCE traffic on the same axis (tui/pfc_timeline.py)."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from roceview.tui.base import RoceScreen
from roceview.tui.pfc_timeline import timeline_text
from roceview.tui.text import cell_text, head, right
from roceview.units import plural

NUMBERS = ("paused_us", "longest_pause_us", "pause_frames", "resume_frames")   # after 'paused %'


class PfcScreen(RoceScreen):
    MODE = "pfc"
    TITLE_TEXT = "4 PFC"

    def body(self) -> ComposeResult:
        yield Static("", id="pfc-status")
        yield DataTable(cursor_type="row", id="pfc")
        yield Static("", id="pfc-timeline")

    def on_mount(self) -> None:
        self.query_one("#pfc", DataTable).add_columns(head("src_mac"), head("priority"), right("paused %"),
                                                      *(right(head(c)) for c in NUMBERS))

    def show(self, snapshot) -> None:
        result = snapshot.result
        pfc = result.pfc_table
        span = max(int(result.summary.get("duration_ns", 0)), 1)
        table = self.query_one("#pfc", DataTable)
        table.clear()
        d = pfc.data
        share = np.asarray(d["paused_us"], dtype=float) * 1000.0 / span * 100.0
        order = np.argsort(-share, kind="stable")
        for i in order.tolist():
            table.add_row(d["src_mac"][i], d["priority"][i], right(f"{min(share[i], 100.0):.1f}"),
                          *(right(cell_text(c, d[c][i])) for c in NUMBERS))
        self.query_one("#pfc-status", Static).update(
            f"{plural(len(pfc), '(source MAC, priority) pair')} sent PAUSE/PFC frames" if len(pfc)
            else "no PAUSE or PFC frames in this capture")
        if self.due(snapshot):
            self.query_one("#pfc-timeline", Static).update(self._timeline(result))

    def on_resize(self, event: events.Resize) -> None:
        """The timeline again for the new width (a stale Resize is dropped: RoceScreen's)."""
        super().on_resize(event)
        if event.size == self.app.size and self.app.snapshot is not None:
            self.query_one("#pfc-timeline", Static).update(self._timeline(self.app.snapshot.result))

    def _timeline(self, result) -> Text:
        """The diagnoser's PFC timeline over the screen's width (tui/pfc_timeline.py). A
        snapshot the diagnoser has not seen (it runs every few seconds while loading) keeps the
        last one it made."""
        table = getattr(result, "pfc_timeline_table", None)
        if table is not None:
            self._pfc_timeline = table
        width = max((self.size.width or 80) - 2, 20)
        return timeline_text(result, getattr(self, "_pfc_timeline", None), width, self._timeline_rows(len(result.pfc_table)))

    def _timeline_rows(self, pairs: int) -> int:
        """(source MAC, priority) rows that fit under the table: the screen's height less the
        title, status, table (at most half the screen), heading, marks, axis and footer."""
        height = self.size.height or 24
        return max(1, height - 8 - min(pairs + 1, height // 2))
