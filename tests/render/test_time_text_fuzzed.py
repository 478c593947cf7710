"""The column-wise time text (render/line_parts.time_parts, what dissect and the TUI print) equals
a plain per-value formatting for random times: any sign and size, 0 to 9 decimals mixed in one
block, every tshark -t format and -u hms; and a time literal reads back the ns that frame.time and
the relative fields print. Seeded (random.Random); ROCEVIEW_FUZZ_EXAMPLES sets the number of
blocks (default 40 in CI; a longer local run: ROCEVIEW_FUZZ_EXAMPLES=3000)."""
from __future__ import annotations

import datetime
import os
import random
import time

import numpy as np
import pytest

from roceview.packets.times import FORMATS, frame_time_text, parse_absolute, parse_relative, signed_seconds
from roceview.packets.times import TimeColumn
from roceview.render.line_parts import text_block, time_parts
from roceview.render.lines import time_texts

EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "40"))
_CLOCK = {"a": "%H:%M:%S", "ad": "%Y-%m-%d %H:%M:%S", "adoy": "%Y/%j %H:%M:%S", "u": "%H:%M:%S", "ud": "%Y-%m-%d %H:%M:%S"}


@pytest.fixture(autouse=True, params=["UTC", "America/St_Johns"])
def zone(request, monkeypatch):
    """A zone with a half-hour offset and summer time as well as UTC."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def expected(ns: int, places: int, fmt: str, hms: bool) -> str:
    """One time as tshark writes it, by datetime and integer arithmetic alone."""
    cut = lambda frac: f".{frac // 10 ** (9 - places):0{places}d}" if places else ""  # noqa: E731
    if fmt in _CLOCK:
        whole, frac = divmod(ns, 10 ** 9)
        zone = datetime.timezone.utc if fmt.startswith("u") else None
        moment = datetime.datetime.fromtimestamp(whole, zone)
        return moment.strftime(_CLOCK[fmt]) + cut(frac)
    whole, frac = divmod(abs(ns), 10 ** 9)
    if not hms or fmt == "e":
        return ("-" if ns < 0 else "") + str(whole) + cut(frac)
    h, m, s = whole // 3600, whole % 3600 // 60, whole % 60
    text = f"{h}h {m:2d}m {s:2d}" if h else f"{m}m {s:2d}" if m else str(s)
    return ("- " if ns < 0 else "") + text + cut(frac) + "s"


def _times(rng: random.Random, n: int, absolute: bool) -> list[int]:
    if absolute:      # 1970..2100: what time.localtime takes on every platform
        return [rng.randrange(0, 4_102_444_800 * 10 ** 9) for _ in range(n)]
    scale = rng.choice([10 ** 3, 10 ** 9, 10 ** 12, 10 ** 14, 2 ** 62])
    low = -scale if rng.random() < 0.5 else 0       # blocks without a negative time: the fast path
    return [rng.randrange(low, scale) for _ in range(n)]


def test_time_text_equals_a_per_value_formatting():
    rng = random.Random(20231114)
    failures = []
    for _ in range(EXAMPLES):
        fmt, hms = rng.choice(FORMATS), rng.random() < 0.5
        n = rng.randrange(1, 200)
        ns = _times(rng, n, fmt in _CLOCK)
        places = [rng.choice([6, 9, rng.randrange(0, 10)]) for _ in range(n)]
        values, digits = np.array(ns, np.int64), np.array(places, np.uint8)
        got = time_texts(TimeColumn(values, digits, fmt, hms))
        want = [expected(v, p, fmt, hms) for v, p in zip(ns, places)]
        # as a line's column: right-aligned in 12, no gap inside (shorter fractions beside longer ones)
        column = text_block(time_parts(values, digits, fmt, hms, 12)).decode().split("\n")[:-1]
        got = [g if c == w.rjust(12) else c for g, c, w in zip(got, column, want)]
        failures += [(fmt, hms, v, p, g, w) for v, p, g, w in zip(ns, places, got, want) if g != w]
    assert not failures, failures[:5]


def test_printed_times_read_back_as_literals():
    rng = random.Random(7)
    for _ in range(EXAMPLES * 10):
        ns = rng.randrange(0, 4_102_444_800 * 10 ** 9)
        assert parse_absolute(frame_time_text(ns)) == ns, frame_time_text(ns)
        rel = rng.randrange(-10 ** 14, 10 ** 14)
        assert parse_relative(signed_seconds(rel)) == rel
