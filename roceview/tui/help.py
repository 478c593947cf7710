"""`?`: every key of every screen."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("1 2 3 4", "Overview, Queue pairs, Packets, PFC"),
    ("Enter", "open the finding's flows / packets (1), the queue pair (2)"),
    ("s", "queue pairs: next sort column (worst first, then each counter)"),
    ("c", "queue pairs / packets: drop the restriction (all QPs, all packets)"),
    ("p", "queue pair detail: its packets"),
    ("/", "display filter bar (Enter applies, empty clears, Esc closes)"),
    ("↑ ↓ PgUp PgDn Home End", "move in tables and the packet list"),
    ("Tab", "next widget (packet list, tree)"),
    ("Esc", "back (close this help, the detail, the previous screen)"),
    ("t", "dark / light theme"),
    ("?", "this help"),
    ("q", "quit (exit 3 with --fail-on when a finding is that severe)"),
)


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in KEYS)
        text = "\n".join(f"[b]{k:<{width}}[/b]  {v}" for k, v in KEYS)
        yield Static("[b]roceview keys[/b]\n\n" + text, id="help-text")
