"""ECN / DCQCN findings: ecn_congestion, ecn_not_enabled, cnp_missing, incast.

At a sender-side mirror CE marks are invisible (the switch marks after the mirror): CNPs coming
back are then the evidence that marking works. The CE counts here are of data packets when packet
facts were collected, else of all packets of the flow.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from roceview.analysis.tables import Coded
from roceview.arrays import sorted_distinct
from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding
from roceview.diagnose.flow_arrays import sums
from roceview.diagnose.windows import busiest_windows as _busiest_windows
from roceview.units import plural

# mlx5 RDMA hw counter names: drivers/infiniband/hw/mlx5/counters.c cong_cnts (docs/findings.md, Sources)
HW_COUNTERS = "/sys/class/infiniband/<dev>/ports/<port>/hw_counters/"
DCQCN_ADVICE = (f"On the receivers read np_ecn_marked_roce_packets and np_cnp_sent, on the senders rp_cnp_handled "
                f"and rp_cnp_ignored (mlx5 RDMA hw counters, {HW_COUNTERS}); keep switch ECN Kmin < Kmax < PFC XOFF "
                "on the RoCE queue.")


def _data_flows(ctx: Context):
    """(name, row) of the flows that carry data: not CNP or UD flows (the rules below use the
    same mask, FlowArrays.data_flow)."""
    for i in np.flatnonzero(ctx.arrays.data_flow).tolist():
        name = ctx.flow_names[i]
        yield name, ctx.flow[name]


def ecn_findings(ctx: Context) -> list[dict]:
    # copies: the incast records stay as built for hol_victim, whatever later stages do to these
    return _congestion(ctx) + _not_enabled(ctx) + _cnp_missing(ctx) + [dict(r) for r in incast_findings(ctx)]


def incast_findings(ctx: Context) -> list[dict]:
    """The `incast` findings, computed once per Context: this module reports them and hol_victim
    (pfc_victims) reads their receivers as congested ones; the windows read the whole timeline."""
    return ctx.once("_incast_findings", _incast)


def _congestion(ctx: Context) -> list[dict]:
    a = ctx.arrays
    data_rows, cnp_rows = np.flatnonzero(a.data_flow), np.flatnonzero(a.cnp_packets != 0)
    data = sums(a.dst[data_rows], a.data[data_rows], len(a.hosts))       # per receiver
    ce = sums(a.dst[data_rows], a.ce[data_rows], len(a.hosts))
    cnps = sums(a.src, a.cnp_packets, len(a.hosts))                     # per sender of CNPs: ctx.cnps_from
    data_to, cnp_flows_of = a.groups(a.dst, data_rows), a.groups(a.src, cnp_rows)
    out = []
    for h in np.flatnonzero((ce != 0) | (cnps != 0)).tolist():
        rx, flows, cnp_flows = a.hosts[h], data_to.get(h, cnp_rows[:0]), cnp_flows_of.get(h, cnp_rows[:0])
        out.append(_congestion_finding(ctx, rx, int(data[h]), int(ce[h]), int(cnps[h]), flows, cnp_flows))
    return out


def _congestion_finding(ctx: Context, rx: str, data: int, ce: int, cnps: int, flows, cnp_flows) -> dict:
    a, names = ctx.arrays, ctx.flow_names
    marked = flows[a.ce[flows] != 0]
    share = ce / data if data else 0.0
    senders = sorted({a.hosts[s] for s in a.src[marked].tolist()} | {a.hosts[d] for d in a.dst[cnp_flows].tolist()})
    answer = (f"answered with {plural(cnps, 'CNP')}: DCQCN is cutting rates" if cnps
              else "and no CNP came back: the senders are not told to slow down")
    summary = (f"ECN congestion toward {rx}: {plural(ce, 'CE-marked data packet')} ({share:.1%} of {data:,}) "
               f"from {plural(len(senders), 'sender')}, {answer}.")
    if not ce:
        summary = (f"ECN congestion toward {rx}: it sent {plural(cnps, 'CNP')} to {plural(len(senders), 'sender')} "
                   "(the CE marks themselves are not visible at this capture point): DCQCN is cutting rates.")
    sev = "warning" if share >= ctx.config.ce_warning_share else "info"
    every = np.concatenate((flows, cnp_flows))
    evidence = [f"{ce:,} CE of {plural(data, 'data packet')} into {rx}", f"{plural(cnps, 'CNP')} from {rx} to {', '.join(senders)}"]
    return finding(sev, "ecn_congestion", summary, [names[i] for i in np.concatenate((marked, cnp_flows)).tolist()],
                   int(a.first_ts[every].min()), int(a.last_ts[every].max()), evidence,
                   DCQCN_ADVICE + " Marking under load is DCQCN working; persistent high CE share means the path is "
                   "oversubscribed.")


def _not_enabled(ctx: Context) -> list[dict]:
    a, names = ctx.arrays, ctx.flow_names
    known = a.has_facts
    # native IB uses FECN/BECN; RoCEv1 is not IP: no switch marks it, whatever its GRH says
    rows = np.flatnonzero(a.data_flow & ~(known & ~a.fact_column("ecn_capable")))
    fact_data = a.fact_column("data") - a.fact_column("data_v1")
    data = np.where(known, fact_data, a.packets)[rows]
    not_ect = np.where(known, fact_data - a.fact_column("data_ect"), a.ecn_not_ect)[rows]
    total, total_not_ect = sums(a.src[rows], data, len(a.hosts)), sums(a.src[rows], not_ect, len(a.hosts))
    per_src = a.groups(a.src, rows[not_ect != 0])
    out = []
    for h in np.flatnonzero(total != 0).tolist():
        src, data_h, not_ect_h = a.hosts[h], int(total[h]), int(total_not_ect[h])
        if not_ect_h / data_h <= ctx.config.not_ect_share:
            continue
        flows = per_src[h]
        few = not_ect_h < ctx.config.not_ect_min_packets
        summary = (f"{src} sends RoCE data Not-ECT (ECN 00): {not_ect_h:,} of {data_h:,} data packets; switches "
                   "cannot mark them, so DCQCN is off and only PFC (or loss) limits congestion"
                   + (f" (only {plural(not_ect_h, 'packet')}: below {ctx.config.not_ect_min_packets:,}, too little "
                      "traffic to matter; soft-RoCE (rxe) sends Not-ECT by default and has no DCQCN at all)." if few else "."))
        evidence = [f"{not_ect_h:,} of {data_h:,} data packets (RoCEv2) from {src} have ECN 00 in "
                    f"{plural(len(flows), 'flow')}"]
        out.append(finding("info" if few else "warning", "ecn_not_enabled", summary, [names[i] for i in flows.tolist()],
                           int(a.first_ts[flows].min()), int(a.last_ts[flows].max()), evidence, NOT_ECT_ADVICE))
    return out


NOT_ECT_ADVICE = (
    "mlx5: DCQCN is enabled per priority in firmware (`mlxconfig -d <dev> set ROCE_CC_PRIO_MASK_P1=<mask>`; MLNX_OFED "
    "also has `/sys/class/net/<if>/ecn/roce_np/enable/<p>` and `.../roce_rp/enable/<p>`), and the sender must set "
    "ECT in the RoCE traffic class: RDMA-CM default `echo 106 > /sys/kernel/config/rdma_cm/<dev>/ports/<port>/"
    "default_roce_tos` (DSCP 26 + ECT(0)), or the application's traffic class (e.g. NCCL_IB_TC=106). Soft-RoCE "
    "(rxe) implements no DCQCN: there only PFC or loss limits congestion.")


def _cnp_missing(ctx: Context) -> list[dict]:
    late = ctx.end_ns - int(ctx.config.cnp_wait_us * 1000)
    silent: dict[str, list] = defaultdict(list)
    a = ctx.arrays
    for i, count, first, last in _marks_before(ctx, late):
        # the headline counts CE-marked data packets as ecn_congestion does; the wait only decides
        silent[a.hosts[a.dst[i]]].append((ctx.flow_names[i], int(a.ce[i]) or count, count, first, last))
    out = []
    for rx, rows in sorted(silent.items()):
        ce, old = sum(r[1] for r in rows), sum(r[2] for r in rows)
        senders = sorted({ctx.flow[r[0]]["src_ip"] for r in rows})
        summary = (f"{rx} received {plural(ce, 'CE-marked packet')} from {', '.join(senders)} and no CNP from it "
                   "was captured: its notification point may be off (then the senders never slow down), or its "
                   "CNPs take a path this capture point does not see.")
        evidence = [f"{r[1]:,} CE on {r[0]}, 0 CNP from {rx}" for r in rows]
        if old != ce:
            evidence.append(f"{plural(old, 'CE mark')} more than {ctx.config.cnp_wait_us:g} us before the capture end "
                            "(later ones may still get their CNP)")
        advice = ("On the receiver compare np_ecn_marked_roce_packets (marks arrive) with np_cnp_sent (stays 0: "
                  f"the NP is off; mlx5 RDMA hw counters, {HW_COUNTERS}); if it is off enable DCQCN for the RoCE "
                  "priority (mlx5 firmware `mlxconfig` ROCE_CC_PRIO_MASK_P1, MLNX_OFED `/sys/class/net/<if>/ecn/"
                  "roce_np/enable/<p>`). If np_cnp_sent grows, the CNPs are sent but not seen here: check the "
                  "sender's rp_cnp_handled, the mirror's direction and the CNP priority/DSCP (mlx5 debugfs "
                  "cc_params np_cnp_dscp / np_cnp_prio, np_min_time_between_cnps).")
        out.append(finding("warning", "cnp_missing", summary, [r[0] for r in rows], min(r[3] for r in rows),
                           max(r[4] for r in rows), evidence, advice))
    return out


def _marks_before(ctx: Context, late: int) -> list[tuple[int, int, int, int]]:
    """(flow row, CE events at or before `late`, the first and last of them) of each data flow
    with such events whose receiver sent its sender no CNP, in flow order."""
    flows, starts, ends, ts = ctx.kind_groups("ecn_ce")
    if not flows:
        return []
    a = ctx.arrays
    rows = ctx.flow.rows(flows)
    counted = np.concatenate(([0], np.cumsum(ts <= late)))
    count = counted[ends] - counted[starts]        # a flow's events are in time order: a prefix
    keep = np.flatnonzero(rows >= 0)
    keep = keep[a.data_flow[rows[keep]] & (count[keep] > 0)]
    keep = keep[a.cnps_back[rows[keep]] == 0]
    keep = keep[np.argsort(rows[keep], kind="stable")]
    return list(zip(rows[keep].tolist(), count[keep].tolist(), ts[starts[keep]].tolist(),
                    ts[starts[keep] + count[keep] - 1].tolist()))


def _incast(ctx: Context) -> list[dict]:
    tl = ctx.timeline
    if not len(tl.get("flow", [])):
        return []
    bucket = int(float(ctx.summary.get("bucket_ms") or 1.0) * 1_000_000)
    width = max(bucket, int(ctx.config.incast_window_us * 1000))
    a, names = ctx.arrays, ctx.flow_names
    senders_of = {names[i]: a.hosts[a.src[i]] for i in np.flatnonzero(a.data_flow).tolist()}
    out = []
    for dst, w, flows in _busiest_windows(ctx, tl, width, senders_of):
        if len({senders_of[n] for n in flows}) < ctx.config.incast_senders:
            continue
        flows = _bursting(ctx, tl, flows, senders_of, w, width)
        if not flows:
            continue
        signals = _signals(ctx, dst, flows, w * width, (w + 1) * width)
        if not signals:
            continue
        senders = sorted({senders_of[n] for n in flows})
        summary = (f"Incast: {plural(len(senders), 'sender')} burst into {dst} within {width / 1e6:g} ms, with "
                   f"{', '.join(signals)} in that window.")
        advice = ("Many-to-one bursts overflow the egress queue toward the receiver: spread or stagger the senders "
                  "(collective algorithm, fewer outstanding READ/WRITE per QP), let DCQCN react early (lower Kmin), "
                  "and check the receiver's `ethtool -S` rx_prio<p>_discards and the switch egress port toward it "
                  "(drops, PFC sent). " + DCQCN_ADVICE)
        out.append(finding("warning", "incast", summary, sorted(flows), w * width,
                           (w + 1) * width, [f"senders: {', '.join(senders)}", *signals], advice))
    return out


def _bursting(ctx: Context, tl, flows: set, senders_of: dict, w: int, width: int) -> set:
    """The flows of window w whose senders start a burst there, when at least incast_senders
    do; else none. A sender bursts when it was idle toward the receiver in the window before.
    When that window is not wholly in the capture (the capture began in it or in w), the
    senders may have been running all along: it is a burst only if it ends, fewer than
    incast_senders of them still sending in the window after (six senders DCQCN keeps shaped
    into one port send in every window: congestion, no incast)."""
    mine = {senders_of[n] for n in flows}
    if (w - 1) * width >= ctx.start_ns:
        new = mine - _active_senders(ctx, tl, flows, senders_of, w - 1, width)
    else:
        later = {senders_of[n] for n in _window_flows(ctx, tl, w + 1, width) & set(flows)}
        new = mine if len(later) < ctx.config.incast_senders else set()
    if len(new) < ctx.config.incast_senders:
        return set()
    return {n for n in flows if senders_of[n] in new}


def _window_rows(ctx: Context, start: int, end: int) -> np.ndarray:
    """The timeline rows whose bucket starts in [start, end): one sort per Context, then a
    binary search per window (a receiver per window over a million rows stays cheap)."""
    order, ts, *_ = _timeline_order(ctx)
    return order[np.searchsorted(ts, start):np.searchsorted(ts, end)]


def _timeline_order(ctx: Context) -> tuple:
    """(the timeline's rows in bucket order, their bucket starts, the flow column's codes, its
    names, name -> code), built once per Context."""
    return ctx.once("_timeline_order", _order_timeline)


def _order_timeline(ctx: Context) -> tuple:
    ts = np.asarray(ctx.timeline["bucket_start"], np.int64)
    order = np.argsort(ts, kind="stable")
    flow = Coded.of(ctx.timeline["flow"])
    return order, ts[order], flow.codes, flow.names, {n: i for i, n in enumerate(flow.names)}


def _of_flows(ctx: Context, rows: np.ndarray, flows) -> np.ndarray:
    """The rows (timeline row numbers) that belong to `flows`, by the flow column's codes."""
    _, _, codes, names, code_of = _timeline_order(ctx)
    wanted = np.zeros(len(names), bool)
    wanted[[code_of[n] for n in flows if n in code_of]] = True
    return rows[wanted[codes[rows]]]


def _window_flows(ctx: Context, tl, w: int, width: int) -> set:
    """The flows with bytes in window w (kept per window: receivers share windows)."""
    cache = ctx.__dict__.setdefault("_window_flows", {})
    if (w, width) not in cache:
        cache[(w, width)] = _flows_in(ctx, tl, w, width)
    return cache[(w, width)]


def _flows_in(ctx: Context, tl, w: int, width: int) -> set:
    rows = _window_rows(ctx, w * width, (w + 1) * width)
    rows = rows[np.asarray(tl["bytes"])[rows] != 0]
    _, _, codes, names, _ = _timeline_order(ctx)
    return {names[c] for c in sorted_distinct(codes[rows]).tolist()}   # (np.unique imports numpy.ma)


def _active_senders(ctx: Context, tl, flows, senders_of: dict, w: int, width: int) -> set:
    """The senders of `flows` with bytes in window w (timeline rows)."""
    if w < 0:
        return set()
    return {senders_of[n] for n in _window_flows(ctx, tl, w, width) & set(flows)}


def _in_window(ctx: Context, flows, column: str, start: int, end: int) -> int:
    """The timeline's `column` summed over `flows` and the buckets that start in [start, end)."""
    rows = _of_flows(ctx, _window_rows(ctx, start, end), flows)
    return int(np.asarray(ctx.timeline[column])[rows].sum())


def _signals(ctx: Context, dst: str, flows, start: int, end: int) -> list[str]:
    """What the burst did, counted in its own window [start, end): CE marks, CNPs from dst back
    to the senders, pause frames, gaps and retransmissions."""
    flows = set(flows)
    a = ctx.arrays
    sender = np.zeros(len(a.hosts), bool)
    sender[a.src[ctx.flow.rows(sorted(flows))]] = True
    back_rows = np.flatnonzero((a.src == a.hosts.index(dst)) & sender[a.dst])
    back = {ctx.flow_names[i] for i in back_rows.tolist()}
    ce = _in_window(ctx, flows, "ecn_ce", start, end)
    cnps = _in_window(ctx, back, "cnp_packets", start, end)
    gaps = sum(int(((g.ts >= start) & (g.ts < end)).sum()) for g in (ctx.ev("gap", n) for n in flows))
    loss = gaps + _in_window(ctx, flows, "retransmitted_packets", start, end)
    pauses = _pauses_near(ctx, dst, flows, start, end)
    out = []
    if ce:
        out.append(plural(ce, "CE-marked packet"))
    if cnps:
        out.append(f"{plural(cnps, 'CNP')} from {dst}")
    if pauses:
        out.append(plural(pauses, "PFC pause frame"))
    if loss:
        out.append(f"{loss:,} gaps/retransmissions")
    return out


def _pauses_near(ctx: Context, dst: str, flows, start: int, end: int) -> int:
    """Pause frames in [start, end) that can belong to this incast: from the receiver's own NIC or
    from a switch port (a MAC that is no RoCE host), on a priority the incast flows use (or 802.3x
    PAUSE). Pauses another host's NIC sends, or sent at another time, are not this receiver's."""
    from roceview.diagnose.pfc import pause_frames
    from roceview.diagnose.priority import priority_rows

    frames = pause_frames(ctx)
    if not frames:
        return 0
    hosts = ctx.host_macs()
    row, prio, _ = priority_rows(ctx)
    mine = np.zeros(len(ctx.flow_names) + 1, bool)                # + 1: row -1, a flow not in the table
    mine[ctx.flow.rows(flows)] = True
    mine[-1] = False
    prios = {str(p) for p in prio[mine[row]].tolist()}
    n = 0
    for (mac, prio), rows in frames.items():
        owner = hosts.get(int(mac.replace(":", ""), 16))
        if (owner is not None and dst not in owner) or (prios and prio != "all" and prio not in prios):
            continue
        ts, q = rows[:, 0], rows[:, 1]
        n += int(np.count_nonzero((q > 0) & (ts >= start) & (ts < end)))
    return n
