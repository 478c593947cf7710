"""`roceview tui` on a large capture: first paint, key latency while loading, peak RSS.

    python benchmarks/make_capture.py /tmp/10m.pcap --packets 10000000 --snaplen 128
    python benchmarks/bench_tui.py /tmp/10m.pcap [--keys 32] [--tmux]

Each run is a fresh process (peak RSS is the process's own, getrusage ru_maxrss). Measured
with Textual's Pilot at 80x24 (the terminal driver is headless; rendering is the same work):
  imports       process start -> textual and roceview.tui imported
  first paint   process start -> the first frame of the overview written out (Textual's
                App._display with a screen update: the frame a terminal would show, with
                "loading..." and the progress bar; the loader thread has started by then)
  idle          process start -> Pilot's first pause() returned (the app's message queue
                drained once; with the loader posting snapshots this is later than the
                frame a user sees, and was misreported as "first paint" before)
  key latency   keys pressed from the first frame on, 20 ms apart, while the loader runs
                (CYCLE): the time from the key sent to the app having handled it (_handled:
                the new screen mounted, the sort or cursor moved; drawn at the next refresh),
                median and worst of those pressed while loading, apart for keys that switch
                screens (1-4) and keys within a screen (s, down, pagedown); then the same
                keys again after the load. A down or pagedown on a list with no rows yet is
                sent but not timed: nothing changes until rows arrive, so its "latency" was
                the wait for the first snapshot
  keys          each key: its ms, L when pressed while loading
  load          until the final snapshot (findings included) is on screen
  packets page  '3' then 'pagedown' at the end of the load: a page of the virtual list
--tmux: also the real terminal: `python -m roceview tui FILE` started in tmux (its own server,
  80x24), capture-pane polled every 5 ms: seconds from the spawn to the overview's title and
  "loading" or the summary appearing on the screen (includes the interpreter's start-up).
Targets (issue 18): first paint < 1 s, key < 100 ms while loading, peak RSS <= 1 GiB.
"""
from __future__ import annotations

import time

START = time.monotonic()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _state(app) -> tuple:
    screen = app.screen
    focused = app.focused
    row = focused.current_row() if hasattr(focused, "current_row") else None   # the cursor follows its row
    return (app.current_mode, id(screen), getattr(screen, "sort", None), getattr(focused, "cursor", None),
            None if row is None else int(row), getattr(focused, "cursor_coordinate", None))


def _send(app, key: str) -> None:
    """The key as the terminal driver delivers it (as Pilot does, without Pilot's waiting for
    the process to look idle afterwards: up to a second per key while the loader works)."""
    from textual import events

    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    app._driver.send_message(event)


async def _handled(app, key: str) -> float:
    """Seconds from the key sent until the app handled it: the new screen mounted (1-4), the
    sort or the cursor changed; 30 s if nothing changed."""
    before = _state(app)
    t0 = time.monotonic()
    _send(app, key)
    while _state(app) == before or not app.screen.is_mounted:
        await asyncio.sleep(0.001)
        if time.monotonic() - t0 > 30:
            break
    return time.monotonic() - t0


CYCLE = ("2", "s", "down", "3", "down", "pagedown", "4", "1")   # screen keys and keys within one


def _first_frame_hook() -> list:
    """Record when Textual first writes a frame (App._display with a renderable)."""
    import textual.app

    seen: list = []
    display = textual.app.App._display

    def _display(self, screen, renderable):
        if renderable is not None and not seen:
            seen.append((time.monotonic() - START, type(screen).__name__))
        return display(self, screen, renderable)

    textual.app.App._display = _display
    return seen


def _loading(app) -> bool:
    return not (app.snapshot is not None and app.snapshot.done)


async def _press_keys(app, keys: int, gap: float, only_loading: bool) -> list:
    """(key, seconds, pressed while loading) for up to `keys` keys of CYCLE, from its start
    (each CYCLE leaves the app on the overview, where it began)."""
    done = []
    for k in range(keys):
        loading = _loading(app)
        if only_loading and not loading:
            break
        key = CYCLE[k % len(CYCLE)]
        rows = getattr(app.focused, "rows", None)
        if key in ("down", "pagedown") and rows is not None and len(rows) < 2:
            _send(app, key)              # nothing to move yet: handled at once, no change to wait for
            await asyncio.sleep(gap)
            continue
        done.append((key, await _handled(app, key), loading))
        await asyncio.sleep(gap)
    return done


def _summarise(out: dict, name: str, pressed: list) -> None:
    for kind, keys in (("screen_key", "1234"), ("in_screen_key", None)):
        values = [t for key, t, _ in pressed if (key in "1234") == (keys is not None)]
        if values:
            out[f"{name}_{kind}_ms_median"] = round(1000 * statistics.median(values), 1)
            out[f"{name}_{kind}_ms_max"] = round(1000 * max(values), 1)


async def bench(path: str, keys: int) -> dict:
    seen = _first_frame_hook()
    from roceview.tui import make_app
    from roceview.tui.app import RoceviewApp  # noqa: F401  (imported by make_app: timed here)

    out: dict = {"file": path, "imports_s": round(time.monotonic() - START, 3)}
    app = make_app([path], title="bench")
    sys.setswitchinterval(0.001)             # as run_app sets it
    async with app.run_test(size=(80, 24)) as pilot:
        while not seen:
            await asyncio.sleep(0.001)
        out["first_paint_s"] = round(seen[0][0], 3)
        out["first_paint_screen"] = seen[0][1]
        await asyncio.sleep(0.05)            # the screen's on_mount; the loader thread is started
        loading = await _press_keys(app, keys, 0.02, only_loading=True)
        if app.current_mode != "overview" or len(app.screen_stack) > 1:   # back to where CYCLE starts
            await _handled(app, "1")
        out["keys_while_loading"] = len([k for k in loading if k[2]])
        _summarise(out, "loading", [k for k in loading if k[2]])
        while _loading(app):
            await asyncio.sleep(0.05)
        await pilot.pause()
        out["loaded_s"] = round(time.monotonic() - START, 3)
        out["loader_s"] = round(app.snapshot.elapsed, 3)
        out["packets"] = app.snapshot.packets
        idle = await _press_keys(app, len(CYCLE), 0.02, only_loading=False)
        _summarise(out, "loaded", idle)
        out["keys"] = [f"{key}:{1000 * t:.0f}{'L' if was else ''}" for key, t, was in loading + idle]
        t0 = time.monotonic()
        await pilot.press("3", "pagedown", "pagedown")
        await pilot.pause()
        out["packets_page_ms"] = round(1000 * (time.monotonic() - t0), 1)
        await pilot.press("q")
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def tmux_first_paint(path: str) -> float:
    """Seconds from spawning `python -m roceview tui path` in a fresh 80x24 tmux server until the
    overview (its title and "loading" or a packet count) is on the terminal."""
    import shlex
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        base = ["tmux", "-S", str(Path(tmp) / "sock"), "-f", "/dev/null"]
        cmd = f"cd {shlex.quote(str(root))} && {shlex.quote(sys.executable)} -m roceview tui {shlex.quote(path)}"
        try:
            t0 = time.monotonic()
            subprocess.run(base + ["new-session", "-d", "-s", "b", "-x", "80", "-y", "24",
                                   "-e", "TERM=xterm-256color", cmd], check=True)
            while time.monotonic() - t0 < 60:
                screen = subprocess.run(base + ["capture-pane", "-p", "-t", "b"], capture_output=True,
                                        text=True).stdout
                if "1 Overview" in screen and ("loading" in screen or "packets" in screen):
                    return round(time.monotonic() - t0, 3)
                time.sleep(0.005)
            raise SystemExit(f"the overview never appeared; the screen:\n{screen}")
        finally:
            subprocess.run(base + ["kill-server"], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--keys", type=int, default=32, help="most key presses while loading (default 32)")
    ap.add_argument("--tmux", action="store_true", help="also time the first paint in a real terminal")
    args = ap.parse_args()
    out = asyncio.run(bench(args.capture, args.keys))
    if args.tmux:
        out["tmux_first_paint_s"] = tmux_first_paint(args.capture)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
