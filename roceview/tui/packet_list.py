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
HEADER = "  Frame         Time Source → Destination Protocol Length Info"
# a `dissect` line up to its Info: frame, time, source → destination, protocol, length
# (render/lines.packet_lines; addresses and protocol labels have no spaces)
BEFORE_INFO = re.compile(r"\s*\S+\s+\S+ \S+ → \S+ \S+ \S+")


def table(batch):
    """The packets table of decoded rows, with the analysis columns the packet index adds."""
    from roceview.packets.table import to_dataframe

    if "flags" in batch.cols:
        from roceview.analysis.packet_flags import packet_columns

        return to_dataframe(batch, packet_columns())
    return to_dataframe(batch)


def summary_lines(batch, first_ts: int | None, gbps: float = 100.0, times=None) -> list[str]:
    """The list's lines: `dissect`'s, with the flags' tags (its words: render.flag_text.tags)
    moved to the front of Info, where Wireshark shows its expert info: on an 80-column screen
    they are seen; a line without flags is `dissect`'s as it is. `times`: the time column
    (packets/times.TimeColumn), else seconds since `first_ts` with the file's precision."""
    return marked_lines(batch, first_ts, gbps, times)[0]


def marked_lines(batch, first_ts: int | None, gbps: float = 100.0, times=None) -> tuple[list[str], dict]:
    """summary_lines, and for each line with tags its marks: [(start, end, severity)], one a
    tag (severity: error, warn, note; coloured as `dissect` colours them on a terminal)."""
    from roceview.render.flag_text import TAGGED, tag_text, tags
    from roceview.render.lines import packet_lines, packet_rows

    from roceview.packets.times import TimeColumn, digits_of

    df = table(batch)
    if times is None and batch.n:            # the DataFrame does not carry the file's precision
        ts = batch.cols["ts_ns"].astype(np.int64)
        times = TimeColumn(ts - (int(ts[0]) if first_ts is None else first_ts), digits_of(batch))
    lines, marks = packet_lines(df, first_ts, gbps, times=times), {}
    tagged = set(np.flatnonzero(batch.cols["flags"] & TAGGED).tolist()) if "flags" in batch.cols else ()
    for i, (row, quanta) in enumerate(packet_rows(df) if tagged else ()):
        moved = tags_first(lines[i], tag_text(row, quanta, gbps)) if i in tagged else lines[i]
        if moved != lines[i]:
            lines[i], at, marks[i] = moved, BEFORE_INFO.match(moved).end() + 1, []
            for text, severity in tags(row, quanta, gbps):     # tag_text's: "[text]" joined by spaces
                marks[i].append((at, at + len(text) + 2, severity))
                at += len(text) + 3
    return lines, marks


def tags_first(line: str, tags: str) -> str:
    """A `dissect` line ending in its tags, with them at the start of its Info instead."""
    if not tags or not line.endswith(" " + tags):
        return line
    body = line[: -len(tags) - 1]
    head = BEFORE_INFO.match(body)
    if head is None:
        return line
    info = body[head.end():].strip()
    return f"{body[: head.end()]} {tags}" + (f" {info}" if info else "")


def _listed_before(rows, at: int, n: int) -> np.ndarray:
    """The index row listed just before each of the n rows listed from position `at` (-1: none)."""
    return np.array([int(rows[p - 1]) if p > 0 else -1 for p in range(at, at + n)], np.int64)


def _rows(rows):
    return rows if isinstance(rows, RowRange) else np.asarray(rows, np.int64)


class PacketList(VirtualList):
    """The packet list: `rows` are index rows, their lines decoded in blocks when drawn."""
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
        self._blocks: OrderedDict[int, tuple[list[str], dict]] = OrderedDict()
        self._unflagged: dict[int, int] = {}     # block -> its last row, drawn before it had flags

    def set_rows(self, rows, keep_cursor: bool = True) -> None:
        """The rows listed (index rows); the cursor stays on its packet when it is still listed."""
        old = self.current_row() if keep_cursor else None
        self.rows = _rows(rows)
        self._blocks.clear()
        self._unflagged.clear()
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
        self._blocks.clear()
        self._unflagged.clear()
        self.refresh()

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

    def line(self, i: int) -> str:
        lines, _ = self._block(i)
        k = i % BLOCK
        return lines[k] if k < len(lines) else ""

    def segments(self, i: int, style) -> list:
        """The line, its tags coloured by severity (theme colours: $text-error, -warning, -secondary)."""
        from rich.segment import Segment

        lines, marks = self._block(i)
        k = i % BLOCK
        text = lines[k] if k < len(lines) else ""
        out, at = [], 0
        for start, end, severity in marks.get(k, ()):
            colour = self.get_component_rich_style(f"packet-list--{severity}", partial=True)
            out += [Segment(text[at:start], style), Segment(text[start:end], style + colour)]
            at = end
        return out + [Segment(text[at:], style)]

    def _block(self, i: int) -> tuple[list[str], dict]:
        block = i // BLOCK
        got = self._blocks.get(block)
        if got is None:
            rows = self.rows[block * BLOCK: (block + 1) * BLOCK]
            if len(rows) and int(np.max(rows)) >= self.index.flagged:
                self._unflagged[block] = int(np.max(rows))
            try:
                batch = self.index.decode(rows)
                got = marked_lines(batch, self.first_ts, self.gbps, self.times(batch, block * BLOCK))
            except Exception as exc:   # noqa: BLE001  one bad block is shown, the list goes on
                got = [f"{int(r) + 1:>7} (cannot decode: {exc})" for r in rows], {}
            self._blocks[block] = got
            while len(self._blocks) > CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(block)
        return got
