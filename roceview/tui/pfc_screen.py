"""Screen 4, PFC: per (source MAC, priority) the share of the capture paused, the time paused,
the longest pause (under the report's names, in its number style: tui/text.py), and a pause
timeline (pause frames over the capture, from the events table)."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from roceview.tui.base import RoceScreen
from roceview.tui.text import bars, binned, cell_text, head, right
from roceview.units import plural

TIMELINE_ROWS = 8
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

    def _timeline(self, result) -> Text:
        """One row per source MAC: its pause frames binned over the capture."""
        ev = result.events_table
        kinds = ev.data["kind"]
        rows = [i for i, k in enumerate(kinds) if k == "pfc_pause"]
        out = Text("pause timeline (pause frames over the capture)\n", style="bold")
        if not rows:
            return out
        first = result.summary.get("first_ts")
        start = int(round(float(first) * 1e9)) if first else int(np.asarray(ev.data["ts"])[rows].min())
        end = start + max(int(result.summary.get("duration_ns", 0)), 1)
        ts = np.asarray(ev.data["ts"])[rows]
        macs = [ev.data["flow"][i] for i in rows]
        width = max((self.size.width or 80) - 20, 10)
        for mac in list(dict.fromkeys(macs))[:TIMELINE_ROWS]:
            mine = np.array([m == mac for m in macs])
            out.append(f"{mac} ")
            out.append(bars(binned(ts[mine], np.ones(int(mine.sum())), start, end, width), width), style="red")
            out.append("\n")
        return out
