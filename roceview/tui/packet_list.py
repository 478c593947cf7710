"""A virtual packet list: only the rows on screen are decoded (from the packet index, in blocks
of BLOCK rows, a few blocks cached) and drawn; 10 M rows scroll at once."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from roceview.tui.index import RowRange, position
from roceview.tui.virtual import VirtualList

BLOCK = 128              # rows decoded together
CACHED_BLOCKS = 32
HEADER = "  Frame         Time Source → Destination Protocol Length Info"


def summary_lines(batch, first_ts: int | None) -> list[str]:
    """`dissect`'s one-line summaries, with the analysis flags in front when the packets table
    has a `flags` column (the packet-analysis issue adds it)."""
    from roceview.render.lines import packet_lines
    from roceview.table import to_dataframe

    df = to_dataframe(batch)
    lines = packet_lines(df, first_ts)
    if "flags" in batch.cols:
        flags = [_flag_text(f) for f in batch.cols["flags"].tolist()]
        lines = [f"{f:<10} {line}" for f, line in zip(flags, lines)]
    return lines


def _flag_text(value) -> str:
    """A flags bitmask as the names of its bits (roceview.flags.Flag), else as it is."""
    try:
        from roceview.flags import Flag

        bits = int(value)
    except (ImportError, ValueError, TypeError):
        return "" if value is None else str(value)
    return ",".join(f.name.lower() for f in Flag if f & bits) if bits else ""


def _rows(rows):
    return rows if isinstance(rows, RowRange) else np.asarray(rows, np.int64)


class PacketList(VirtualList):
    """The packet list: `rows` are index rows, their lines decoded in blocks when drawn."""

    def __init__(self, index, **kwargs):
        super().__init__(**kwargs)
        self.index = index
        self.first_ts: int | None = None
        self._blocks: OrderedDict[int, list[str]] = OrderedDict()

    def set_rows(self, rows, keep_cursor: bool = True) -> None:
        """The rows listed (index rows); the cursor stays on its packet when it is still listed."""
        old = self.current_row() if keep_cursor else None
        self.rows = _rows(rows)
        self._blocks.clear()
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

    def current_row(self) -> int | None:
        return int(self.rows[self.cursor]) if 0 <= self.cursor < len(self.rows) else None

    def goto(self, row: int) -> None:
        """Put the cursor on an index row (or the first listed after it)."""
        self.cursor = min(position(self.rows, row), max(len(self.rows) - 1, 0))

    def line(self, i: int) -> str:
        block = i // BLOCK
        lines = self._blocks.get(block)
        if lines is None:
            rows = self.rows[block * BLOCK: (block + 1) * BLOCK]
            try:
                lines = summary_lines(self.index.decode(rows), self.first_ts)
            except Exception as exc:   # noqa: BLE001  one bad block is shown, the list goes on
                lines = [f"{int(r) + 1:>7} (cannot decode: {exc})" for r in rows]
            self._blocks[block] = lines
            while len(self._blocks) > CACHED_BLOCKS:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(block)
        k = i - block * BLOCK
        return lines[k] if k < len(lines) else ""
