"""The `roceview analyze` report: capture summary, findings, per-QP table, PFC table.

Plain text through render/screen.py (no rich: see there why). The per-QP table lists the
`max_qps` worst queue pairs (default MAX_QP_ROWS; 0 = all) and counts the rest: thousands of
rows help nobody in a terminal, and qps.csv / --json have every one.
"""
from __future__ import annotations

import textwrap

import numpy as np

from roceview.render.screen import Screen

MAX_QP_ROWS = 25
_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
_DETECTED = (("gap_events", "PSN gap events"), ("gap_psns", "PSNs skipped by gaps"),
             ("unrecovered_psns", "PSNs never recovered"), ("retransmitted_packets", "retransmitted packets"),
             ("timeout_retransmits", "retransmissions after a timeout"), ("naks_seq", "NAKs (PSN sequence error)"),
             ("naks_rnr", "RNR NAKs"), ("naks_other", "other NAKs"), ("pause_frames", "PFC/PAUSE pause frames"),
             ("resume_frames", "PFC/PAUSE resume frames"), ("ecn_ce", "ECN CE-marked packets"),
             ("cnp_packets", "CNPs"))


def make_console(out, is_tty: bool) -> Screen:
    return Screen(out, is_tty)


def print_report(result, console: Screen, max_qps: int = MAX_QP_ROWS) -> None:
    _summary(result.summary, console)
    _findings(result, console)
    _qp_table(result.flows_table, console, max_qps)
    _pfc_table(result.pfc_table, console)


def _duration(ns: int) -> str:
    return f"{ns / 1e9:.6f} s" if ns >= 1_000_000 else f"{ns / 1e3:.3f} us"


def _summary(s: dict, console: Screen) -> None:
    p = s["protocols"]
    other = s["packets"] - s["roce_packets"] - p.get("pfc", 0) - p.get("pause", 0)
    files = ", ".join(s["files"]) or "-"
    console.print(f"{console.style('Capture', 'bold')} {files}")
    console.print(f"  packets {s['packets']:,} in {_duration(s['duration_ns'])}"
                  f" (first {s['first_ts'] or '-'}, last {s['last_ts'] or '-'})")
    console.print(f"  RoCE {s['roce_packets']:,} (v1 {p.get('roce_v1', 0):,}, v2 {p.get('roce_v2', 0):,},"
                  f" IB {p.get('ib', 0):,}), PFC {p.get('pfc', 0):,}, PAUSE {p.get('pause', 0):,},"
                  f" other {other:,}; flows {s['flows']:,}; path MTU {s['pmtu'] or 'unknown'}")
    if s.get("timeline_bucket_ms", s.get("bucket_ms")) != s.get("bucket_ms"):
        console.print(f"  timeline buckets of {s['timeline_bucket_ms']:g} ms (not {s['bucket_ms']:g} ms): "
                      "the timeline would have outgrown memory")
    if s.get("events_not_listed"):
        extra = ", ".join(f"{n:,} {k}" for k, n in s["events_not_listed"].items())
        console.print(f"  events.csv lists the first events of each kind only; not listed: {extra}")
    if s["decode_warnings"]:
        console.print("  " + console.style(f"decode warnings: {s['decode_warnings']}", "yellow"))


def _findings(result, console: Screen) -> None:
    table = result.findings_table
    console.print("\n" + console.style("Findings", "bold"))
    if len(table):
        d = table.data
        for i in range(len(table)):
            _finding(console, {k: d[k][i] for k in ("severity", "kind", "summary", "flows", "start_ts", "end_ts",
                                                     "evidence", "advice")})
        return
    detected = result.summary["detected"]
    lines = [f"  {detected[k]:,} {label}" for k, label in _DETECTED if detected.get(k)]
    console.print("\n".join(lines) if lines else "  nothing detected: no gaps, retransmissions, NAKs, pauses or marks")


def _finding(console: Screen, f: dict) -> None:
    """One finding: severity and kind, its sentence, then when, flows, evidence and advice,
    wrapped under a hanging label (plain text, so a log or README shows it as on screen)."""
    severity, kind = f"{f['severity'].upper():8}", f" {f['kind']}  "
    indent = " " * (2 + len(severity + kind))  # a long sentence continues under the kind
    lines = textwrap.wrap(str(f["summary"]), max(40, console.width), initial_indent=indent,
                          subsequent_indent=" " * 11, break_on_hyphens=False) or [indent]
    console.print("  " + console.style(severity, _SEVERITY_STYLE.get(f["severity"]))
                  + console.style(kind, "bold") + lines[0][len(indent):])
    for line in lines[1:]:
        console.print(line)
    width = max(60, min(console.width, 140) - 20)
    for label, value in (("when", _when(f["start_ts"], f["end_ts"])), ("flows", str(f["flows"]).replace(";", ", ")),
                         ("evidence", f["evidence"]), ("advice", f["advice"])):
        if not value:
            continue
        lines = textwrap.wrap(str(value), width) or [""]
        console.print(console.style(f"{'':11}{label:<9}", "dim") + lines[0])
        for line in lines[1:]:
            console.print(f"{'':20}{line}")
    console.print()


def _when(start, end) -> str:
    if start is None or end is None or start == "" or end == "":
        return ""
    try:
        s, e = int(start), int(end)
    except (TypeError, ValueError):
        return f"{start} - {end}"
    return f"{s // 10**9}.{s % 10**9:09d} - {e // 10**9}.{e % 10**9:09d} ({_duration(e - s)})"


def worst_first(flows) -> np.ndarray:
    """Row order, worst first, as a network engineer triages: broken flows (PSNs never recovered,
    or a fatal NAK: remote access/operational error, the QP is dead), then the most loss and
    recovery work (PSNs skipped, packets resent, sequence and RNR NAKs), then the most
    congestion marks (CE, CNP), then the biggest talkers (bytes). Ties keep capture order."""
    d = flows.data
    broken = (d["unrecovered_psns"] > 0) | (d["naks_other"] > 0)
    loss = d["gap_psns"] + d["retransmitted_packets"] + d["naks_seq"] + d["naks_rnr"]
    marks = d["ecn_ce"] + d["cnp_packets"]
    return np.lexsort((-np.asarray(d["bytes"]), -marks, -loss, ~broken))


_QP_COLUMNS = (("flow", "flow"), ("peer_qp", "peer"), ("transport", "tr"), ("packets", "pkts"),
               ("gap_events", "gaps"), ("gap_psns", "gap PSNs"), ("unrecovered_psns", "unrecov"),
               ("retransmitted_packets", "retx"), ("naks_seq", "NAK seq"), ("naks_rnr", "RNR"),
               ("naks_other", "NAK other"), ("ecn_ce", "CE"), ("cnp_packets", "CNP"),
               ("rtt_p50_us", "RTT p50 us"), ("rtt_p99_us", "RTT p99 us"), ("goodput_gbps", "Gb/s"))
_LOSS = ("gap_events", "gap_psns", "retransmitted_packets", "naks_seq", "naks_rnr")
_SIGNS = _LOSS + ("unrecovered_psns", "naks_other", "ecn_ce", "cnp_packets")


def _qp_table(flows, console: Screen, max_qps: int = MAX_QP_ROWS) -> None:
    console.print("\n" + console.style("Queue pairs", "bold") + f" ({len(flows):,} flows, worst first)")
    if not len(flows):
        console.print("  no RoCE traffic")
        return
    order = worst_first(flows)
    shown, hidden = (order, order[:0]) if max_qps <= 0 else (order[:max_qps], order[max_qps:])
    view = flows.take(shown)
    rows = list(zip(*[view.text_column(c) for c, _ in _QP_COLUMNS]))
    d = view.data
    broken = (d["unrecovered_psns"] > 0) | (d["naks_other"] > 0)
    lossy = np.any([d[c] > 0 for c in _LOSS], axis=0)
    styles = ["red" if b else "yellow" if lo else None for b, lo in zip(broken.tolist(), lossy.tolist())]
    console.table([h for _, h in _QP_COLUMNS], rows, right=set(range(3, len(_QP_COLUMNS))), styles=styles)
    if len(hidden):
        pairs = "queue pairs" if len(hidden) > 1 else "queue pair"
        note = (f"{console.ellipsis} {len(hidden):,} more {pairs} ({_signs(flows, hidden)}): "
                "see qps.csv (--csv) or --json; --max-qps 0 lists them all")
        for line in textwrap.wrap(note, console.width, initial_indent="  ", subsequent_indent="    "):
            console.print(line)


def _signs(flows, rows: np.ndarray) -> str:
    """How many of the rows left out show any trouble, so nobody has to open qps.csv to know."""
    d = flows.data
    n = int(np.count_nonzero(sum(np.asarray(d[c])[rows] for c in _SIGNS)))
    return f"{n:,} with loss or congestion signs" if n else "none with loss or congestion signs"


def _pfc_table(pfc, console: Screen) -> None:
    console.print("\n" + console.style("PFC / PAUSE", "bold"))
    if not len(pfc):
        console.print("  no PFC or PAUSE frames")
        return
    cols = ("src_mac", "priority", "pause_frames", "resume_frames", "pause_quanta", "paused_us",
            "longest_pause_us")
    heads = ("source MAC", "priority", "pauses", "resumes", "quanta", "paused us", "longest us")
    console.table(heads, list(zip(*[pfc.text_column(c) for c in cols])), right=set(range(2, len(cols))))
