"""The `roceview analyze` report (rich): capture summary, findings, per-QP table, PFC table."""
from __future__ import annotations

import textwrap

import numpy as np
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

MAX_QP_ROWS = 40
_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
_DETECTED = (("gap_events", "PSN gap events"), ("gap_psns", "PSNs skipped by gaps"),
             ("unrecovered_psns", "PSNs never recovered"), ("retransmitted_packets", "retransmitted packets"),
             ("timeout_retransmits", "retransmissions after a timeout"), ("naks_seq", "NAKs (PSN sequence error)"),
             ("naks_rnr", "RNR NAKs"), ("naks_other", "other NAKs"), ("pause_frames", "PFC/PAUSE pause frames"),
             ("resume_frames", "PFC/PAUSE resume frames"), ("ecn_ce", "ECN CE-marked packets"),
             ("cnp_packets", "CNPs"))


def make_console(out, is_tty: bool) -> Console:
    return Console(file=out, width=None if is_tty else 200, force_terminal=is_tty, highlight=False,
                   soft_wrap=False)


def print_report(result, console: Console) -> None:
    _summary(result.summary, console)
    _findings(result, console)
    _qp_table(result.flows_table, console)
    _pfc_table(result.pfc_table, console)


def _duration(ns: int) -> str:
    return f"{ns / 1e9:.6f} s" if ns >= 1_000_000 else f"{ns / 1e3:.3f} us"


def _summary(s: dict, console: Console) -> None:
    p = s["protocols"]
    other = s["packets"] - s["roce_packets"] - p.get("pfc", 0) - p.get("pause", 0)
    files = ", ".join(s["files"]) or "-"
    console.print(f"[bold]Capture[/bold] {files}")
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
        console.print(f"  [yellow]decode warnings: {s['decode_warnings']}[/yellow]")


def _findings(result, console: Console) -> None:
    table = result.findings_table
    console.print("\n[bold]Findings[/bold]")
    if len(table):
        d = table.data
        for i in range(len(table)):
            _finding(console, {k: d[k][i] for k in ("severity", "kind", "summary", "flows", "start_ts", "end_ts",
                                                     "evidence", "advice")})
        return
    detected = result.summary["detected"]
    lines = [f"  {detected[k]:,} {label}" for k, label in _DETECTED if detected.get(k)]
    console.print("\n".join(lines) if lines else "  nothing detected: no gaps, retransmissions, NAKs, pauses or marks")


def _finding(console: Console, f: dict) -> None:
    """One finding: severity and kind, its sentence, then when, flows, evidence and advice,
    wrapped under a hanging label (plain text, so a log or README shows it as on screen)."""
    head = Text("  ")
    head.append(f"{f['severity'].upper():8}", style=_SEVERITY_STYLE.get(f["severity"], ""))
    head.append(f" {f['kind']}  ", style="bold")
    head.append(str(f["summary"]))
    console.print(head)
    width = max(60, min(console.width, 140) - 20)
    for label, value in (("when", _when(f["start_ts"], f["end_ts"])), ("flows", str(f["flows"]).replace(";", ", ")),
                         ("evidence", f["evidence"]), ("advice", f["advice"])):
        if not value:
            continue
        lines = textwrap.wrap(str(value), width) or [""]
        console.print(Text(f"{'':11}{label:<9}", style="dim") + Text(lines[0]))
        for line in lines[1:]:
            console.print(Text(f"{'':20}{line}"))
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
    d = flows.data
    trouble = (d["gap_events"] + d["retransmitted_packets"] + d["naks_seq"] + d["naks_rnr"]
               + d["naks_other"])
    marks = d["ecn_ce"] + d["cnp_packets"]
    return np.lexsort((-d["packets"], -marks, -trouble, -d["unrecovered_psns"]))


def _qp_table(flows, console: Console) -> None:
    console.print(f"\n[bold]Queue pairs[/bold] ({len(flows):,} flows, worst first)")
    if not len(flows):
        console.print("  no RoCE traffic")
        return
    order = worst_first(flows)[:MAX_QP_ROWS]
    view = flows.take(order)
    cols = ("flow", "peer_qp", "transport", "packets", "gap_events", "gap_psns", "unrecovered_psns",
            "retransmitted_packets", "naks_seq", "naks_rnr", "naks_other", "ecn_ce", "cnp_packets",
            "rtt_p50_us", "rtt_p99_us", "goodput_gbps")
    heads = ("flow", "peer", "tr", "pkts", "gaps", "gap PSNs", "unrecov", "retx", "NAK seq", "RNR",
             "NAK other", "CE", "CNP", "RTT p50 us", "RTT p99 us", "Gb/s")
    table = RichTable(show_edge=False, pad_edge=False, header_style="bold")
    for i, h in enumerate(heads):
        table.add_column(h, justify="left" if i < 3 else "right", no_wrap=True)
    texts = [view.text_column(c) for c in cols]
    for row in zip(*texts):
        style = "red" if int(row[6] or 0) else ("yellow" if any(int(x or 0) for x in row[4:11]) else "")
        table.add_row(*row, style=style)
    console.print(table)
    if len(flows) > MAX_QP_ROWS:
        console.print(f"  ... {len(flows) - MAX_QP_ROWS:,} more flows (see --csv qps.csv)")


def _pfc_table(pfc, console: Console) -> None:
    console.print("\n[bold]PFC / PAUSE[/bold]")
    if not len(pfc):
        console.print("  no PFC or PAUSE frames")
        return
    table = RichTable(show_edge=False, pad_edge=False, header_style="bold")
    for h in ("source MAC", "priority", "pauses", "resumes", "quanta", "paused us", "longest us"):
        table.add_column(h, justify="left" if h in ("source MAC", "priority") else "right", no_wrap=True)
    cols = ("src_mac", "priority", "pause_frames", "resume_frames", "pause_quanta", "paused_us",
            "longest_pause_us")
    for row in zip(*[pfc.text_column(c) for c in cols]):
        table.add_row(*row)
    console.print(table)
