"""`?`: every key of every screen."""
from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("1 2 3 4", "Overview, Queue pairs, Packets, PFC"),
    ("Enter", "open: a finding's frames (its roceview.finding filter), a queue pair"),
    ("f", "a finding's flows in Queue pairs (Overview)"),
    ("s", "queue pairs: next sort column"),
    ("c", "queue pairs, packets: show all again"),
    ("p", "queue pair detail: its packets"),
    ("Enter c", "QP detail operations: its first frame / completion frame"),
    ("/", "display filter (Enter applies, empty clears)"),
    ("↑↓ PgUp PgDn", "move (Home, End: first, last)"),
    ("Tab", "next widget (packet list, tree)"),
    ("Esc", "back: close, or the screen before"),
    ("t", "dark / light theme"),
    ("T", "packets: next time format (tshark -t: r a ad adoy d dd e u ud)"),
    ("U", "packets: relative times in seconds or h m s (tshark -u)"),
    ("r", "packets: related frame (NAK→resend→first, ACK↔request)"),
    ("b Backspace", "packets: back to the frame the last r left (each jump)"),
    ("?", "this help"),
    ("q", "quit (with --fail-on: exit 3 as analyze)"),
)


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("question_mark", "dismiss", "Close"),
                Binding("q", "app.quit_app", "Quit")]        # modal: the app's q is off under it

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in KEYS)
        text = "\n".join(f"[b]{k:<{width}}[/b]  {v}" for k, v in KEYS)
        yield Static("[b]roceview keys[/b]\n\n" + text, id="help-text")

    def on_resize(self, event: events.Resize) -> None:
        """As RoceScreen.on_resize: a stale Resize is dropped."""
        if event.size != self.app.size:
            event.prevent_default()
