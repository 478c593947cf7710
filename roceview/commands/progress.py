"""A progress bar on stderr for work that takes a while (`analyze`, `convert`, `generate`).

Only on a terminal and only once the work has run for DELAY_S: a capture read in a second shows
nothing and never imports rich (~30 ms). Off a terminal `advance` adds two integers and returns,
so the benchmarks' path (stderr a file or a pipe) pays nothing for it. The bar is rich's: bytes
read of the input's size, packets a second, time left; with no size to compare to (gzip, stdin,
`generate`) bytes and rate only. A timer thread draws it, so it also appears while the main
thread is busy in one long step: numba compiling the decode kernels the first time, or the
generator building its frames.
"""
from __future__ import annotations

import os
import threading
import time

from roceview import interrupt

DELAY_S = 2.0                 # ROCEVIEW_PROGRESS_DELAY=seconds overrides it (the tests show the bar at once)
RECORD_OVERHEAD = 16          # bytes of a pcap record header; a pcapng EPB has 28 plus padding
GZIP_MAGIC = b"\x1f\x8b"


class Progress:
    def __init__(self, stream, description: str, total_bytes: int | None = None, delay: float | None = None,
                 counts: bool = True):
        self.stream, self.description, self.total = stream, description, total_bytes or None
        self.counts = counts            # False: a spinner and the time so far (no bytes to count)
        self.active = hasattr(stream, "isatty") and stream.isatty()
        self.packets = self.bytes = 0
        if delay is None:
            delay = float(os.environ.get("ROCEVIEW_PROGRESS_DELAY", DELAY_S))
        self.delay, self.start = delay, time.monotonic()
        self.bar = self.task = self.timer = None
        self.lock = threading.Lock()

    def __enter__(self):
        if self.active:
            self.timer = threading.Timer(self.delay, self._show)
            self.timer.daemon = True
            self.timer.start()
        return self

    def advance(self, packets: int, nbytes: int = 0) -> None:
        self.packets += packets
        self.bytes += nbytes
        if self.bar is not None:
            self._update()

    def describe(self, description: str) -> None:
        """A new step of the work (`generate`: building the frames, then writing them)."""
        self.description = description
        if self.bar is not None:
            self._update()

    def warn(self, message: str) -> None:
        """A warning line above the bar (or alone when there is none)."""
        line = f"roceview: warning: {message}"
        with self.lock:
            if self.bar is not None:
                self.bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
                return
        print(line, file=self.stream)

    def __exit__(self, *exc):
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            self.active = False
            if self.bar is not None:
                self.bar.stop()         # transient: the bar is erased
                self.bar = None
                interrupt.drop_hook(self._restore_terminal)
        return False

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress as Bar, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        columns = [SpinnerColumn(), TextColumn("{task.description}")]
        if self.counts:
            columns += [BarColumn(), DownloadColumn(), TextColumn("{task.fields[rate]}")]
        columns.append(TimeRemainingColumn() if self.total else TimeElapsedColumn())
        with self.lock:
            if not self.active:
                return
            bar = Bar(*columns, console=Console(file=self.stream), transient=True, refresh_per_second=5)
            self.task = bar.add_task(self._description(), total=self.total, rate="")
            bar.start()
            self.bar = bar
            interrupt.on_interrupt(self._restore_terminal)
        self._update()

    def _restore_terminal(self) -> None:
        """Ctrl-C ends the process at once (roceview.interrupt): show the cursor rich hid."""
        self.stream.write("\r\x1b[2K\x1b[?25h")
        self.stream.flush()

    def _description(self) -> str:
        if not self.packets and _numba_backend():
            return "compiling decode kernels, once, ~30 s"
        return self.description

    def _update(self) -> None:
        with self.lock:
            if self.bar is None:
                return
            seconds = max(time.monotonic() - self.start, 1e-9)
            done = self.bytes if self.total is None else min(self.bytes, self.total)
            self.bar.update(self.task, completed=done, description=self._description(),
                            rate=f"{self.packets / seconds:,.0f} pkt/s" if self.packets else "")


def _numba_backend() -> bool:
    import sys

    kernels = sys.modules.get("roceview.kernels.backend")
    return kernels is not None and getattr(kernels, "BACKEND", "") == "numba"


def record_bytes(cap_len) -> int:
    """The file bytes of a chunk's records, estimated from their captured lengths."""
    return int(cap_len.sum()) + RECORD_OVERHEAD * len(cap_len)


def input_bytes(paths) -> int | None:
    """The total size of the input files; None when it says nothing of the bytes to decode
    (stdin, a gzip file)."""
    total = 0
    for path in paths:
        path = os.fspath(path)
        if path == "-":
            return None
        try:
            if os.path.isdir(path):
                entries = [e.path for e in os.scandir(path) if e.is_file()]
            else:
                entries = [path]
            for entry in entries:
                with open(entry, "rb") as fh:
                    if fh.read(2) == GZIP_MAGIC:
                        return None
                total += os.path.getsize(entry)
        except OSError:
            return None               # reported as bad input when it is read
    return total
