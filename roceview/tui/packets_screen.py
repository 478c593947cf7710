"""Screen 3, Packets: the virtual packet list (termshark's columns; Info led by QP and PSN, then
the analysis flags' tags and the opcode), the detail tree of the selected packet (`dissect -V`'s
with its Analysis subtree, scapy's for non-RoCE frames) and its hex bytes. `r` goes to the
related frame (related_frame: the analysis columns' rel_frame either way, a NAK's
retransmission), `b` back through the jumps. A display filter is applied by
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
from roceview.tui.packet_list import PacketList
from roceview.tui.scan_columns import Operations, finding_kinds
from roceview.tui.text import hexdump
from roceview.tui.detail_tree import analysis_nodes, nodes_for

SCAN_BLOCK = 1 << 16


class PacketsScreen(RoceScreen):
    MODE = "packets"
    TITLE_TEXT = "3 Packets"
    BINDINGS = [Binding("c", "clear", "All packets"), Binding("tab", "focus_next", "Tree/list", show=False),
                Binding("T", "time_format", "Time format", show=False),
                Binding("U", "seconds_format", "Seconds / h m s", show=False),
                # Wireshark's "Go to linked packet", and back as a browser's (not in the footer:
                # at 80 columns it would push 'q Quit' off; help lists them)
                Binding("r", "related", "Related frame", show=False),
                Binding("b,backspace", "back_frame", "Back to the frame before", show=False)]

    def body(self) -> ComposeResult:
        yield Static("", id="packets-status")
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
        self._columns = Operations()        # roceview.op.*: the operations of the files, once
        self._scanned_to = 0             # with a filter on every row: rows below were scanned
        self._land_on: int | None = None  # the row a filter's scan puts the cursor on once listed

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

    def action_related(self) -> None:
        """r: the cursor to the frame related to this one (related_frame). One
        the list does not show (a filter, a QP's packets, a stream's ring let it go) is named
        in a notification and the cursor stays, as Wireshark's "isn't displayed": the filter
        the user set is not dropped behind their back; c lists all packets."""
        row = self.plist.current_row()
        if row is None:
            return
        found = related_frame(self.app.index, row)
        if found is None:
            self.notify(f"frame {row + 1}: no related frame known (a NAK, a retransmission, a response "
                        "closing an RTT sample, a CNP, or a frame one of them names, has one)")
            return
        target, what = found
        if not self.plist.listed(target):
            self.notify(f"frame {target + 1}, {what}, is not listed: {self._hidden_by()}", severity="warning")
            return
        self.plist.follow(target)
        self.notify(f"frame {target + 1}: {what} (b goes back to frame {row + 1})", timeout=4)

    def action_back_frame(self) -> None:
        """b, Backspace: the frame the last r left (each jump in turn)."""
        row = self.plist.back()
        if row is None:
            self.notify("no frame to go back to (r goes to a related frame first)")
        elif not self.plist.listed(row):
            self.notify(f"frame {row + 1} is not listed: {self._hidden_by()}", severity="warning")

    def _hidden_by(self) -> str:
        if self.app.filter_text:
            return f"the filter {self.app.filter_text!r} hides it; c lists all packets"
        if self.base_rows is not None:
            return f"the list shows {self.label or 'some packets'}; c lists all packets"
        return "a stream keeps only its most recent packets"

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
        self._land_on = at_row           # under a filter: once its scan lists that row
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
        kinds = finding_kinds(self.app, display_filter)
        if found:
            clock.shown = int(self.app.index.ts_of(found[-1][-1:])[0][0])
        try:
            operations = self._columns.operations(self.app, display_filter)
            for at in range(0, len(rows), SCAN_BLOCK):
                if generation != self._scan_generation:
                    return
                batch = self.app.index.decode(rows[at: at + SCAN_BLOCK])
                if batch.n:              # a stream's ring may have let some (or all) of them go
                    self._stamp(batch)
                    if kinds is not None:
                        add_finding_kinds(batch, *kinds)
                    if operations is not None:
                        operations.annotate(batch)
                    mask = np.asarray(filter_mask(display_filter, batch, clock), dtype=bool)
                    if mask.any():
                        clock.shown = int(batch.cols["ts_ns"][np.flatnonzero(mask)[-1]])
                    found.append(batch.cols["frame"][mask] - 1)
                self.app.call_from_thread(self._found, _joined(found), generation, False)
        except Exception as exc:   # noqa: BLE001  a filter failing on data is shown, not raised
            self.app.call_from_thread(self.notify, f"filter stopped: {exc}", severity="error")
        self.app.call_from_thread(self._found, _joined(found), generation, True)

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
            if self._land_on is not None and self.plist.listed(self._land_on):
                self.plist.goto(self._land_on)
                self._land_on = None
            elif done and self._land_on is not None:
                self.notify(f"frame {self._land_on + 1} is not listed: {self._hidden_by()}", severity="warning")
                self._land_on = None
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


RESEND_WINDOW = 1 << 16   # rows after a NAK searched for the retransmission it caused
RESEND_TRIES = 256        # retransmissions in them decoded at most
# what the related frame is to a packet whose own rel_frame names it (its first flag with one,
# render/flag_text's order), and to a packet another one names (by the other's flag)
NAMES = (("RETRANSMISSION", "the first send of this retransmission's PSN", "its retransmission"),
         ("NAK", "the frame that opened the gap this NAK reports", "the NAK of the gap it opened"),
         ("CNP", "the CE-marked frame this CNP answers", "the CNP answering it"),
         ("DUPLICATE", "the frame this copy repeats", "its duplicate copy"),
         ("RTT_ACK", "the request whose RTT sample this response closes", "the response closing its RTT sample"))


def related_frame(index, row: int) -> tuple[int, str] | None:
    """(index row, what it is to this one) of the frame related to index row `row`, from the
    analysis columns (packet_flags: rel_frame): a NAK -> the retransmission it caused, else the
    frame that opened its gap; a retransmission, a CNP, a response with an RTT sample -> the
    frame its rel_frame names; any other -> the first frame naming it (a request's response, a
    first send's retransmission). None: no relation known. A few rows decoded, at a key press."""
    from roceview.packets.flags import Flag

    batch = index.decode(np.array([row], np.int64))
    if not batch.n:
        return None
    flags = int(batch.cols["flags"][0])
    if flags & (Flag.NAK | Flag.RNR_NAK):
        resent = _resent_after(index, batch)
        if resent is not None:
            return resent, "the retransmission this NAK caused"
    if batch.valid["rel_frame"][0]:
        what = next((mine for name, mine, _ in NAMES if flags & Flag[name]), "the frame it names")
        return int(batch.cols["rel_frame"][0]) - 1, what
    naming = _naming(index, row + 1)
    if naming is None:
        return None
    other = int(index.decode(np.array([naming], np.int64)).cols["flags"][0])
    return naming, next((theirs for name, _, theirs in NAMES if other & Flag[name]), "a frame naming it")


def _resent_after(index, nak) -> int | None:
    """The first retransmission after a NAK of the PSN it asks for, sent the other way."""
    from roceview.packets.flags import Flag

    if not nak.mask("psn")[0]:
        return None
    first = int(nak.cols["frame"][0])                   # the NAK's row + 1
    rows = _flagged(index, first, first + RESEND_WINDOW, int(Flag.RETRANSMISSION))[:RESEND_TRIES]
    if not len(rows):
        return None
    got = index.decode(rows)
    ends = _ends(nak)
    same = got.cols["psn"] == nak.cols["psn"][0]
    hits = [i for i in np.flatnonzero(same & got.mask("psn")).tolist() if _ends(got, i) == ends[::-1]]
    return int(got.cols["frame"][hits[0]]) - 1 if hits else None


def _ends(batch, i: int = 0) -> tuple:
    """(source, destination) of a decoded row: its addresses, else its MACs."""
    if batch.mask("_src_addr")[i] and batch.mask("_dst_addr")[i]:
        return bytes(batch.cols["_src_addr"][i]), bytes(batch.cols["_dst_addr"][i])
    return int(batch.cols["_src_mac"][i]), int(batch.cols["_dst_mac"][i])


def _flagged(index, lo: int, hi: int, bits: int) -> np.ndarray:
    """Index rows lo..hi-1 with one of these flag bits (a file's flag store, a stream's ring)."""
    with index.lock:
        if not index.ring:
            flags = index.flag.a[lo: min(hi, index.flagged)]
            return np.flatnonzero(flags & bits).astype(np.int64) + lo
        found = []
        for first, _, batch in index.ring:
            flags = batch.cols.get("flags")
            a, b = max(lo, first), min(hi, first + batch.n)
            if flags is not None and a < b:
                found.append(np.flatnonzero(flags[a - first: b - first] & bits) + a)
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)


def _naming(index, frame: int) -> int | None:
    """The first index row whose rel_frame is this frame (the index keeps the rows with one)."""
    with index.lock:
        if not index.ring:
            hit = np.flatnonzero(index.xrel.view() == frame)
            return int(index.xrow.a[hit[0]]) if len(hit) else None
        for first, _, batch in index.ring:
            rel, valid = batch.cols.get("rel_frame"), batch.valid.get("rel_frame")
            if rel is not None and valid is not None:
                hit = np.flatnonzero(valid & (rel == frame))
                if len(hit):
                    return first + int(hit[0])
    return None


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
