"""Plain text output for the analyze report, without rich.

Importing rich and laying out its Table cost ~60 ms per run (more than reading 150k packets),
for text that is fixed columns anyway. `Screen` writes lines, with ANSI styles only on a colour
terminal, and draws tables the way rich's HEAVY_HEAD box without outer edges did (ASCII when the
output's encoding is not UTF-8), so the report looks as before.
"""
from __future__ import annotations

import os

_SGR = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "cyan": "36", "bold red": "1;31"}
UNICODE_BOX = ("┃", "━", "╇", "│", "…")
ASCII_BOX = ("|", "-", "+", "|", "...")
PIPE_WIDTH = 200  # not a terminal: wide lines, as a log or a README shows them


class Screen:
    def __init__(self, file, is_tty: bool = False, width: int | None = None):
        self.file = file
        self.is_tty = is_tty
        self.color = is_tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        self.width = width or (terminal_width(file) if is_tty else PIPE_WIDTH)
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

    def table(self, heads, rows, right: set[int], styles=None) -> None:
        """Columns sized to their widest cell, numbers (`right`) right-aligned, a rule under the
        bold header. On a terminal, lines wider than it are cut at its edge rather than wrapped
        into a mess; --csv/--json have every column."""
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
        bar, rule, cross, sep, _ = self.box

        def line(cells, between):
            return between.join(c.rjust(w) if i in right else c.ljust(w)
                                for i, (c, w) in enumerate(zip(cells, widths)))

        out = [self.style(self._crop(line(heads, f" {bar} ")), "bold"),
               self._crop(cross.join(rule * (w + (i > 0) + (i < len(widths) - 1)) for i, w in enumerate(widths)))]
        for i, row in enumerate(rows):
            out.append(self.style(self._crop(line(row, f" {sep} ")), styles[i] if styles else None))
        self.file.write("\n".join(out) + "\n")

    def _crop(self, text: str) -> str:
        if not self.is_tty or len(text) <= self.width:
            return text
        return text[:max(0, self.width - len(self.ellipsis))] + self.ellipsis


def terminal_width(file) -> int:
    """COLUMNS when set, else the terminal's width, else 80."""
    try:
        return max(20, int(os.environ["COLUMNS"]))
    except (KeyError, ValueError):
        pass
    try:
        return max(20, os.get_terminal_size(file.fileno()).columns)
    except (AttributeError, OSError, ValueError):
        return 80
