"""`roceview tui` on a large capture: first paint, key latency while loading, peak RSS.

    python benchmarks/make_capture.py /tmp/10m.pcap --packets 10000000 --snaplen 128
    python benchmarks/bench_tui.py /tmp/10m.pcap [--keys 20]

Each run is a fresh process (peak RSS is the process's own, getrusage ru_maxrss). Measured
with Textual's Pilot at 80x24 (the terminal driver is headless; rendering is the same work):
  imports       process start -> textual and roceview.tui imported
  first paint   process start -> the overview composed and painted (run_test's first yield)
  key latency   keys pressed while the loader runs (CYCLE): the time from the key sent to the
                app having handled it (_handled: the new screen mounted, the sort or cursor
                moved; drawn at the next refresh), median and worst, apart for keys that switch
                screens (1-4) and keys within a screen (s, down, pagedown); and how many of
                them happened while still loading
  keys          each key: its ms, L when pressed while loading
  load          until the final snapshot (findings included) is on screen
  packets page  '3' then 'pagedown' at the end of the load: a page of the virtual list
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


async def _handled(app, pilot, key: str) -> float:
    """Seconds from the key sent until the app handled it: the new screen mounted (1-4), the
    sort or the cursor changed. (Not pilot.press + pause: they wait for the process to look
    idle, up to a second each, which it never does while the loader thread works.)"""
    before = _state(app)
    t0 = time.monotonic()
    task = asyncio.create_task(pilot.press(key))
    while _state(app) == before or not app.screen.is_mounted:
        await asyncio.sleep(0.002)
        if time.monotonic() - t0 > 30:
            break
    took = time.monotonic() - t0
    await task
    return took


CYCLE = ("2", "s", "down", "3", "down", "pagedown", "4", "1")   # screen keys and keys within one


async def bench(path: str, keys: int) -> dict:
    from roceview.tui import make_app
    from roceview.tui.app import RoceviewApp  # noqa: F401  (imported by make_app: timed here)

    out: dict = {"file": path, "imports_s": round(time.monotonic() - START, 3)}
    app = make_app([path], title="bench")
    sys.setswitchinterval(0.001)             # as run_app sets it
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        out["first_paint_s"] = round(time.monotonic() - START, 3)
        switch, move, while_loading = [], [], 0
        for k in range(keys):
            key = CYCLE[k % len(CYCLE)]
            loading = not (app.snapshot is not None and app.snapshot.done)
            took = await _handled(app, pilot, key)
            (switch if key in "1234" else move).append(took)
            while_loading += loading
            out.setdefault("keys", []).append(f"{key}:{1000 * took:.0f}{'L' if loading else ''}")
            await asyncio.sleep(0.05)
        for name, values in (("screen_key", switch), ("in_screen_key", move)):
            out[f"{name}_ms_median"] = round(1000 * statistics.median(values), 1)
            out[f"{name}_ms_max"] = round(1000 * max(values), 1)
        out["keys_while_loading"] = while_loading
        while not (app.snapshot is not None and app.snapshot.done):
            await asyncio.sleep(0.05)
        await pilot.pause()
        out["loaded_s"] = round(time.monotonic() - START, 3)
        out["loader_s"] = round(app.snapshot.elapsed, 3)
        out["packets"] = app.snapshot.packets
        t0 = time.monotonic()
        await pilot.press("3", "pagedown", "pagedown")
        await pilot.pause()
        out["packets_page_ms"] = round(1000 * (time.monotonic() - t0), 1)
        await pilot.press("q")
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--keys", type=int, default=32, help="key presses while loading (default 20)")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(bench(args.capture, args.keys))))


if __name__ == "__main__":
    main()
