"""The `roceview analyze` report: capture summary, findings, per-QP table, operations
(report_ops.py), PFC table, priorities (report_priorities.py).

Plain text through render/screen.py (no rich: see there why). The per-QP table lists the
`max_qps` worst queue pairs (default MAX_QP_ROWS; 0 = all) and counts the rest: thousands of
rows help nobody in a terminal, and qps.csv / --json have every one.
"""
from __future__ import annotations


import numpy as np

from roceview.render.screen import Screen, table_width, wrap
from roceview.units import count, duration, gbps, plural

MAX_QP_ROWS = 25
_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
_DETECTED = (("gap_events", "PSN gap event", None), ("gap_psns", "PSN skipped by gaps", "PSNs skipped by gaps"),
             ("unrecovered_psns", "PSN never recovered", "PSNs never recovered"),
             ("retransmitted_packets", "retransmitted packet", None),
             ("timeout_retransmits", "retransmission after a timeout", "retransmissions after a timeout"),
             ("naks_seq", "NAK (PSN sequence error)", "NAKs (PSN sequence error)"), ("naks_rnr", "RNR NAK", None),
             ("naks_other", "other NAK", None), ("pause_frames", "PFC/PAUSE pause frame", None),
             ("resume_frames", "PFC/PAUSE resume frame", None), ("ecn_ce", "ECN CE-marked packet", None),
             ("cnp_packets", "CNP", None))  # (summary key, one, many: None adds an s)


def make_console(out, is_tty: bool, wide: bool = False) -> Screen:
    return Screen(out, is_tty, crop=not wide)


def print_report(result, console: Screen, max_qps: int = MAX_QP_ROWS, wide: bool | None = None) -> None:
    """wide: every QP column, lines uncut (--wide); None: --wide when the Screen does not crop."""
    wide = (not console.crop) if wide is None else wide
    console.crop = console.crop and not wide
    _summary(result.summary, console)
    _findings(result, console)
    _qp_table(result.flows_table, console, max_qps, wide)
    from roceview.render.report_connections import print_connections

    print_connections(result, console)
    from roceview.render.report_ops import print_operations

    print_operations(result, console, worst_first(result.flows_table), max_qps, wide)
    _pfc_table(result.pfc_table, result.summary.get("link_speed_gbps"), console)
    from roceview.render.report_priorities import print_priorities

    print_priorities(result, console)


def files_text(files: list[str], shown: int = 5) -> str:
    """The capture files in a line or two: a folder of 2,000 captures is named by its count, its
    folder and its first few files (the JSON keeps every name)."""
    if len(files) <= shown + 1:
        return ", ".join(files) or "-"
    import os

    folders = {os.path.dirname(f) for f in files}
    names = [os.path.basename(f) for f in files] if len(folders) == 1 else files
    where = f" in {folders.pop() or '.'}" if len(folders) == 1 else ""
    return f"{count(len(files))} files{where}: {', '.join(names[:shown])}, … (+{count(len(files) - shown)} more)"


def _summary(s: dict, console: Screen) -> None:
    p = s["protocols"]
    other = s["packets"] - s["roce_packets"] - p.get("pfc", 0) - p.get("pause", 0)
    files = files_text(s["files"])
    console.para(f"{console.style('Capture', 'bold')} {files}", indent="")
    span = capture_span(s)
    when = f" ({utc_span(*span)})" if span is not None else ""
    console.para(f"{plural(s['packets'], 'packet')} in {duration(s['duration_ns'])}{when}")
    console.para(f"RoCE {count(s['roce_packets'])} (v1 {count(p.get('roce_v1', 0))}, v2 {count(p.get('roce_v2', 0))},"
                 f" IB {count(p.get('ib', 0))}), PFC {count(p.get('pfc', 0))}, PAUSE {count(p.get('pause', 0))},"
                 f" other {count(other)}; {plural(s['flows'], 'flow')}; path MTU {s['pmtu'] or 'unknown'}")
    if s.get("timeline_bucket_ms", s.get("bucket_ms")) != s.get("bucket_ms"):
        console.para(f"timeline buckets of {s['timeline_bucket_ms']:g} ms (not {s['bucket_ms']:g} ms): "
                     "the timeline would have outgrown memory")
    if s.get("events_not_listed"):
        extra = ", ".join(f"{count(n)} {k}" for k, n in s["events_not_listed"].items())
        console.para(f"events.csv lists the first events of each kind only; not listed: {extra}")
    if s["decode_warnings"]:
        console.para(console.style(f"decode warnings: {count(s['decode_warnings'])}", "yellow"))


def _findings(result, console: Screen) -> None:
    table = result.findings_table
    console.print("\n" + console.style("Findings", "bold"))
    if len(table):
        d = table.data
        span = capture_span(result.summary)
        for i in range(len(table)):
            _finding(console, {k: d[k][i] for k in ("severity", "kind", "summary", "flows", "start_ts", "end_ts",
                                                     "evidence", "advice", "frames", "frame_count", "explains")}, span)
        return
    console.print("\n".join("  " + line for line in no_findings(result.summary)))


def no_findings(summary: dict) -> list[str]:
    """What a capture without findings showed (the report's and the TUI Overview's words)."""
    detected = summary.get("detected", {})
    lines = [plural(detected[k], one, many) for k, one, many in _DETECTED if detected.get(k)]
    return lines or ["nothing detected: no gaps, retransmissions, NAKs, pauses or marks"]


def _finding(console: Screen, f: dict, span=None) -> None:
    """One finding: severity and kind, its sentence, then when, flows, evidence and advice,
    wrapped under a hanging label (plain text, so a log or README shows it as on screen)."""
    severity, kind = f"{f['severity'].upper():8}", f" {f['kind']}  "
    indent = " " * (2 + len(severity + kind))  # a long sentence continues under the kind
    lines = wrap(str(f["summary"]), max(40, console.width), initial_indent=indent,
                 subsequent_indent=" " * 11) or [indent]
    console.print("  " + console.style(severity, _SEVERITY_STYLE.get(f["severity"]))
                  + console.style(kind, "bold") + lines[0][len(indent):])
    for line in lines[1:]:
        console.print(line)
    width = max(20, min(console.width, 140) - 20)
    for label, value in (("when", _when(f["start_ts"], f["end_ts"], span)),
                         ("explains", str(f.get("explains") or "").replace(";", ", ")),
                         ("flows", flows_text(f["flows"])),
                         ("frames", frames_text(f["frames"], f["frame_count"])),
                         ("evidence", f["evidence"]), ("advice", f["advice"])):
        if not value:
            continue
        lines = wrap(str(value), width) or [""]
        console.print(console.style(f"{'':11}{label:<9}", "dim") + lines[0])
        for line in lines[1:]:
            console.print(f"{'':20}{line}")
    console.print()


def flows_text(flows: str, shown: int = 6) -> str:
    """A finding's flows, the first few named and the rest counted (as its evidence counts PSNs):
    an incast over 32 queue pairs is one line, not 32."""
    names = [f for f in str(flows or "").split(";") if f]
    if len(names) <= shown + 1:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f" (+{count(len(names) - shown)} more)"


def frames_text(frames: str, total) -> str:
    """`46, 48, 57 (+3 more)`: the frames a finding lists, and how many more show it."""
    listed = [f for f in str(frames or "").split(";") if f]
    more = int(total or 0) - len(listed)
    return ", ".join(listed) + (f" (+{count(more)} more)" if more > 0 else "")


def capture_span(summary: dict) -> tuple[int, int] | None:
    """(first, last) packet time in ns from the summary, or None when there were no packets."""
    first = summary.get("first_ts")
    if not first:
        return None
    sec, _, frac = str(first).partition(".")
    start = int(sec) * 10**9 + int((frac + "000000000")[:9]) * (-1 if sec.startswith("-") else 1)
    return start, start + int(summary.get("duration_ns") or 0)


def _when(start, end, span=None) -> str:
    """`first - last (duration)`, inside the capture's span: a rule's window (an incast's 1 ms)
    may reach past the last packet, and nothing was seen there."""
    if start is None or end is None or start == "" or end == "":
        return ""
    try:
        s, e = int(start), int(end)
    except (TypeError, ValueError):
        return f"{start} - {end}"
    if span is not None:
        s, e = min(max(s, span[0]), span[1]), min(max(e, span[0]), span[1])
    since = f"{relative(s - span[0])} - {relative(e - span[0])} s, " if span is not None else ""
    return f"{since}{utc_span(s, e)} ({duration(e - s)})"


def relative(ns: int) -> str:
    """Seconds since the first packet, as `dissect`'s time column (tshark's -t r) shows them."""
    return f"{'-' if ns < 0 else ''}{abs(ns) // 10**9}.{abs(ns) % 10**9:09d}"


def utc_span(start: int, end: int) -> str:
    """`2023-11-14 22:13:20.000010628 - 22:13:20.000024717 UTC`: the end's date only when it
    differs."""
    a, b = utc_text(start), utc_text(end)
    if a[:11] == b[:11] and a[4:5] == "-":
        b = b[11:]
    return f"{a} - {b} UTC"


def utc_text(ns: int) -> str:
    """`2023-11-14 22:13:20.000010628` (UTC, nanoseconds): an epoch number names no day."""
    import datetime

    sec, frac = divmod(int(ns), 10**9)
    try:
        when = datetime.datetime.fromtimestamp(sec, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):     # out of datetime's years: the epoch number
        return f"{sec}.{frac:09d}"
    return f"{when:%Y-%m-%d %H:%M:%S}.{frac:09d}"


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


def _int(values) -> list[str]:
    return [f"{v:,}" for v in np.asarray(values).tolist()]


def _us(values) -> list[str]:
    """Durations from float microseconds (NaN: no value, blank)."""
    return [duration(v * 1000.0) for v in np.asarray(values, dtype=np.float64).tolist()]


def _rate(values) -> list[str]:
    return [gbps(v) for v in np.asarray(values, dtype=np.float64).tolist()]


def _naks(d) -> np.ndarray:
    return np.asarray(d["naks_seq"]) + np.asarray(d["naks_rnr"]) + np.asarray(d["naks_other"])


# (head, cells of a table view, in the compact set shown when all do not fit the width)
_QP_COLUMNS = (
    ("flow", lambda v: v.text_column("flow"), True), ("peer", lambda v: v.text_column("peer_qp"), False),
    ("tr", lambda v: v.text_column("transport"), False), ("pkts", lambda v: _int(v.data["packets"]), False),
    ("gaps", lambda v: _int(v.data["gap_events"]), True), ("gap PSNs", lambda v: _int(v.data["gap_psns"]), False),
    ("unrecov", lambda v: _int(v.data["unrecovered_psns"]), True),
    ("retx", lambda v: _int(v.data["retransmitted_packets"]), True),
    ("NAKs", lambda v: _int(_naks(v.data)), True), ("NAK seq", lambda v: _int(v.data["naks_seq"]), False),
    ("RNR", lambda v: _int(v.data["naks_rnr"]), False), ("NAK other", lambda v: _int(v.data["naks_other"]), False),
    ("CE", lambda v: _int(v.data["ecn_ce"]), True), ("CNP", lambda v: _int(v.data["cnp_packets"]), True),
    ("RTT p50", lambda v: _us(v.data["rtt_p50_us"]), True), ("RTT p99", lambda v: _us(v.data["rtt_p99_us"]), False),
    ("Gb/s", lambda v: _rate(v.data["goodput_gbps"]), True))
_WIDE_ONLY = {"NAKs"}  # the compact set's sum of the three NAK columns the wide table shows
_LOSS = ("gap_events", "gap_psns", "retransmitted_packets", "naks_seq", "naks_rnr")
_SIGNS = _LOSS + ("unrecovered_psns", "naks_other", "ecn_ce", "cnp_packets")


def qp_cells(view, wide: bool, width: int, ellipsis: str = "\u2026") -> tuple[list[str], list[tuple], bool]:
    """Heads and rows of the QP table, and whether flow names were shortened: every column when
    `wide` or when they fit `width`, else the compact set (flow, gaps, unrecovered, retx, NAKs,
    CE, CNP, RTT p50, Gb/s). Where flow names are so long (IPv6) that even its counters do not
    fit, the addresses lose their middle (never the QP number: the two directions stay apart);
    then its last columns are left out while it does not fit: whole columns, never a number cut."""
    text = {h: cells(view) for h, cells, _ in _QP_COLUMNS}
    heads = [h for h, _, _ in _QP_COLUMNS if h not in _WIDE_ONLY]
    rows = list(zip(*[text[h] for h in heads]))
    if wide or table_width(heads, rows, tight=True) <= width:
        return heads, rows, False
    heads = [h for h, _, short in _QP_COLUMNS if short]
    columns = [text[h] for h in heads]
    flows = _short_flows(columns[0], _flow_room(heads, text, width), ellipsis)
    shortened = flows != columns[0]
    columns[0] = flows
    while len(heads) > 2 and table_width(heads, list(zip(*columns)), tight=True) > width:
        heads, columns = heads[:-1], columns[:-1]
    return heads, list(zip(*columns)), shortened


MIN_FLOW_WIDTH = 30  # shorter, addresses are mostly ellipsis: columns are left out instead


def _flow_room(heads: list[str], text: dict, width: int) -> int:
    """Width for the flow column: what the whole compact set leaves when that is 40 or more
    (an IPv6 pair still readable), else what its counters (gaps .. CNP) leave, at least 30."""
    for others, least in (heads[1:], 40), (heads[1:heads.index("CNP") + 1], MIN_FLOW_WIDTH):
        room = width - table_width(others, list(zip(*[text[h] for h in others])), tight=True) - 2
        if room >= least:
            return room
    return MIN_FLOW_WIDTH


def _short_flows(names: list[str], room: int, ellipsis: str) -> list[str]:
    """Flow names 'SRC>DST:0xQPN' no wider than `room`, each address keeping its start and its
    (host-specific) end; the names as they are when they fit, or when shortening would make
    two of them read the same."""
    if max(map(len, names), default=0) <= room:
        return names
    out = []
    for name in names:
        pair, _, qp = name.rpartition(":")
        src, arrow, dst = pair.partition(">")
        if not arrow or not qp.startswith("0x"):
            out.append(name)
            continue
        each = (room - len(qp) - 2) // 2
        out.append(f"{_elide(src, each, ellipsis)}>{_elide(dst, each, ellipsis)}:{qp}")
    return out if len(set(out)) == len(set(names)) else names


def _elide(address: str, size: int, ellipsis: str) -> str:
    """An IPv6 address or GID without its middle; IPv4 addresses and LIDs stay whole (an
    engineer reads them whole; columns are left out instead)."""
    keep = size - len(ellipsis)
    if len(address) <= max(size, len("255.255.255.255")) or keep < 6:
        return address
    head = keep // 3
    return address[:head] + ellipsis + address[len(address) - (keep - head):]


def _qp_table(flows, console: Screen, max_qps: int = MAX_QP_ROWS, wide: bool = False) -> None:
    if not len(flows):                                   # '(0 flows, worst first)' over nothing
        console.print("\n" + console.style("Queue pairs", "bold") + "\n  no RoCE traffic")
        return
    console.print("\n" + console.style("Queue pairs", "bold") + f" ({plural(len(flows), 'flow')}, worst first)")
    order = worst_first(flows)
    shown, hidden = (order, order[:0]) if max_qps <= 0 else (order[:max_qps], order[max_qps:])
    view = flows.take(shown)
    heads, rows, shortened = qp_cells(view, wide, console.width, console.ellipsis)
    d = view.data
    broken = (d["unrecovered_psns"] > 0) | (d["naks_other"] > 0)
    lossy = np.any([d[c] > 0 for c in _LOSS], axis=0)
    styles = ["red" if b else "yellow" if lo else None for b, lo in zip(broken.tolist(), lossy.tolist())]
    right = {i for i, h in enumerate(heads) if h not in ("flow", "peer", "tr")}
    console.table(heads, rows, right=right, styles=styles)
    if len(hidden):
        pairs = "queue pairs" if len(hidden) > 1 else "queue pair"
        console.para(f"{console.ellipsis} {count(len(hidden))} more {pairs} ({_signs(flows, hidden)}): "
                     "see qps.csv (--csv) or --json; --max-qps 0 lists them all")
    if "peer" not in heads:
        left = [h for h, _, short in _QP_COLUMNS if short and h not in heads]
        missing = f" ({', '.join(left)} did not fit)" if left else ""
        missing += "; addresses shortened" if shortened else ""
        console.para(f"{console.ellipsis} the telling columns at {console.width} columns{missing}; --wide shows all")


def _signs(flows, rows: np.ndarray) -> str:
    """How many of the rows left out show any trouble, so nobody has to open qps.csv to know."""
    d = flows.data
    n = int(np.count_nonzero(sum(np.asarray(d[c])[rows] for c in _SIGNS)))
    return f"{count(n)} with loss or congestion signs" if n else "none with loss or congestion signs"


def _pfc_table(pfc, link_speed_gbps, console: Screen) -> None:
    console.print("\n" + console.style("PFC / PAUSE", "bold"))
    if not len(pfc):
        console.print("  no PFC or PAUSE frames")
        return
    if link_speed_gbps:   # quanta are 512 bit times: the time depends on a speed the capture rarely shows
        console.print(f"  pause times at an assumed {link_speed_gbps:g} Gb/s link (--link-speed)")
    d = pfc.data
    cols = [pfc.text_column("src_mac"), pfc.text_column("priority"), _int(d["pause_frames"]),
            _int(d["resume_frames"]), _int(d["pause_quanta"]), _us(d["paused_us"]), _us(d["longest_pause_us"])]
    heads = ("source MAC", "priority", "pauses", "resumes", "quanta", "paused", "longest")
    console.table(heads, list(zip(*cols)), right=set(range(2, len(cols))))
