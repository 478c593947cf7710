"""What every screen shares: the header line, the filter bar, the footer, snapshot delivery."""
from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static

from roceview.tui.guard import Guarded

NO_FILTERS = "display filters not available"


def compile_filter(text: str):
    """roceview.filter.compile_filter, imported when first used: (filter, None) or (None, the
    one-line message to show in the bar). The filter language may not be installed. Any other
    exception of the compiler (a bug, Python's own limits on a literal) is a message too: the
    bar is where the user typed it, and it never takes the screen down."""
    try:
        from roceview.filter import FilterError, compile_filter as compile_
    except ImportError:
        return None, NO_FILTERS
    try:
        return compile_(text), None
    except FilterError as exc:
        return None, one_line(str(exc)) or "bad filter"
    except Exception as exc:   # noqa: BLE001  shown in the bar, as a FilterError is
        return None, f"filter not compiled: {type(exc).__name__}: {one_line(str(exc))}"


def one_line(text: str, limit: int = 200) -> str:
    """The first line of a message, at most `limit` characters (a literal of 5,000 digits)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


class FilterBar(Guarded, Vertical):
    """`/` opens it; Enter applies the filter (a bad one is shown here); Esc closes it."""

    class Applied(Message):
        def __init__(self, text: str, display_filter) -> None:
            super().__init__()
            self.text, self.display_filter = text, display_filter

    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def compose(self) -> ComposeResult:
        yield Input(placeholder="display filter, e.g. psn == 12  (Enter applies, empty clears, Esc closes)",
                    id="filter-input")
        yield Label("", id="filter-message")

    def open(self, text: str = "") -> None:
        self.display = True
        box = self.query_one(Input)
        box.value = text
        box.focus()

    def action_close(self) -> None:
        self.display = False
        self.screen.focus_main()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.post_message(self.Applied("", None))
            self.action_close()
            return
        display_filter, message = compile_filter(text)
        self.query_one("#filter-message", Label).update(message or "")
        if display_filter is not None:
            self.post_message(self.Applied(text, display_filter))
            self.action_close()


class RoceScreen(Guarded, Screen):
    """A screen that renders the app's latest snapshot: `show(snapshot)` is called when one
    arrives and when the screen is shown again."""

    BINDINGS = [Binding("slash", "open_filter", "Filter"), Binding("escape", "back", "Back", show=False)]
    TITLE_TEXT = ""

    def compose(self) -> ComposeResult:
        yield Static(self.TITLE_TEXT, classes="screen-title", id="screen-title")
        yield from self.body()
        bar = FilterBar(id="filter-bar")
        bar.display = False
        yield bar
        yield Footer()

    def body(self) -> ComposeResult:
        yield from ()

    MODE = ""

    def on_screen_resume(self) -> None:
        snapshot = self.app.snapshot
        if snapshot is not None and snapshot is not getattr(self, "_shown", None):
            self.show(snapshot)           # the screen already shows this one: switching back is free
            self._shown = snapshot
        todo = self.app.pending.pop(self.MODE, None) if self.MODE else None
        if todo is not None:
            todo(self)

    def on_resize(self, event: events.Resize) -> None:
        """A Resize of a size the terminal no longer has is dropped (Textual's own handler
        skipped). Textual 8 lays a screen out for every Resize in its queue and posts itself
        a Resize of that size again; two sizes queued during a SIGWINCH burst then bounced
        off each other forever while updates were batched (a mode switch), and the screen's
        message loop never gave the event loop back: 100 % CPU, q and Ctrl-C unread."""
        if event.size != self.app.size:
            event.prevent_default()

    def show(self, snapshot) -> None:
        """Render a snapshot (the screens override it)."""

    def due(self, snapshot, every: float = 2.0) -> bool:
        """For work that loops over events in Python: on the final snapshot, on the first,
        and at most every `every` seconds while loading (a screen gets a few a second)."""
        import time

        now = time.monotonic()
        if snapshot.done or now - getattr(self, "_due_at", -1e9) >= every:
            self._due_at = now
            return True
        return False

    def focus_main(self) -> None:
        """Focus the screen's main table again (after the filter bar closes)."""
        for widget in self.query("DataTable, VirtualList"):
            widget.focus()
            return

    def action_open_filter(self) -> None:
        self.query_one(FilterBar).open(self.app.filter_text)

    def action_back(self) -> None:
        self.app.go_back()

    def on_filter_bar_applied(self, event: FilterBar.Applied) -> None:
        self.app.apply_filter(event.text, event.display_filter)
