"""roceview's terminal UI (Textual): `roceview tui CAPTURE...` and `roceview live` open it.

    from roceview.tui import run_app, Options

    run_app(source, *, title: str, options: Options | None = None,
            live_stats: Callable[[], dict] | None = None, light: bool = False) -> int

`source`: capture paths (a path, a list of paths, a directory, '-'), or any iterable of
`roceview.packets.batch.Batch` (a live stream; items may also be `(RecordChunk, Batch)` pairs, and
then the packet tree and hex of the kept packets are shown). Paths read through a memory map
are listed from a frame -> (file, offset) index and decoded again when shown; a stream keeps a
bounded ring of its most recent batches (index.RING_PACKETS, stated on the packets screen).
`options`: roceview.tui.loader.Options (pmtu, link_speed, bucket_ms, roce_ports, config,
fail_on). `live_stats`: called on every snapshot (a few times a second, on the loader thread);
its dict (e.g. {"kernel drops": 0, "our drops": 0}) is shown in the overview.
Returns the exit status: 0, or 3 with options.fail_on when a finding is that severe (as
`roceview analyze --fail-on`). On quit the loader is told to stop (it checks between batches:
a live source should end its iterator when its capture stops; if it has a `stop()`, that is
called, so a source blocked waiting for a packet ends). A source with an `analysis`
(roceview.api.Analysis's interface: analyzer with packet_flags, facts, feed, finish; `roceview
live`'s session) is not analyzed again: the loader feeds each batch to it. To keep the last snapshot (its
`result` for --csv/--json), use `app = make_app(...)`, `app.run()`, then `app.snapshot` and
`app.return_code`.

The analysis runs on a worker thread (loader.Loader) and posts immutable snapshots
(Analyzer.snapshot(), then finish()); the screens only render them.
"""
from __future__ import annotations

from typing import Callable

from roceview.tui.loader import Loader, Options


def make_app(source, *, title: str = "roceview", options: Options | None = None,
             live_stats: Callable[[], dict] | None = None, light: bool = False, start: bool = True):
    """The app without running it (tests drive it with Pilot)."""
    from roceview.tui.app import RoceviewApp

    return RoceviewApp(Loader(source, options, live_stats), title=title, light=light, start=start)


def run_app(source, *, title: str, options: Options | None = None,
            live_stats: Callable[[], dict] | None = None, light: bool = False) -> int:
    import sys

    app = make_app(source, title=title, options=options, live_stats=live_stats, light=light)
    sys.setswitchinterval(0.001)   # the UI thread waits at most 1 ms for the loader's GIL (default 5)
    app.run()
    app.loader.request_stop()
    return int(app.return_code or 0)


__all__ = ["Loader", "Options", "make_app", "run_app"]
