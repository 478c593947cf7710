"""The QP detail's rate plot (no Textual): the QP's sending rate over its timeline buckets
(timeline.csv's bytes of its flow, spread over the width: Gb/s per column), under it on the same
time axis a mark at each CNP it received (cc.csv's rows of the flow) and its CE marks, then its
DCQCN reaction numbers (qps.csv's cnp_reaction_us_p50, rate_cut_pct_p50, recovery_us_p50,
cnps_ignored). The axis spans the QP and its peer, labelled in seconds since the first packet.
"""
from __future__ import annotations

import math

import numpy as np
from rich.text import Text

from roceview.render.report import capture_span
from roceview.tui import timebars
from roceview.units import duration, gbps, plural

HEIGHT = 4            # rows of the plot
LABEL = 4             # "CNP ", "CE  "
CNP_MARK = "▲"


def rate_text(result, rows: list[int], width: int) -> Text:
    """The plot of flow rows[0] (rows[1:]: its peer, whose span the axis covers too), `width`
    columns wide labels included."""
    flows = result.flows_table.data
    name = flows["flow"][rows[0]]
    t0 = min(int(flows["first_ts"][r]) for r in rows)
    t1 = max(int(flows["last_ts"][r]) for r in rows)
    start = (capture_span(result.summary) or (t0, t1))[0]
    bucket, w = timebars.bucket_ns(result.summary), max(width - LABEL, 10)
    timeline = result.timeline_table.data
    mine = timebars.rows_of(timeline["flow"], name)
    starts = np.asarray(timeline["bucket_start"])[mine]
    rate = timebars.spread(starts, np.asarray(timeline["bytes"], dtype=np.float64)[mine] * 8.0, bucket, t0, t1, w)
    rate /= timebars.column_ns(t0, t1, w)                 # bits per ns: Gb/s
    top = float(rate.max()) if len(rate) else 0.0
    head, more = f"rate Gb/s (top {gbps(top)})", f", {bucket / 1e6:g} ms buckets"
    out = Text(head + (more if len(head + more) <= width else "") + "\n", style="bold")
    for line in timebars.plot(rate, HEIGHT):
        out.append(" " * LABEL)
        out.append(line, style="green")
        out.append("\n")
    cc = result.cc_table.data
    cnp_ts = np.asarray(cc["cnp_ts"])[timebars.rows_of(cc["flow"], name)]
    ce = timebars.spread(starts, np.asarray(timeline["ecn_ce"], dtype=np.float64)[mine], bucket, t0, t1, w)
    _marks(out, "CNP", timebars.ticks(cnp_ts, t0, t1, w, CNP_MARK) if len(cnp_ts) else "", "bold red")
    _marks(out, "CE", timebars.count_bar(ce) if ce.any() else "", "yellow")
    out.append(" " * LABEL + timebars.axis(t0, t1, w, start) + "\n")
    out.append(reaction_line(flows, rows[0], len(cnp_ts)), style="dim" if not len(cnp_ts) else "")
    if bucket >= t1 - t0:
        out.append("\none bucket: --bucket MS for finer", style="dim")
    return out


def _marks(out: Text, label: str, row: str, style: str) -> None:
    out.append(f"{label:<{LABEL}}")
    out.append(row or "(none)", style=style)
    out.append("\n")


def reaction_line(flows: dict, row: int, cc_rows: int) -> str:
    """The QP's DCQCN reaction in one line, under qps.csv's names."""
    received = int(flows["cnps_received"][row]) if "cnps_received" in flows else cc_rows
    if not received:
        return "no CNP reached this QP"
    judged, ignored = int(flows["cnps_judged"][row]), int(flows["cnps_ignored"][row])
    cut = flows["rate_cut_pct_p50"][row]
    parts = [f"{plural(received, 'CNP')}: reaction p50 {_us(flows, 'cnp_reaction_us_p50', row)}",
             f"cut p50 {'-' if cut is None or math.isnan(float(cut)) else f'{float(cut):.1f} %'}",
             f"recovery p50 {_us(flows, 'recovery_us_p50', row)}", f"ignored {ignored} of {judged} judged"]
    return ", ".join(parts)


def _us(flows: dict, column: str, row: int) -> str:
    """A median in µs as the report writes a duration ('2.144 us'); '-' for none."""
    value = flows[column][row]
    return "-" if value is None or math.isnan(float(value)) else duration(float(value) * 1000.0)
