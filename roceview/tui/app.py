"""The Textual app: four screens (modes), a loader thread posting snapshots, the filter state.

The app only renders: the Loader (loader.py) owns the analysis and the packet index and runs
on a thread worker; its snapshots arrive as messages (post_message is thread-safe) and go to
the screen on top. Esc goes back through the screens visited.
"""
from __future__ import annotations

from textual import events
from textual.app import App
from textual.binding import Binding
from textual.message import Message

from roceview.tui.guard import guarded
from roceview.tui.loader import Loader, Snapshot, exit_code
from roceview.tui.style import CSS

ERROR_SECONDS = 30          # an error stays on the screen this long (a notification)


class SnapshotPosted(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class RoceviewApp(App):
    CSS = CSS
    ENABLE_COMMAND_PALETTE = False     # every action has its key (? lists them)
    MODES = {"overview": "roceview.tui.overview:OverviewScreen",
             "qps": "roceview.tui.qps:QueuePairsScreen",
             "packets": "roceview.tui.packets_screen:PacketsScreen",
             "pfc": "roceview.tui.pfc_screen:PfcScreen"}
    BINDINGS = [
        Binding("1", "mode('overview')", "Overview"), Binding("2", "mode('qps')", "QPs"),
        Binding("3", "mode('packets')", "Packets"), Binding("4", "mode('pfc')", "PFC"),
        Binding("question_mark", "help", "Help"), Binding("t", "toggle_theme", "Theme", show=False),
        Binding("q", "quit_app", "Quit"),
        # Ctrl-C quits as in htop/k9s and as `live --no-tui` (Textual only said 'press ctrl+q')
        Binding("ctrl+c", "quit_app", "Quit", show=False, priority=True),
    ]

    def __init__(self, loader: Loader, *, title: str = "roceview", light: bool = False, start: bool = True):
        self.MODES = {k: _import(v) for k, v in self.MODES.items()}
        super().__init__()
        self.loader = loader
        self.index = loader.index
        self.title = title
        self.light = light
        self.start_loading = start
        self.snapshot: Snapshot | None = None
        self.filter_text = ""
        self.display_filter = None
        self.history: list[str] = []
        self.pending: dict[str, object] = {}     # mode -> what its screen does when shown
        self.errors: list[str] = []              # what went wrong in a handler, as shown
        loader.on_snapshot = lambda snap: self.post_message(SnapshotPosted(snap))

    def on_mount(self) -> None:
        self.theme = "textual-light" if self.light else "textual-dark"
        if self.start_loading:
            self.loader.prepare()     # before the first frame: no import on the loader thread stalls a key
        self._compose_modes("qps", "packets", "pfc")
        self.switch_mode("overview")
        _freeze_startup_objects()
        if self.start_loading:        # after the first paint: the reader's imports would hold the GIL
            self.call_after_refresh(self.run_worker, self.loader.run, thread=True, exit_on_error=False,
                                    group="loader")

    def _compose_modes(self, *modes: str) -> None:
        """Build the other screens now, before the first frame (~0.05-0.1 s): a screen's first
        visit composed it and applied its CSS while the loader ran, 100-140 ms for the packets
        and PFC screens (docs/performance.md). Textual's own step for a mode's first switch
        (App._init_mode, textual 8); without it the screens are built when shown."""
        init = getattr(self, "_init_mode", None)
        for mode in modes if callable(init) else ():
            init(mode)

    def on_unmount(self) -> None:
        import gc

        gc.unfreeze()                 # the app's objects can be collected again once it is gone

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp)):
            self.loader.defer()       # the loader steps aside while the UI answers
        if self.errors and isinstance(event, events.Key) and event.key == "q" and not self._typing():
            self.action_quit_app()    # after an error the widget the key would go to may be dead
            return
        await super().on_event(event)

    def _typing(self) -> bool:
        from textual.widgets import Input

        return isinstance(self.focused, Input)

    @guarded
    def on_snapshot_posted(self, message: SnapshotPosted) -> None:
        self.snapshot = message.snapshot
        screen = self.screen
        # a screen not mounted yet (pushed this tick) has no widgets: on_screen_resume shows it
        if hasattr(screen, "show") and screen.is_mounted:
            screen._shown = message.snapshot
            screen.show(message.snapshot)

    # ---- errors -----------------------------------------------------------------------
    def show_error(self, exc: BaseException) -> None:
        """A handler failed: one line on the screen (a notification) and in `errors`; the app
        goes on, and `q` quits as usual."""
        line = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        self.errors.append(line)
        self.log.error(line)
        self.notify(f"internal error (the screen may be incomplete; q quits): {line}",
                    severity="error", timeout=ERROR_SECONDS)

    async def _dispatch_message(self, message) -> None:
        """The app's own message loop: Textual ends the loop after a handler raises (every key,
        `q` and Ctrl-C then do nothing, the app frozen); shown here, the loop goes on."""
        try:
            await super()._dispatch_message(message)
        except Exception as exc:   # noqa: BLE001  shown, the loop goes on
            if not self.is_running or self._closing:
                raise
            self.show_error(exc)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's end for an exception nothing caught (a worker's, one in its own
        machinery): shown as an error while the app runs, instead of ending it (exit 1);
        while it closes, Textual's own."""
        if self.is_running and not self._closing and isinstance(error, Exception):
            self.show_error(getattr(error, "error", None) or error)     # WorkerFailed: its cause
            return
        super()._handle_exception(error)

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """Key bindings run their actions here, on the app's own message loop: an exception
        there stopped every key, `q` included."""
        try:
            return await super().run_action(action, default_namespace, namespaces)
        except Exception as exc:   # noqa: BLE001  shown, the app goes on
            self.show_error(exc)
            return True

    # ---- navigation -------------------------------------------------------------------
    def action_mode(self, mode: str) -> None:
        if mode != self.current_mode:
            self.history.append(self.current_mode)
            self.switch_mode(mode)
        elif len(self.screen_stack) > 1 and mode in self.pending:
            self.pop_screen()           # the base screen of this mode resumes and takes it

    def go_back(self) -> None:
        """Esc: close a pushed screen (QP detail, help), else the mode visited before."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        elif self.history:
            self.switch_mode(self.history.pop())

    def open_qp(self, flow_row: int) -> None:
        from roceview.tui.qp_detail import QpDetailScreen

        self.push_screen(QpDetailScreen(flow_row))

    def show_packets(self, rows, label: str, at_row: int | None = None) -> None:
        """The packets screen over these rows (None = all), the cursor on `at_row`."""
        self._deliver("packets", lambda screen: screen.restrict(rows, label, at_row))

    def show_flows(self, names: list[str]) -> None:
        self._deliver("qps", lambda screen: screen.restrict(names))

    def _deliver(self, mode: str, todo) -> None:
        """Run `todo(screen)` on the mode's base screen once it is shown (it may not exist yet)."""
        if self.current_mode == mode and len(self.screen_stack) == 1:
            todo(self.screen)
        else:
            self.pending[mode] = todo
            self.action_mode(mode)

    def apply_filter(self, text: str, display_filter) -> None:
        """A display filter applies to the packet list: the packets screen scans for it."""
        self.filter_text, self.display_filter = text, display_filter
        self._deliver("packets", lambda screen: screen.filter_changed())

    def action_help(self) -> None:
        from roceview.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        self.theme = "textual-dark" if self.theme == "textual-light" else "textual-light"

    def action_quit_app(self) -> None:
        self.loader.request_stop()
        code = exit_code(self.snapshot, self.loader.options.fail_on)
        self.exit(result=code, return_code=code)


    def exit(self, *args, **kwargs) -> None:
        """Any way out (q, Textual's ctrl+q) stops the source too: Textual waits for the loader
        thread, which a quiet live interface would keep blocked in a read forever."""
        self.loader.request_stop()
        super().exit(*args, **kwargs)


def _freeze_startup_objects() -> None:
    """The app's start-up objects (the imports', the four screens') live as long as it: moved
    out of the cyclic GC's reach, a full collection traverses only what came after them. Full
    collections over them were the 100-140 ms a screen switch took now and then while loading
    (docs/performance.md). Garbage is collected first, so none is kept for good (a caller
    running several apps in one process)."""
    import gc

    gc.collect()
    gc.freeze()


def _import(spec: str):
    import importlib

    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)
