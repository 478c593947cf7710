"""A virtual list (toolong's Line API): `rows` may be millions long, only the lines on screen
are asked for (`line(i)`) and drawn; a cursor row, the usual movement keys, Enter. A subclass
with HEADER_ROWS = 1 has a header line (`header()`) on top: it stays when the rows scroll up
and down, and moves sideways with them (a separate widget above stayed put, its columns then
over the wrong values)."""
from __future__ import annotations

import numpy as np
from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

WIDE = 160          # columns a line may have: scrolled sideways past the screen's width


class VirtualList(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"virtual-list--cursor", "virtual-list--header"}
    DEFAULT_CSS = """
    VirtualList { height: 1fr; }
    VirtualList > .virtual-list--cursor { background: $accent 40%; text-style: bold; }
    VirtualList > .virtual-list--header { background: $boost; text-style: bold; }
    """
    HEADER_ROWS = 0         # 1: `header()` is drawn on the top line
    BINDINGS = [Binding("up", "move(-1)", show=False), Binding("down", "move(1)", show=False),
                Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
                Binding("home", "jump(0)", show=False), Binding("end", "jump(-1)", show=False),
                Binding("enter", "select", show=False)]
    cursor = reactive(0, always_update=True)

    class Moved(Message):
        def __init__(self, source: "VirtualList", row) -> None:
            super().__init__()
            self.source, self.row = source, row      # what `rows` holds under the cursor

    class Selected(Moved):
        pass

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows = np.zeros(0, np.int64)

    def line(self, i: int) -> str:
        """The text of the i-th listed row (subclasses)."""
        return ""

    def segments(self, i: int, style) -> list[Segment]:
        """The i-th row as styled segments (subclasses may colour parts of it)."""
        return [Segment(self.line(i), style)]

    def header(self) -> str:
        """The header line (subclasses with HEADER_ROWS = 1)."""
        return ""

    def wide(self) -> int:
        """Columns a line may have: scrolled sideways up to there."""
        return WIDE

    def resized(self) -> None:
        self.virtual_size = Size(max(self.size.width, self.wide()), len(self.rows) + self.HEADER_ROWS)

    def current_row(self):
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _rows_shown(self) -> int:
        """Rows on screen: the widget's height less the horizontal scrollbar's (lines are WIDE)
        and the header's."""
        height = self.scrollable_content_region.height
        if not self.show_horizontal_scrollbar and self.virtual_size.width > self.size.width:
            height -= self.styles.scrollbar_size_horizontal     # laid out soon: lines are WIDE
        return max(height - self.HEADER_ROWS, 1)

    def watch_cursor(self, cursor: int) -> None:
        self._show_cursor()
        # again once laid out: the first layout may add the horizontal scrollbar (a row fewer)
        self.call_after_refresh(self._show_cursor)
        self.refresh()
        self.post_message(self.Moved(self, self.current_row()))

    def _show_cursor(self) -> None:
        """Scroll so the cursor's row is on screen. Forced: before the list's first layout
        Textual allows no vertical scroll yet (no scrollbar), and the scroll was dropped."""
        top, height, cursor = int(self.scroll_offset.y), self._rows_shown(), self.cursor
        if cursor < top:
            self.scroll_to(y=cursor, animate=False, force=True)
        elif cursor >= top + height:
            self.scroll_to(y=cursor - height + 1, animate=False, force=True)

    def on_resize(self, event) -> None:
        """A list given its cursor before it had a size (a screen never shown, a jump to an
        event's frame) scrolls to it once it has one: the scroll was clamped to nothing then."""
        self.call_after_refresh(self._show_cursor)

    def action_move(self, step: int) -> None:
        self.cursor = int(np.clip(self.cursor + step, 0, max(len(self.rows) - 1, 0)))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self._rows_shown() - 1, 1))

    def action_jump(self, where: int) -> None:
        self.cursor = max(len(self.rows) - 1, 0) if where < 0 else 0

    def action_select(self) -> None:
        if len(self.rows):
            self.post_message(self.Selected(self, self.current_row()))

    def on_click(self, event) -> None:
        row = int(self.scroll_offset.y) + event.y - self.HEADER_ROWS
        if event.y >= self.HEADER_ROWS and 0 <= row < len(self.rows):
            if row == self.cursor and event.chain > 1:
                self.action_select()
            self.cursor = row

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = int(scroll_y) + y - self.HEADER_ROWS
        width = self.size.width
        if y < self.HEADER_ROWS:
            style = self.get_component_rich_style("virtual-list--header")
            segments = [Segment(self.header(), style)]
        elif i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        else:
            style = self.get_component_rich_style("virtual-list--cursor") if i == self.cursor else self.rich_style
            segments = self.segments(i, style)
        filled = sum(len(s.text) for s in segments)
        strip = Strip(segments + [Segment(" " * max(scroll_x + width - filled, 0), style)])
        return strip.crop(scroll_x, scroll_x + width)
