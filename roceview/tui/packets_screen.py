"""Screen 3, Packets: the virtual packet list (`dissect`'s lines, the analysis flags' tags at
the front of Info), the detail tree of the selected packet (`dissect -V`'s with its Analysis
subtree, scapy's for non-RoCE frames) and its hex bytes. A display filter is applied by
scanning the listed rows on a worker thread, block by block (each decoded again, with its
flags: `roceview.retransmission` works; masked, dropped), so it never holds the packets table."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static, Tree

from roceview.tui.base import RoceScreen
from roceview.tui.index import RowRange, position
from roceview.tui.packet_list import HEADER, PacketList
from roceview.tui.text import hexdump
from roceview.tui.detail_tree import analysis_nodes, nodes_for

SCAN_BLOCK = 1 << 16


class PacketsScreen(RoceScreen):
    MODE = "packets"
    TITLE_TEXT = "3 Packets"
    BINDINGS = [Binding("c", "clear", "All packets"), Binding("tab", "focus_next", "Tree/list", show=False),
                Binding("T", "time_format", "Time format", show=False),
                Binding("U", "seconds_format", "Seconds / h m s", show=False)]

    def body(self) -> ComposeResult:
        yield Static("", id="packets-status")
        yield Static(HEADER, id="packets-header")
        yield PacketList(self.app.index, id="packet-list")
        with Horizontal(id="packet-detail"):
            yield Tree("no packet selected", id="packet-tree")
            yield Static("", id="packet-hex")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base_rows = None            # None: every row the index can show
        self.label = ""
        self.filtered: np.ndarray | None = None
        self.scanning = False
        self._scan_generation = 0
        self._scanned_to = 0             # with a filter on every row: rows below were scanned

    @property
    def plist(self) -> PacketList:
        return self.query_one(PacketList)

    def on_mount(self) -> None:
        self.plist.gbps = self.app.loader.options.link_speed
        options = self.app.loader.options
        self.plist.time_format, self.plist.hms = options.time_format, options.hms

    def action_time_format(self) -> None:
        """T: the next of tshark's -t formats (relative, absolute, with date, ..., UTC with date)."""
        from roceview.packets.times import FORMATS

        fmt = FORMATS[(FORMATS.index(self.plist.time_format) + 1) % len(FORMATS)]
        self.plist.set_time_format(fmt, self.plist.hms)
        self._time_changed()

    def action_seconds_format(self) -> None:
        """U: relative and delta times in seconds, or in hours, minutes and seconds (tshark's -u)."""
        self.plist.set_time_format(self.plist.time_format, not self.plist.hms)
        self._time_changed()

    def _time_changed(self) -> None:
        self._status()
        row = self.plist.current_row()
        if row is not None:                # the tree's title line shows the time too
            self.post_message(PacketList.Moved(self.plist, row))

    def restrict(self, rows, label: str, at_row: int | None = None) -> None:
        self.base_rows, self.label = (None if rows is None else np.asarray(rows, np.int64)), label
        self.filter_changed(at_row)

    def action_clear(self) -> None:
        self.app.filter_text, self.app.display_filter = "", None
        self.restrict(None, "")

    def filter_changed(self, at_row: int | None = None) -> None:
        self.filtered = None
        self._scan_generation += 1
        self.scanning = False
        if self.app.display_filter is not None:
            self.plist.set_rows(np.zeros(0, np.int64), keep_cursor=False)
            rows = self._base()
            if self.base_rows is None:   # while loading: the analyzed rows now, the rest as they come
                self._scanned_to = self.app.index.flagged
                rows = _upto(rows, self._scanned_to)
            self._start_scan(rows, None)
        else:
            self.plist.set_rows(self._base(), keep_cursor=at_row is None)
            if at_row is not None:
                self.plist.goto(at_row)
        self._status()
        self.plist.focus()

    def _base(self) -> np.ndarray:
        return self.app.index.visible_rows() if self.base_rows is None else self.base_rows

    def show(self, snapshot) -> None:
        index = self.app.index
        if self.plist.first_ts is None and (index.ts.n or index.ring):
            self.plist.first_ts = int(index.ts.a[0]) if index.ts.n else int(index.ring[0][2].cols["ts_ns"][0])
        self.plist.flags_arrived()
        self._scan_new_rows()
        if self.base_rows is None and self.app.display_filter is None:
            rows = index.visible_rows()
            if index.ring:
                self.plist.set_rows(rows)
            elif len(rows) != len(self.plist.rows):
                self.plist.grow(rows)
        self._status()

    def _status(self) -> None:
        index, plist = self.app.index, self.plist
        parts = [f"{len(plist.rows):,} packets listed"]
        if self.label:
            parts.append(self.label)
        if (plist.time_format, plist.hms) != ("r", False):
            from roceview.packets.times import FORMAT_NAMES

            parts.append(f"time: {FORMAT_NAMES[plist.time_format]}" + (", h m s" if plist.hms else ""))
        if self.app.filter_text:
            parts.append(f"filter: {self.app.filter_text}" + (" (scanning…)" if self.scanning else ""))
        if index.ring:
            parts.append(f"a stream: the most recent {len(index.visible_rows()):,} of "
                         f"{index.rows:,} packets are kept")
        self.query_one("#packets-status", Static).update(Text("; ".join(parts)))

    def _scan_new_rows(self) -> None:
        """A filter over every row, set while loading: scan the rows analyzed since (their
        flags known), after what was found. Without this the list kept the rows of the moment
        the filter was set, and rows not yet analyzed were judged as having no flags."""
        index = self.app.index
        if self.app.display_filter is None or self.base_rows is not None or self.scanning \
                or index.flagged <= self._scanned_to:
            return
        visible = index.visible_rows()
        rows = RowRange(max(self._scanned_to, visible.first), min(index.flagged, visible.stop))
        self._scanned_to = index.flagged
        prior = self.filtered
        if prior is not None and index.ring:          # rows the ring has let go are not listed
            prior = prior[prior >= visible.first]
        self._start_scan(rows, prior)

    def _start_scan(self, rows, prior: np.ndarray | None) -> None:
        self.scanning = True             # till _found(done): one scan at a time
        self._scan(rows, self.app.display_filter, self._scan_generation, prior)

    @work(thread=True, exclusive=True, group="filter-scan")
    def _scan(self, rows: np.ndarray, display_filter, generation: int, prior: np.ndarray | None = None) -> None:
        """Decode the rows block by block on a thread, keep those the filter matches (after
        `prior`, the rows found before)."""
        from roceview.diagnose.evidence_frames import add_finding_kinds
        from roceview.packets.times import Clock, filter_mask

        found = [] if prior is None or not len(prior) else [prior]
        clock = Clock()                  # frame.time_delta_displayed: since the last row found
        kinds = self._finding_kinds(display_filter)
        if found:
            clock.shown = int(self.app.index.ts_of(found[-1][-1:])[0][0])
        try:
            for at in range(0, len(rows), SCAN_BLOCK):
                if generation != self._scan_generation:
                    return
                batch = self.app.index.decode(rows[at: at + SCAN_BLOCK])
                if batch.n:              # a stream's ring may have let some (or all) of them go
                    self._stamp(batch)
                    if kinds is not None:
                        add_finding_kinds(batch, *kinds)
                    mask = np.asarray(filter_mask(display_filter, batch, clock), dtype=bool)
                    if mask.any():
                        clock.shown = int(batch.cols["ts_ns"][np.flatnonzero(mask)[-1]])
                    found.append(batch.cols["frame"][mask] - 1)
                self.app.call_from_thread(self._found, _joined(found), generation, False)
        except Exception as exc:   # noqa: BLE001  a filter failing on data is shown, not raised
            self.app.call_from_thread(self.notify, f"filter stopped: {exc}", severity="error")
        self.app.call_from_thread(self._found, _joined(found), generation, True)

    def _finding_kinds(self, display_filter):
        """roceview.finding: the findings' evidence frames as the last snapshot has them (the
        findings of what is loaded so far); None when the filter does not name the field."""
        from roceview.packets.flags import FINDING_COLUMN

        snapshot = self.app.snapshot
        if FINDING_COLUMN not in getattr(display_filter, "fields", ()) or snapshot is None:
            return None
        from roceview.diagnose.evidence_frames import kinds_by_frame

        return kinds_by_frame(snapshot.result)

    def _stamp(self, batch) -> None:
        """The relative times a filter may read (packets/times.py Clock's columns): since the
        first packet, since the packet captured before."""
        from roceview.packets.times import DELTA, REL

        ts = batch.cols["ts_ns"].astype(np.int64)
        prev, known = self.app.index.ts_of(batch.cols["frame"] - 2)
        first = self.plist.first_ts if self.plist.first_ts is not None else int(ts[0])
        batch.cols[REL], batch.cols[DELTA] = ts - first, np.where(known, ts - prev, 0)

    def _found(self, rows: np.ndarray, generation: int, done: bool) -> None:
        if generation == self._scan_generation:
            self.scanning = not done
            self.filtered = rows
            self.plist.grow(rows) if len(self.plist.rows) else self.plist.set_rows(rows, keep_cursor=False)
            if done:                     # snapshots skipped while it ran (the final one too): their rows now
                self._scan_new_rows()
            self._status()

    def on_virtual_list_moved(self, event: PacketList.Moved) -> None:
        tree = self.query_one("#packet-tree", Tree)
        hex_view = self.query_one("#packet-hex", Static)
        tree.clear()
        if event.row is not None:
            event.row = int(event.row)
        if event.row is None:
            tree.root.set_label("no packet selected")
            hex_view.update("")
            return
        index = self.app.index
        batch = index.decode(np.array([event.row]))
        from roceview.render.lines import packet_lines
        from roceview.tui.packet_list import table

        df, gbps = table(batch), self.plist.gbps
        at = position(self.plist.rows, event.row) if len(self.plist.rows) else 0
        times = self.plist.times(batch, at) if batch.n else None
        line = packet_lines(df, self.plist.first_ts, gbps, times=times)[0] if batch.n else f"{event.row + 1}"
        tree.root.set_label(Text(f"Frame {line.strip()}"))        # dissect -V's root: tags at the end
        for label, children in nodes_for(index, event.row, _proto(batch)) + analysis_nodes(df, gbps):
            branch = tree.root.add(Text(label), expand=True)
            for child, _ in children:
                branch.add_leaf(Text(child))
        tree.root.expand()
        got = index.frame_bytes(event.row)
        hex_view.update(Text(hexdump(got[0]) if got else "(bytes not kept)"))


def _proto(batch) -> str:
    from roceview.packets.batch import PROTO_NAMES

    return PROTO_NAMES[int(batch.cols["_proto"][0])] if batch.n else "other"


def _joined(found: list) -> np.ndarray:
    return np.concatenate(found).astype(np.int64, copy=False) if found else np.zeros(0, np.int64)


def _upto(rows, stop: int):
    """The listed rows below `stop` (a RowRange stays one: no array of 10 M rows)."""
    if isinstance(rows, RowRange):
        return RowRange(rows.first, min(rows.stop, stop))
    return rows[: position(rows, stop)]
