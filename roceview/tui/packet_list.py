"""A virtual packet list: only the rows on screen are decoded (from the packet index, in blocks
of BLOCK rows, a few blocks cached) and drawn; 10 M rows scroll at once (toolong's Line API)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from roceview.tui.index import RowRange, position

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
        flags = [str(f) if f is not None else "" for f in df["flags"].astype(object).tolist()] \
            if "flags" in df.columns else [str(f) for f in batch.cols["flags"].tolist()]
        lines = [f"{f:<10} {line}" for f, line in zip(flags, lines)]
    return lines


def _rows(rows):
    return rows if isinstance(rows, RowRange) else np.asarray(rows, np.int64)


class PacketList(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"packet-list--cursor"}
    DEFAULT_CSS = """
    PacketList { height: 1fr; }
    PacketList > .packet-list--cursor { background: $accent 40%; text-style: bold; }
    """
    BINDINGS = [Binding("up", "move(-1)", show=False), Binding("down", "move(1)", show=False),
                Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
                Binding("home", "jump(0)", show=False), Binding("end", "jump(-1)", show=False)]
    cursor = reactive(0, always_update=True)

    class Moved(Message):
        def __init__(self, row: int | None) -> None:
            super().__init__()
            self.row = row          # the index row under the cursor

    def __init__(self, index, **kwargs):
        super().__init__(**kwargs)
        self.index = index
        self.rows = np.zeros(0, np.int64)
        self.first_ts: int | None = None
        self._blocks: OrderedDict[int, list[str]] = OrderedDict()

    def set_rows(self, rows: np.ndarray, keep_cursor: bool = True) -> None:
        """The rows listed (index rows); the cursor stays on its packet when it is still listed."""
        old = self.current_row() if keep_cursor else None
        self.rows = _rows(rows)
        self._blocks.clear()
        self.virtual_size = Size(max(self.size.width, 160), len(self.rows))
        at = position(self.rows, old) if old is not None and len(self.rows) else 0
        self.cursor = min(at, max(len(self.rows) - 1, 0))
        self.refresh()

    def grow(self, rows: np.ndarray) -> None:
        """More rows loaded (the same prefix): only the size and the last block change."""
        n = len(self.rows)
        self.rows = _rows(rows)
        self._blocks.pop(n // BLOCK, None)
        self.virtual_size = Size(max(self.size.width, 160), len(self.rows))
        if n == 0 and len(self.rows):
            self.cursor = 0                  # the first packet's tree and hex
        self.refresh()

    def current_row(self) -> int | None:
        return int(self.rows[self.cursor]) if 0 <= self.cursor < len(self.rows) else None

    def goto(self, row: int) -> None:
        """Put the cursor on an index row (or the first listed after it)."""
        self.cursor = min(position(self.rows, row), max(len(self.rows) - 1, 0))

    def watch_cursor(self, cursor: int) -> None:
        self.scroll_to_region_cursor()
        self.refresh()
        self.post_message(self.Moved(self.current_row()))

    def scroll_to_region_cursor(self) -> None:
        top, height = int(self.scroll_offset.y), max(self.size.height, 1)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def action_move(self, step: int) -> None:
        self.cursor = int(np.clip(self.cursor + step, 0, max(len(self.rows) - 1, 0)))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.size.height - 1, 1))

    def action_jump(self, where: int) -> None:
        self.cursor = max(len(self.rows) - 1, 0) if where < 0 else 0

    def on_click(self, event) -> None:
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < len(self.rows):
            self.cursor = row

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = int(scroll_y) + y
        width = self.size.width
        if i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        text = self._line(i)
        style = self.get_component_rich_style("packet-list--cursor") if i == self.cursor else self.rich_style
        strip = Strip([Segment(text.ljust(scroll_x + width), style)])
        return strip.crop(scroll_x, scroll_x + width)

    def _line(self, i: int) -> str:
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
