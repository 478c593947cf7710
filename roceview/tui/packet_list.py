"""A virtual packet list: only the rows on screen are decoded (from the packet index, in blocks
of BLOCK rows, a few blocks cached) and drawn; 10 M rows scroll at once."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

from roceview.tui.index import RowRange, position
from roceview.tui.virtual import VirtualList

BLOCK = 128              # rows decoded together
CACHED_BLOCKS = 32
# termshark's columns before Info: (header, its short form for a narrow column, alignment)
COLUMNS = (("No.", "No.", ">"), ("Time", "Time", ">"), ("Source", "Src", "<"), ("Destination", "Dest", "<"),
           ("Protocol", "Proto", "<"), ("Length", "Len", ">"))
ROOM_FOR_INFO = 48       # columns Info keeps before the headers are spelled out in full
INFO_WIDE = 160          # columns of Info reachable by scrolling sideways
# a `dissect` line (render/lines.packet_lines): frame, time (tshark's `ad` has a space), source
# → destination, protocol, length, Info (addresses and protocol labels have no spaces)
DISSECT_LINE = re.compile(r"\s*(\S+)\s+(.*?)\s*(\S+) → (\S+)\s+(\S+)\s+(\S+)(?: +(.*))?$")
QP_PSN = re.compile(r"(\S+) (QP=\S+ PSN=\S+)(.*)$")        # a RoCE Info: the opcode, QP, PSN, the rest
# (the head's fields, Info, the tags' marks in Info: [(start, end, severity)]) of a listed row
Row = tuple


def table(batch):
    """The packets table of decoded rows, with the analysis columns the packet index adds."""
    from roceview.packets.table import to_dataframe

    if "flags" in batch.cols:
        from roceview.analysis.packet_flags import packet_columns

        return to_dataframe(batch, packet_columns())
    return to_dataframe(batch)


def summary_lines(batch, first_ts: int | None, gbps: float = 100.0, times=None) -> list[str]:
    """The list's lines of decoded rows, the columns as wide as these rows need."""
    rows = list_rows(batch, first_ts, gbps, times)
    widths = grown([0] * len(COLUMNS), rows)
    return [row_text(row, column_widths(widths)) for row in rows]


def list_rows(batch, first_ts: int | None, gbps: float = 100.0, times=None) -> list[Row]:
    """Each row's columns, from `dissect`'s line (render/lines.packet_lines: one house for the
    words and numbers); Info reordered so that QP and PSN lead it, then the flags' tags
    (render.flag_text.tags, where Wireshark shows its expert info), then the opcode and the
    rest: on an 80-column screen a RoCE row shows its QP, its PSN and the start of its first
    tag (coloured), else of its opcode. Info without a QP leads with the tags. `times`: the
    time column (packets/times.TimeColumn), else seconds since `first_ts` with the file's
    precision."""
    from roceview.render.flag_text import TAGGED, tag_text, tags
    from roceview.render.lines import packet_lines, packet_rows

    from roceview.packets.times import TimeColumn, digits_of

    df = table(batch)
    if times is None and batch.n:            # the DataFrame does not carry the file's precision
        ts = batch.cols["ts_ns"].astype(np.int64)
        times = TimeColumn(ts - (int(ts[0]) if first_ts is None else first_ts), digits_of(batch))
    lines = packet_lines(df, first_ts, gbps, times=times)
    tagged = set(np.flatnonzero(batch.cols["flags"] & TAGGED).tolist()) if "flags" in batch.cols else ()
    found = {i: (tag_text(row, quanta, gbps), tags(row, quanta, gbps))
             for i, (row, quanta) in enumerate(packet_rows(df) if tagged else ()) if i in tagged}
    return [split_row(line, *found.get(i, ("", ()))) for i, line in enumerate(lines)]


def split_row(line: str, tag_text: str = "", tags=()) -> Row:
    """A `dissect` line (ending in its tags' text, `tag_text`) as the list's columns, Info
    reordered (list_rows) and the tags' marks in it; a line not read as one is all Info."""
    if tag_text and line.endswith(" " + tag_text):
        line = line[: -len(tag_text) - 1]
    else:
        tag_text, tags = "", ()
    head = DISSECT_LINE.match(line)
    if head is None:
        return ("",) * len(COLUMNS), line.strip(), []
    info = (head.group(7) or "").strip()
    roce = QP_PSN.match(info)
    if roce:
        opcode, qp_psn, rest = roce.groups()
        at = len(qp_psn) + 1
        info = f"{qp_psn} " + (f"{tag_text} " if tag_text else "") + opcode + rest
    else:
        at = 0
        info = f"{tag_text} {info}".strip() if tag_text else info
    marks = []
    for text, severity in tags:            # tag_text's: "[text]" joined by spaces
        marks.append((at, at + len(text) + 2, severity))
        at += len(text) + 3
    return head.group(1, 2, 3, 4, 5, 6), info, marks


def grown(widths: list[int], rows: list[Row]) -> list[int]:
    """The columns' widths, each widened to the widest value of these rows."""
    for row in rows:
        widths = [max(w, len(v)) for w, v in zip(widths, row[0])]
    return widths


def column_widths(widths: list[int], room: int = 0) -> list[int]:
    """The values' widths widened to their headers: in full when `room` columns leave Info at
    least ROOM_FOR_INFO, else the short forms (Dest, Proto, Len: 80 columns show QP and PSN)."""
    full = [max(w, len(name)) for w, (name, _, _) in zip(widths, COLUMNS)]
    if sum(full) + len(full) + ROOM_FOR_INFO <= room:
        return full
    return [max(w, len(short)) for w, (_, short, _) in zip(widths, COLUMNS)]


def row_text(row: Row, widths: list[int]) -> str:
    cells = [v.rjust(w) if align == ">" else v.ljust(w) for v, w, (_, _, align) in zip(row[0], widths, COLUMNS)]
    return " ".join(cells) + " " + row[1]


def header_text(widths: list[int]) -> str:
    """The header over row_text's columns: each name in full where the column is that wide."""
    names = [name if len(name) <= w else short for w, (name, short, _) in zip(widths, COLUMNS)]
    return row_text((tuple(names), "Info"), widths)


def tags_first(line: str, tags: str) -> str:
    """A `dissect` line ending in its tags, with them at the start of its Info instead (the
    list's order before QP and PSN led Info)."""
    if not tags or not line.endswith(" " + tags):
        return line
    body = line[: -len(tags) - 1]
    head = DISSECT_LINE.match(body)
    if head is None:
        return line
    info = body[head.start(7) if head.group(7) else len(body):].strip()
    cut = head.start(7) - 1 if head.group(7) else len(body)
    return f"{body[:cut]} {tags}" + (f" {info}" if info else "")


def _listed_before(rows, at: int, n: int) -> np.ndarray:
    """The index row listed just before each of the n rows listed from position `at` (-1: none)."""
    return np.array([int(rows[p - 1]) if p > 0 else -1 for p in range(at, at + n)], np.int64)


def _rows(rows):
    return rows if isinstance(rows, RowRange) else np.asarray(rows, np.int64)


class PacketList(VirtualList):
    """The packet list: `rows` are index rows, their lines decoded in blocks when drawn; a
    header over the columns, each as wide as the widest value decoded so far (they only widen
    while the same rows are listed: no column moves under the eye while scrolling)."""
    HEADER_ROWS = 1
    COMPONENT_CLASSES = {"packet-list--error", "packet-list--warn", "packet-list--note"}
    DEFAULT_CSS = """
    PacketList > .packet-list--error { color: $text-error; }
    PacketList > .packet-list--warn { color: $text-warning; }
    PacketList > .packet-list--note { color: $text-secondary; }
    """                 # $text-*: text on the background ($warning: 1.5:1 on the light theme's)

    def __init__(self, index, **kwargs):
        super().__init__(**kwargs)
        self.index = index
        self.first_ts: int | None = None
        self.gbps = 100.0                    # link speed of the pause tags (tui --link-speed)
        self.time_format, self.hms = "r", False      # tshark's -t and -u (T and U change them)
        self._blocks: OrderedDict[int, list[Row]] = OrderedDict()
        self._unflagged: dict[int, int] = {}     # block -> its last row, drawn before it had flags
        self.widths = [0] * len(COLUMNS)         # the widest value of each column decoded
        self.trail: list[int] = []               # rows the related-frame jumps left (b goes back)

    def set_rows(self, rows, keep_cursor: bool = True) -> None:
        """The rows listed (index rows); the cursor stays on its packet when it is still listed."""
        old = self.current_row() if keep_cursor else None
        self.rows = _rows(rows)
        self._forget()
        self.resized()
        at = position(self.rows, old) if old is not None and len(self.rows) else 0
        self.cursor = min(at, max(len(self.rows) - 1, 0))
        self.refresh()

    def grow(self, rows) -> None:
        """More rows loaded (the same prefix): only the size and the last block change."""
        n = len(self.rows)
        self.rows = _rows(rows)
        self._blocks.pop(n // BLOCK, None)
        self.resized()
        if n == 0 and len(self.rows):
            self.cursor = 0                  # the first packet's tree and hex
        self.refresh()

    def flags_arrived(self) -> None:
        """Draw again the blocks drawn before their rows were analyzed (the Analyzer holds rows
        back for path-MTU evidence; the loader lists rows before it analyses them), and the
        tree of the row under the cursor when its block was one: the row count may not change."""
        stale = [block for block, last in self._unflagged.items() if last < self.index.flagged]
        for block in stale:
            del self._unflagged[block]
            self._blocks.pop(block, None)
        if stale:
            self.refresh()
            if self.cursor // BLOCK in stale:
                self.post_message(self.Moved(self, self.current_row()))

    def set_time_format(self, fmt: str, hms: bool) -> None:
        """Show the time column in another of tshark's -t formats (and -u): every line again."""
        self.time_format, self.hms = fmt, hms
        self._forget()
        self.refresh()

    def _forget(self) -> None:
        """Every line decoded again, the columns as wide as the rows then drawn need."""
        self._blocks.clear()
        self._unflagged.clear()
        self.widths = [0] * len(COLUMNS)

    def times(self, batch, at: int):
        """The time column of decoded rows listed from position `at` on: relative to the first
        packet, to the packet captured before (d) or to the one listed before (dd, what tshark's
        "displayed" is here: the list under its filter), or absolute; with the file's precision."""
        from roceview.packets.times import TimeColumn, digits_of

        ts = batch.cols["ts_ns"].astype(np.int64)
        fmt = self.time_format
        if fmt in ("d", "dd") and batch.n:
            before = (batch.cols["frame"] - 2) if fmt == "d" else _listed_before(self.rows, at, batch.n)
            prev, known = self.index.ts_of(before)
            values = np.where(known, ts - prev, 0)
        elif fmt == "r":
            values = ts - (self.first_ts if self.first_ts is not None else (int(ts[0]) if batch.n else 0))
        else:
            values = ts
        return TimeColumn(values, digits_of(batch), fmt, self.hms)

    def current_row(self) -> int | None:
        return int(self.rows[self.cursor]) if 0 <= self.cursor < len(self.rows) else None

    def goto(self, row: int) -> None:
        """Put the cursor on an index row (or the first listed after it)."""
        self.cursor = min(position(self.rows, row), max(len(self.rows) - 1, 0))

    def listed(self, row: int) -> bool:
        at = position(self.rows, row)
        return at < len(self.rows) and int(self.rows[at]) == row

    def follow(self, row: int) -> None:
        """The cursor to a listed row, the row it leaves kept for back()."""
        here = self.current_row()
        if here is not None:
            self.trail.append(here)
        self.goto(row)

    def back(self) -> int | None:
        """The cursor back to the row the last follow() left: that row, or None when there is
        none left (a row no longer listed is returned without moving: the caller says so)."""
        if not self.trail:
            return None
        row = self.trail.pop()
        if self.listed(row):
            self.goto(row)
        return row

    def column_widths(self) -> list[int]:
        widths = list(self.widths)
        if len(self.rows):               # No. as wide as the last listed frame's from the start:
            widths[0] = max(widths[0], len(str(int(self.rows[-1]) + 1)))   # End moved every column
        return column_widths(widths, self.size.width)

    def header(self) -> str:
        return header_text(self.column_widths())

    def wide(self) -> int:
        return sum(self.column_widths()) + len(COLUMNS) + INFO_WIDE

    def line(self, i: int) -> str:
        return row_text(self._row(i), self.column_widths())

    def segments(self, i: int, style) -> list:
        """The line, its tags coloured by severity (theme colours: $text-error, -warning, -secondary)."""
        from rich.segment import Segment

        row, widths = self._row(i), self.column_widths()
        text, head = row_text(row, widths), sum(widths) + len(widths)
        out, at = [], 0
        for start, end, severity in ((head + a, head + b, sev) for a, b, sev in row[2]):
            colour = self.get_component_rich_style(f"packet-list--{severity}", partial=True)
            out += [Segment(text[at:start], style), Segment(text[start:end], style + colour)]
            at = end
        return out + [Segment(text[at:], style)]

    def _row(self, i: int) -> Row:
        rows = self._block(i)
        k = i % BLOCK
        return rows[k] if k < len(rows) else (("",) * len(COLUMNS), "", [])

    def _block(self, i: int) -> list[Row]:
        block = i // BLOCK
        got = self._blocks.get(block)
        if got is None:
            rows = self.rows[block * BLOCK: (block + 1) * BLOCK]
            if len(rows) and int(np.max(rows)) >= self.index.flagged:
                self._unflagged[block] = int(np.max(rows))
            try:
                batch = self.index.decode(rows)
                got = list_rows(batch, self.first_ts, self.gbps, self.times(batch, block * BLOCK))
            except Exception as exc:   # noqa: BLE001  one bad block is shown, the list goes on
                got = [((str(int(r) + 1), "", "", "", "", ""), f"(cannot decode: {exc})", []) for r in rows]
            self._widen(got)
            self._blocks[block] = got
            while len(self._blocks) > CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(block)
        return got

    def _widen(self, rows: list[Row]) -> None:
        """Columns widened for a block just decoded: the lines drawn before it (this frame's
        too) are drawn again, and the list's width follows."""
        widths = grown(self.widths, rows)
        if widths != self.widths:
            self.widths = widths
            self.refresh()
            self.call_later(self.resized)
