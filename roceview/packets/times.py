"""Packet times as tshark shows them: each packet's precision, the `-t`/`-u` formats, the
`frame.time*` values and their literals.

A capture says how precise its timestamps are (a pcap's magic: µs or ns; a pcapng interface's
if_tsresol), and tshark prints every time of a packet with that many decimals: 9 on a ns capture
(`0.000010112`), 6 on a µs one. The readers carry it per record (capture/records.py
`RecordChunk.digits`) and the decode keeps it as the Batch column `_ts_digits`; a Batch without
it (a Parquet table, a test's hand-made batch) shows 6, as roceview always did.

`Clock` carries what tshark's relative fields need across batches: the first packet's time
(`frame.time_relative`, `-t r`), the previous captured one (`frame.time_delta`, `-t d`) and the
previous displayed one (`frame.time_delta_displayed`, `-t dd`). It adds them as helper columns
(`_ts_rel`, `_ts_delta`, `_ts_delta_displayed`, int64 ns) that the display filter and
`-T fields` read (filter/field_names.py).
"""
from __future__ import annotations

import calendar
import datetime
import re
import time

import numpy as np

FORMATS = ("r", "a", "ad", "adoy", "d", "dd", "e", "u", "ud")     # tshark -t
FORMAT_NAMES = {"r": "relative", "a": "absolute", "ad": "absolute with date", "adoy": "absolute with day of year",
                "d": "delta", "dd": "delta displayed", "e": "epoch", "u": "UTC", "ud": "UTC with date"}
SECONDS_FORMATS = ("s", "hms")                                      # tshark -u
DIGITS_COLUMN = "_ts_digits"
DEFAULT_DIGITS = 6          # a batch that does not say: microseconds, as tshark shows a pcap
NS = 1_000_000_000
REL, DELTA, DELTA_DISPLAYED = "_ts_rel", "_ts_delta", "_ts_delta_displayed"
_STRFTIME = {"a": "%H:%M:%S", "ad": "%Y-%m-%d %H:%M:%S", "adoy": "%Y/%j %H:%M:%S",
             "u": "%H:%M:%S", "ud": "%Y-%m-%d %H:%M:%S"}
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def digits_of(batch) -> np.ndarray:
    """The decimals each row's time is shown with (uint8)."""
    digits = batch.cols.get(DIGITS_COLUMN)
    return np.full(batch.n, DEFAULT_DIGITS, np.uint8) if digits is None else digits


class Clock:
    """The reference times of the relative formats, carried from batch to batch in reading order."""

    def __init__(self):
        self.first: int | None = None
        self.previous: int | None = None        # the last packet read
        self.shown: int | None = None           # the last packet displayed

    def stamp(self, batch) -> None:
        """Add `_ts_rel` and `_ts_delta` to a batch just read (before any filter)."""
        ts = batch.cols["ts_ns"].astype(np.int64, copy=False)
        if not batch.n:
            batch.cols[REL] = batch.cols[DELTA] = np.zeros(0, np.int64)
            return
        if self.first is None:
            self.first = self.previous = int(ts[0])
        before = np.empty_like(ts)
        before[0], before[1:] = self.previous, ts[:-1]
        batch.cols[REL], batch.cols[DELTA] = ts - self.first, ts - before
        self.previous = int(ts[-1])

    def display(self, batch) -> None:
        """Add `_ts_delta_displayed` to the rows shown (after the filter): the time since the
        previous row shown, 0 on the first (tshark's frame.time_delta_displayed)."""
        ts = batch.cols["ts_ns"].astype(np.int64, copy=False)
        batch.cols[DELTA_DISPLAYED] = self.deltas_shown(ts)
        if batch.n:
            self.shown = int(ts[-1])

    def deltas_shown(self, ts: np.ndarray) -> np.ndarray:
        before = np.empty_like(ts)
        if len(ts):
            before[0] = ts[0] if self.shown is None else self.shown
            before[1:] = ts[:-1]
        return ts - before

    def values(self, fmt: str, batch) -> np.ndarray:
        """The ns each row shows in format `fmt` (after stamp and display)."""
        name = {"r": REL, "d": DELTA, "dd": DELTA_DISPLAYED}.get(fmt, "ts_ns")
        return batch.cols[name].astype(np.int64, copy=False)


def filter_mask(display, batch, clock: Clock) -> np.ndarray:
    """display.mask(batch) where the filter may read frame.time_delta_displayed: tshark gives a
    packet the time since the last packet that PASSED the filter (0 before any did), so a row's
    value depends on the rows before it. Windows of rows are evaluated assuming none of them
    passes; up to the first that does, that assumption held; then on from the row after it."""
    if DELTA_DISPLAYED not in getattr(display, "fields", ()):     # (a caller's own mask-only filter)
        return display.mask(batch)
    ts = batch.cols["ts_ns"].astype(np.int64, copy=False)
    keep, shown, lo, window = np.zeros(batch.n, bool), clock.shown, 0, 64
    while lo < batch.n:
        rows = np.arange(lo, min(batch.n, lo + window))
        part = batch.select(rows)
        part.cols[DELTA_DISPLAYED] = ts[rows] - shown if shown is not None else np.zeros(len(rows), np.int64)
        hits = np.flatnonzero(display.mask(part))
        if not len(hits):
            lo, window = rows[-1] + 1, window * 2
            continue
        at = int(rows[hits[0]])
        keep[at], shown, lo, window = True, int(ts[at]), at + 1, 64
    return keep


def signed_seconds(ns: int, digits: int = 9, hms: bool = False) -> str:
    """One relative time as tshark writes it: `-1.000000500`, or with -u hms `1h  1m 39.999999505s`."""
    sign, a = ("-" if ns < 0 else ""), abs(int(ns))
    whole, frac = divmod(a, NS)
    tail = f".{frac // 10 ** (9 - digits):0{digits}d}" if digits else ""
    if not hms:
        return f"{sign}{whole}{tail}"
    return f"{'- ' if sign else ''}{hms_whole(whole)}{tail}s"


def hms_whole(whole: int) -> str:
    """The whole seconds of tshark's -u hms: `1h  1m 39`, `1m  0`, `9` (hours never become days)."""
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h {m:2d}m {s:2d}"
    return f"{m}m {s:2d}" if m else str(s)


def clock_text(whole: int, fmt: str) -> str:
    """The date and time of day of an absolute format (local time for a/ad/adoy, as tshark: TZ)."""
    t = time.gmtime(whole) if fmt.startswith("u") else time.localtime(whole)
    return time.strftime(_STRFTIME[fmt], t)


def frame_time_text(ns: int) -> str:
    """frame.time as tshark -T fields prints it: `Nov  5, 2023 22:13:20.000000500 UTC` (local time)."""
    whole, frac = divmod(int(ns), NS)
    t = time.localtime(whole)
    return (f"{_MONTHS[t.tm_mon - 1]} {t.tm_mday:2d}, {t.tm_year} {t.tm_hour:02d}:{t.tm_min:02d}:"
            f"{t.tm_sec:02d}.{frac:09d} {time.strftime('%Z', t)}")


_REL = re.compile(r"^(-?)([0-9]+)(?:\.([0-9]{0,9}))?$")
_ISO = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{0,9}))?)?)?"
                  r"(Z| UTC)?$")
_ZONE = re.compile(r"^(.*\S) +([A-Z+-][A-Za-z0-9+-]{1,9})$")   # a trailing zone name (not a month: no comma after)
_US = re.compile(r"^([A-Z][a-z]{2}) +([0-9]{1,2}), +([0-9]{4})(?: +([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})"
                 r"(?:\.([0-9]{0,9}))?)?)?( UTC)?$")


def parse_relative(text: str) -> int | None:
    """ns of a relative-time literal as tshark reads one (`1`, `-0.5`, `0.000000098`: at most 9
    decimals, no exponent, no hex); None when it is not one."""
    m = _REL.match(text.strip())
    if not m:
        return None
    ns = int(m.group(2)) * NS + int((m.group(3) or "").ljust(9, "0") or 0)
    return -ns if m.group(1) else ns


def parse_absolute(text: str) -> int | None:
    """ns since the epoch of an absolute-time literal as tshark reads one: `Nov 14, 2023
    22:13:20.5`, `2023-11-14 22:13:20`, `2023-11-14T22:13:20Z`, `2023-11-14`; local time unless
    it ends in `Z` or ` UTC`; or ending in the local zone's name, as frame.time prints it (`EST`,
    `EDT`: which of a repeated hour). None when it is not one."""
    text, zone = text.strip(), None
    m = _ZONE.match(text)
    if m and m.group(2) != "UTC":
        text, zone = m.group(1), m.group(2)
    m = _ISO.match(text) or _US.match(text)
    if m is None:
        return None
    if m.re is _US:
        if m.group(1) not in _MONTHS:
            return None
        year, month, day = int(m.group(3)), _MONTHS.index(m.group(1)) + 1, int(m.group(2))
    else:
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    hour, minute, sec = (int(m.group(k) or 0) for k in (4, 5, 6))
    fields = (year, month, day, hour, minute, sec)
    try:
        datetime.datetime(year, month, day, hour, minute, min(sec, 59))     # refuses Nov 31, hour 24
        whole = calendar.timegm(fields + (0, 0, 0)) if m.group(8) else _local_seconds(fields, zone)
    except (OverflowError, ValueError):
        return None
    return None if whole is None else whole * NS + int((m.group(7) or "").ljust(9, "0") or 0)


def _local_seconds(fields: tuple, zone: str | None) -> int | None:
    """Seconds since the epoch of a local date and time; with a zone name, the reading of it
    (standard or summer time) that the local zone names so (None: it names neither)."""
    if zone is None:
        return int(time.mktime(fields + (0, 0, -1)))
    for dst in (0, 1, -1):
        whole = int(time.mktime(fields + (0, 0, dst)))
        local = time.localtime(whole)
        if tuple(local)[:6] == fields and time.strftime("%Z", local) == zone:
            return whole
    return None


class TimeColumn:
    """What a line's time column shows, row by row: the ns of the format (relative, delta or
    epoch), each row's decimals, the format and -u hms."""

    def __init__(self, values: np.ndarray, digits: np.ndarray, fmt: str = "r", hms: bool = False):
        self.values, self.digits, self.fmt, self.hms = values, digits, fmt, hms

    @classmethod
    def of(cls, batch, clock: Clock, fmt: str = "r", hms: bool = False) -> "TimeColumn":
        """The column of a batch stamped (and displayed) by `clock`."""
        return cls(clock.values(fmt, batch), digits_of(batch), fmt, hms)

    def rows(self, at) -> "TimeColumn":
        return TimeColumn(self.values[at], self.digits[at], self.fmt, self.hms)
