"""A hang fails the test instead of freezing CI: SIGALRM after `seconds` (main thread, POSIX)."""
from __future__ import annotations

import signal
from contextlib import contextmanager


@contextmanager
def deadline(seconds: int, what: str = "the step"):
    def expired(*_):
        raise TimeoutError(f"{what} did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
