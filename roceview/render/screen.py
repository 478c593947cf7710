"""Plain text output for the analyze report, without rich.

Importing rich and laying out its Table cost ~60 ms per run (more than reading 150k packets),
for text that is fixed columns anyway. `Screen` writes lines, with ANSI styles only on a colour
terminal, and draws tables the way rich's HEAVY_HEAD box without outer edges did (ASCII when the
output's encoding is not UTF-8), so the report looks as before.
"""
from __future__ import annotations

import os
import re
import textwrap

_SGR = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "cyan": "36", "bold red": "1;31"}
UNICODE_BOX = ("┃", "━", "╇", "│", "…")
ASCII_BOX = ("|", "-", "+", "|", "...")
PIPE_WIDTH = 120  # not a terminal and no COLUMNS: a fixed width, the same in every log
# a number and its unit stay on one line ('100 ms', '1.834 us', '17.0 Gb/s'): a line ending in
# '100' reads as a count; a no-break space holds them while textwrap splits on spaces
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=(?:ns|us|\u00b5s|ms|s|Gb/s|Mb/s|GB|MB|KB)(?![\w/]))")


class Screen:
    def __init__(self, file, is_tty: bool = False, width: int | None = None, crop: bool = True):
        """`crop` False (--wide): table lines keep their full width whatever the terminal's."""
        self.file = file
        self.is_tty = is_tty
        self.color = is_tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        self.width = width or terminal_width(file if is_tty else None)
        self.crop = crop
        encoding = (getattr(file, "encoding", None) or "utf-8").lower()
        self.box = UNICODE_BOX if encoding.startswith("utf") else ASCII_BOX

    @property
    def ellipsis(self) -> str:
        return self.box[4]

    def style(self, text: str, style: str | None) -> str:
        if not style or not self.color or not text:
            return text
        return f"\x1b[{_SGR[style]}m{text}\x1b[0m"

    def print(self, text: str = "") -> None:
        self.file.write(text + "\n")

    def para(self, text: str, indent: str = "  ", more: str = "    ") -> None:
        """One paragraph wrapped to the width, continuation lines indented by `more`."""
        lines = wrap(text, self.width, initial_indent=indent, subsequent_indent=more)
        self.file.write("\n".join(lines or [indent]) + "\n")

    def table(self, heads, rows, right: set[int], styles=None) -> None:
        """Columns sized to their widest cell, numbers (`right`) right-aligned, a rule under the
        bold header. Lines wider than the width are cut at its edge rather than wrapped into a
        mess (unless crop is off: --wide); --csv/--json have every column."""
        widths = _widths(heads, rows)
        bar, rule, cross, sep, _ = self.box
        # a space on both sides of the bars; on one side when that fits a narrow terminal
        tight = self.crop and table_width(heads, rows) > self.width
        left = "" if tight else " "

        def line(cells, between):
            return between.join(c.rjust(w) if i in right else c.ljust(w)
                                for i, (c, w) in enumerate(zip(cells, widths)))

        last = len(widths) - 1
        out = [self.style(self._crop(line(heads, f" {bar}{left}")), "bold"),
               self._crop(cross.join(rule * (w + (i > 0 and not tight) + (i < last)) for i, w in enumerate(widths)))]
        for i, row in enumerate(rows):
            out.append(self.style(self._crop(line(row, f" {sep}{left}")), styles[i] if styles else None))
        self.file.write("\n".join(out) + "\n")

    def _crop(self, text: str) -> str:
        if not self.crop or len(text) <= self.width:
            return text
        return text[:max(0, self.width - len(self.ellipsis))] + self.ellipsis


def wrap(text: str, width: int, **kw) -> list[str]:
    """textwrap.wrap that never breaks at a hyphen nor between a number and its unit."""
    lines = textwrap.wrap(_NUMBER_UNIT.sub("\u00a0", text), width, break_on_hyphens=False, **kw)
    return [line.replace("\u00a0", " ") for line in lines]


def _widths(heads, rows) -> list[int]:
    return [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]


def table_width(heads, rows, tight: bool = False) -> int:
    """How wide `Screen.table` draws these cells (column widths, 3-character separators;
    tight: 2, as it draws them when 3 do not fit)."""
    return sum(_widths(heads, rows)) + (2 if tight else 3) * (len(heads) - 1)


def terminal_width(file) -> int:
    """COLUMNS when set, else the terminal's width, else 80 (file None, not a terminal: PIPE_WIDTH)."""
    try:
        return max(20, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        pass
    try:
        return max(20, os.get_terminal_size(file.fileno()).columns)
    except (AttributeError, OSError, ValueError):
        return PIPE_WIDTH if file is None else 80
