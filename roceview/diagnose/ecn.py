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
from roceview.units import plural

# mlx5 RDMA hw counter names: drivers/infiniband/hw/mlx5/counters.c cong_cnts (docs/findings.md, Sources)
HW_COUNTERS = "/sys/class/infiniband/<dev>/ports/<port>/hw_counters/"
DCQCN_ADVICE = (f"On the receivers read np_ecn_marked_roce_packets and np_cnp_sent, on the senders rp_cnp_handled "
                f"and rp_cnp_ignored (mlx5 RDMA hw counters, {HW_COUNTERS}); keep switch ECN Kmin < Kmax < PFC XOFF "
                "on the RoCE queue.")


def _data_flows(ctx: Context):
    for name, f in ctx.flow.items():
        if f["data_packets"] and f["transport"] not in ("CNP", "UD"):
            yield name, f


def _ce(ctx: Context, name: str) -> tuple[int, int]:
    """(data packets, CE-marked data packets) of a flow."""
    ff, f = ctx.flow_facts.get(name), ctx.flow[name]
    return (ff.data, ff.data_ce) if ff is not None else (f["data_packets"], f["ecn_ce"])


def ecn_findings(ctx: Context) -> list[dict]:
    return _congestion(ctx) + _not_enabled(ctx) + _cnp_missing(ctx) + _incast(ctx)


def _congestion(ctx: Context) -> list[dict]:
    data_to: dict[str, list] = defaultdict(list)          # receiver -> its data flows, in flow order
    for n, f in _data_flows(ctx):
        data_to[f["dst_ip"]].append(n)
    cnp_flows_of: dict[str, list] = defaultdict(list)     # receiver -> the flows it sent CNPs on
    for n, f in ctx.flow.items():
        if f["cnp_packets"]:
            cnp_flows_of[f["src_ip"]].append(n)
    out = []
    for rx in sorted(set(data_to) | set(cnp_flows_of)):
        flows = data_to.get(rx, [])
        data = sum(_ce(ctx, n)[0] for n in flows)
        ce = sum(_ce(ctx, n)[1] for n in flows)
        cnps = ctx.cnps_from(rx)
        if not (ce or cnps):
            continue
        cnp_flows = cnp_flows_of.get(rx, [])
        share = ce / data if data else 0.0
        senders = sorted({ctx.flow[n]["src_ip"] for n in flows if _ce(ctx, n)[1]} | {ctx.flow[n]["dst_ip"] for n in cnp_flows})
        answer = (f"answered with {plural(cnps, 'CNP')}: DCQCN is cutting rates" if cnps
                  else "and no CNP came back: the senders are not told to slow down")
        summary = (f"ECN congestion toward {rx}: {plural(ce, 'CE-marked data packet')} ({share:.1%} of {data:,}) "
                   f"from {plural(len(senders), 'sender')}, {answer}.")
        if not ce:
            summary = (f"ECN congestion toward {rx}: it sent {plural(cnps, 'CNP')} to {plural(len(senders), 'sender')} "
                       "(the CE marks themselves are not visible at this capture point): DCQCN is cutting rates.")
        sev = "warning" if share >= ctx.config.ce_warning_share else "info"
        ts = [ctx.flow[n]["first_ts"] for n in flows + cnp_flows]
        te = [ctx.flow[n]["last_ts"] for n in flows + cnp_flows]
        evidence = [f"{ce:,} CE of {plural(data, 'data packet')} into {rx}", f"{plural(cnps, 'CNP')} from {rx} to {', '.join(senders)}"]
        out.append(finding(sev, "ecn_congestion", summary, [n for n in flows if _ce(ctx, n)[1]] + cnp_flows,
                           min(ts), max(te), evidence, DCQCN_ADVICE + " Marking under load is DCQCN working; "
                           "persistent high CE share means the path is oversubscribed."))
    return out


def _not_enabled(ctx: Context) -> list[dict]:
    per_src: dict[str, list] = defaultdict(list)
    for name, f in _data_flows(ctx):
        ff = ctx.flow_facts.get(name)
        if ff is not None and not ff.protos - {"ib", "roce_v1"}:
            continue  # native IB uses FECN/BECN; RoCEv1 is not IP: no switch marks it, whatever its GRH says
        if ff is not None:
            data = ff.data - ff.data_v1
            not_ect = data - ff.data_ect
        else:
            data, not_ect = f["packets"], f["ecn_not_ect"]
        per_src[f["src_ip"]].append((name, data, not_ect))
    out = []
    for src, rows in sorted(per_src.items()):
        data, not_ect = sum(r[1] for r in rows), sum(r[2] for r in rows)
        if not data or not_ect / data <= ctx.config.not_ect_share:
            continue
        flows = [r[0] for r in rows if r[2]]
        few = not_ect < ctx.config.not_ect_min_packets
        summary = (f"{src} sends RoCE data Not-ECT (ECN 00): {not_ect:,} of {data:,} data packets; switches cannot "
                   "mark them, so DCQCN is off and only PFC (or loss) limits congestion"
                   + (f" (only {plural(not_ect, 'packet')}: below {ctx.config.not_ect_min_packets:,}, too little "
                      "traffic to matter; soft-RoCE (rxe) sends Not-ECT by default and has no DCQCN at all)." if few else "."))
        evidence = [f"{not_ect:,} of {data:,} data packets (RoCEv2) from {src} have ECN 00 in {plural(len(flows), 'flow')}"]
        out.append(finding("info" if few else "warning", "ecn_not_enabled", summary, flows,
                           min(ctx.flow[n]["first_ts"] for n in flows), max(ctx.flow[n]["last_ts"] for n in flows),
                           evidence, NOT_ECT_ADVICE))
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
    for name, f in _data_flows(ctx):
        ce = ctx.ev("ecn_ce", name)
        marked = ce.ts[ce.ts <= late]
        if len(marked) and ctx.cnps_from(f["dst_ip"], f["src_ip"]) == 0:
            # the headline counts CE-marked data packets as ecn_congestion does; the wait only decides
            silent[f["dst_ip"]].append((name, _ce(ctx, name)[1] or len(marked), len(marked),
                                        int(marked.min()), int(marked.max())))
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


def _incast(ctx: Context) -> list[dict]:
    tl = ctx.timeline
    if not len(tl.get("flow", [])):
        return []
    bucket = int(float(ctx.summary.get("bucket_ms") or 1.0) * 1_000_000)
    width = max(bucket, int(ctx.config.incast_window_us * 1000))
    senders_of = {n: f["src_ip"] for n, f in _data_flows(ctx)}
    out = []
    for dst, w, flows in _busiest_windows(ctx, tl, width, senders_of):
        senders = sorted({senders_of[n] for n in flows})
        signals = _signals(ctx, dst, flows, w * width, (w + 1) * width)
        if len(senders) < ctx.config.incast_senders or not signals:
            continue
        summary = (f"Incast: {plural(len(senders), 'sender')} burst into {dst} within {width / 1e6:g} ms, with "
                   f"{', '.join(signals)} there.")
        advice = ("Many-to-one bursts overflow the egress queue toward the receiver: spread or stagger the senders "
                  "(collective algorithm, fewer outstanding READ/WRITE per QP), let DCQCN react early (lower Kmin), "
                  "and check the receiver's `ethtool -S` rx_prio<p>_discards and the switch egress port toward it "
                  "(drops, PFC sent). " + DCQCN_ADVICE)
        out.append(finding("warning", "incast", summary, sorted(flows), w * width,
                           (w + 1) * width, [f"senders: {', '.join(senders)}", *signals], advice))
    return out


def _busiest_windows(ctx: Context, tl, width: int, senders_of: dict) -> list[tuple[str, int, set]]:
    """Per receiver (sorted), the window of `width` ns whose timeline rows with bytes come from
    the most distinct senders (the first such window): (receiver, window number, its flows).
    Vectorised over the timeline's rows (flows x buckets: up to millions); Python only per flow."""
    flows = Coded.of(tl["flow"])                                  # the timeline's flow names
    distinct, code = flows.names, flows.codes
    dsts = sorted({ctx.flow[n]["dst_ip"] for n in distinct if n in senders_of})
    dst_code = {h: i for i, h in enumerate(dsts)}
    sender_code = {h: i for i, h in enumerate(sorted(set(senders_of.values())))}
    dst_of = np.array([dst_code[ctx.flow[n]["dst_ip"]] if n in senders_of else -1 for n in distinct], np.int64)
    sender_of = np.array([sender_code[senders_of[n]] if n in senders_of else -1 for n in distinct], np.int64)
    rows = np.flatnonzero((np.asarray(tl["bytes"]) != 0) & (dst_of[code] >= 0))
    if not len(rows):
        return []
    flow = code[rows]
    numbers, window = np.unique(np.asarray(tl["bucket_start"], np.int64)[rows] // width, return_inverse=True)
    # (receiver, window) as one integer key: np.unique on integers, not on rows of pairs (8x faster)
    keys, first, win = np.unique(dst_of[flow] * len(numbers) + window.reshape(-1), return_index=True,
                                 return_inverse=True)
    win = win.reshape(-1)
    n_senders = len(sender_code)
    distinct_senders = sorted_distinct(win * n_senders + sender_of[flow]) // n_senders
    senders = np.bincount(distinct_senders, minlength=len(keys))   # distinct senders per window
    receiver = keys // len(numbers)
    # per receiver, the window with the most senders, the first in row order among equals
    order = np.lexsort((first, -senders, receiver))
    picks = order[np.r_[True, receiver[order][1:] != receiver[order][:-1]]]
    chosen = np.full(len(keys), -1, np.int64)
    chosen[picks] = np.arange(len(picks))
    in_pick = chosen[win]                                         # each row's pick, or -1
    rows_of = np.flatnonzero(in_pick >= 0)
    by_pick = rows_of[np.argsort(in_pick[rows_of], kind="stable")]
    bounds = np.searchsorted(in_pick[by_pick], np.arange(len(picks) + 1))
    out = []
    for i, pick in enumerate(picks.tolist()):
        names = sorted_distinct(flow[by_pick[bounds[i]:bounds[i + 1]]]).tolist()
        out.append((dsts[receiver[pick]], int(numbers[keys[pick] % len(numbers)]), {distinct[f] for f in names}))
    return out


def _signals(ctx: Context, dst: str, flows, start: int, end: int) -> list[str]:
    ce = sum(_ce(ctx, n)[1] for n in flows)
    cnps = ctx.cnps_from(dst)
    loss = sum(ctx.flow[n]["gap_events"] + ctx.flow[n]["retransmitted_packets"] for n in flows)
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
    from roceview.diagnose.priority import flow_priorities

    hosts = ctx.host_macs()
    prios = {str(p) for n in flows for p in flow_priorities(ctx, n)}
    n = 0
    for (mac, prio), rows in pause_frames(ctx).items():
        owner = hosts.get(int(mac.replace(":", ""), 16))
        if (owner is not None and dst not in owner) or (prios and prio != "all" and prio not in prios):
            continue
        ts, q = rows[:, 0], rows[:, 1]
        n += int(np.count_nonzero((q > 0) & (ts >= start) & (ts < end)))
    return n
