"""The PFC screen's timeline (no Textual): per pausing (source MAC, priority), most paused first,
the share of each column's time its pause was in effect (the diagnoser's PFC timeline binned into
the width), and under them on the same time axis the CE marks and the retransmitted packets of
all RoCE traffic (timeline.csv): where the pauses, the marks and the loss fall against each other.
"""
from __future__ import annotations

import numpy as np
from rich.text import Text

from roceview.render.report import capture_span
from roceview.tui import timebars
from roceview.units import plural

LABEL = 23                                   # "0e:c0:de:00:00:11 all " and the marks' names
MARKS = (("ecn_ce", "CE marks, all RoCE", "yellow"), ("retransmitted_packets", "retransmits, all RoCE", "magenta"))


def timeline_text(result, pfc_timeline, width: int, rows: int) -> Text:
    """The timeline `width` columns wide with at most `rows` (source MAC, priority) rows;
    pfc_timeline: the diagnoser's table, None before the first diagnosis."""
    span = capture_span(result.summary)
    bucket = timebars.bucket_ns(result.summary)
    out = Text(f"PFC timeline, {_ms(bucket)} buckets: share of each column paused (█ all of it)\n", style="bold")
    bar_width = max(width - LABEL, 10)
    if span is None:
        return out
    t0, t1 = span
    if pfc_timeline is None and len(result.pfc_table):
        out.append("(the pauses are drawn once the findings are made)\n")
    elif pfc_timeline is not None:
        _pause_rows(out, result.pfc_table, pfc_timeline, (t0, t1, bar_width), bucket, rows)
    timeline = result.timeline_table.data
    for column, label, style in MARKS:
        values = np.asarray(timeline[column], dtype=np.float64)
        marked = np.flatnonzero(values)               # few: CE marks and resends are rare
        cols = timebars.spread(np.asarray(timeline["bucket_start"])[marked], values[marked], bucket, t0, t1, bar_width)
        out.append(f"{label:<{LABEL}}")
        out.append(timebars.count_bar(cols) if cols.any() else "(none)" + " " * (bar_width - 6), style=style)
        out.append("\n")
    out.append(" " * LABEL + timebars.axis(t0, t1, bar_width, t0))
    if bucket >= t1 - t0:
        out.append("\none bucket holds the whole capture: `roceview tui --bucket MS` draws it finer", style="dim")
    return out


def _pause_rows(out: Text, pfc, pfc_timeline, axis: tuple[int, int, int], bucket: int, rows: int) -> None:
    """One row per (source MAC, priority) of pfc.csv with pause frames, most paused first."""
    t0, t1, width = axis
    d, t = pfc.data, pfc_timeline.data
    paused = np.asarray(d["paused_us"], dtype=np.float64)
    keys = [i for i in np.argsort(-paused, kind="stable").tolist() if d["pause_frames"][i] > 0]
    per_column = timebars.column_ns(t0, t1, width)
    for i in keys[:rows]:
        mac, prio = d["src_mac"][i], d["priority"][i]
        mine = np.intersect1d(timebars.rows_of(t["src_mac"], mac), timebars.rows_of(t["priority"], prio))
        ns = timebars.spread(np.asarray(t["bucket_start"])[mine], np.asarray(t["paused_us"])[mine] * 1000.0,
                             bucket, t0, t1, width)
        out.append(f"{mac} {'all' if prio == 'all' else 'p' + prio:<{LABEL - len(mac) - 1}}")
        out.append(timebars.share_bar(ns / per_column), style="red")
        out.append("\n")
    if len(keys) > rows:
        out.append(f"… {plural(len(keys) - rows, 'more (source MAC, priority) pair')} in the table above\n",
                   style="dim")


def _ms(ns: int) -> str:
    """A bucket length as `--bucket` takes it: '1 ms', '0.005 ms'."""
    return f"{ns / 1e6:g} ms"
