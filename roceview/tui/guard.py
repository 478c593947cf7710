"""Handlers that cannot take the TUI down: an exception in a screen's handler is shown on the
screen (RoceviewApp.show_error) instead of ending the app.

Textual ends the whole app on any exception in a handler (exit 1, a traceback over the
screen), and the message loop of the widget it ran in stops for good: a bug in one screen,
or a race Textual lets through (a screen closed before its children mounted), cost the
user the capture they were looking at. Guarded classes wrap their own `on_*`, `action_*` and
`show` methods as they are defined, so a subclass's new handlers are guarded too.
"""
from __future__ import annotations

import functools
import inspect

GUARDED_PREFIXES = ("on_", "action_")
GUARDED_NAMES = ("show",)


def report(node, exc: BaseException) -> None:
    """Hand the error to the app's show_error (the app in tests without one: re-raised)."""
    show_error = getattr(node.app, "show_error", None)
    if show_error is None:
        raise exc
    show_error(exc)


def guarded(method):
    """`method` (sync or async, of a Textual node), its exceptions reported, not raised."""
    if getattr(method, "_guarded", False):
        return method
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def run_async(self, *args, **kwargs):
            try:
                return await method(self, *args, **kwargs)
            except Exception as exc:   # noqa: BLE001  shown on the screen, the app goes on
                report(self, exc)
        wrapper = run_async
    else:
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:   # noqa: BLE001  shown on the screen, the app goes on
                report(self, exc)
        wrapper = run
    wrapper._guarded = True
    return wrapper


def _is_handler(name: str, value) -> bool:
    return callable(value) and not isinstance(value, type) and \
        (name.startswith(GUARDED_PREFIXES) or name in GUARDED_NAMES)


class Guarded:
    """A mixin: the class's (and its subclasses') handlers are guarded()."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if _is_handler(name, value):
                setattr(cls, name, guarded(value))
