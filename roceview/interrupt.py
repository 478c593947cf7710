"""Ctrl-C in the command line: exit 130 at once, leaving no temporary file behind.

The CLI installs `on_sigint` as the SIGINT (and SIGTERM, SIGHUP) handler before it imports anything else
(`roceview/__main__.py`, `cli.entry`). The handler removes what the writers registered
(temporary files, a --csv folder they created) and ends the process with `os._exit(130)`:
no KeyboardInterrupt is raised, so none can surface as a traceback, as numpy's "importing
the numpy C-extensions failed" advice (a KeyboardInterrupt inside its import) or as an
"Exception ignored" line from a generator or thread closed during teardown.

Library callers never install it; the writers' registrations then cost a dict update.
`deferred()` marks the few steps that must finish once started (create-and-register a
temporary file, rename a set of files into place): a Ctrl-C inside waits for its end.
"""
from __future__ import annotations

import os
import signal
from contextlib import contextmanager

EXIT_INTERRUPTED = 130          # 128 + SIGINT, what shells report for a Ctrl-C
_registered: dict[str, str] = {}  # path -> "file" | "dir" (rmdir, only when empty) | "tree", in order
_state = {"deferred": 0, "pending": False}
_hooks: list = []               # called first: e.g. the progress bar shows the cursor again


def install() -> None:
    """SIGINT ends the process quietly (exit 130) after removing the registered paths; SIGTERM
    (`timeout`, `kill`) the same way with 143, SIGHUP (the terminal or the ssh session closed)
    with 129: `live -w` keeps what it captured, no .part file stays. A signal the parent set to be ignored stays
    ignored, as CPython does for SIGINT (a shell script's `roceview ... &` runs with SIGINT
    ignored: a Ctrl-C meant for the script's foreground job must not end it)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, on_sigint)


def on_sigint(signum=None, frame=None) -> None:
    if _state["deferred"]:
        _state["pending"] = 128 + (signum or signal.SIGINT)
        return
    _exit(128 + (signum or signal.SIGINT))


def _exit(code: int = EXIT_INTERRUPTED) -> None:
    for hook in list(_hooks):
        try:
            hook()
        except Exception:       # noqa: BLE001 - leaving now: nothing may stop the exit
            pass
    for path, kind in reversed(list(_registered.items())):
        try:
            if kind == "tree":          # a hidden folder still being filled (convert --partition-by)
                import shutil

                for _ in range(3):      # pyarrow's writer threads may still be adding files
                    shutil.rmtree(path, ignore_errors=True)
            else:
                os.rmdir(path) if kind == "dir" else os.unlink(path)
        except OSError:
            pass
    os._exit(code)


def remove_on_interrupt(path, kind: str = "file") -> None:
    _registered[os.fspath(path)] = kind


def forget(path) -> None:
    _registered.pop(os.fspath(path), None)


def on_interrupt(hook) -> None:
    _hooks.append(hook)


def drop_hook(hook) -> None:
    if hook in _hooks:
        _hooks.remove(hook)


@contextmanager
def deferred():
    """A Ctrl-C arriving inside takes effect when the block ends."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
        if not _state["deferred"] and _state["pending"]:
            _exit(_state["pending"])
