"""PSN findings that are about conformance and the capture, not loss: duplicate_frames and
capture_points (the capture holds frames twice: roceview/analysis/copies.py), ack_unsent_psn (a
responder acknowledged a PSN never sent: roceview/analysis/unsent.py) and pmtu_mismatch (the
capture contradicts `--pmtu`)."""
from __future__ import annotations

import numpy as np

from roceview.analysis.copies import COPY_WINDOW_NS, DUPLICATE_WINDOW_NS
from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding, psn_list
from roceview.units import duration, plural


def unsent_ack_findings(ctx: Context) -> list[dict]:
    """ack_unsent_psn per responder flow (analysis: `ack_unsent_psn` events, roceview/analysis/unsent.py)."""
    out = []
    for name in ctx.flows_with("ack_unsent_psn"):
        ev = ctx.ev("ack_unsent_psn", name)
        peer = ctx.peer(name) or "its requester"
        evidence = [f"{plural(len(ev.ts), 'response')} at PSN {psn_list(ev.psn)}: {ev.detail[0]}",
                    "a response acknowledges request PSNs up to its own (IBTA 9.7.5): this one names none "
                    "that was sent"]
        summary = (f"{ctx.flow[name]['src_ip']} answered {peer} with {plural(len(ev.ts), 'response')} for "
                   f"{plural(len(ev.ts), 'PSN')} the requester never sent: a responder conformance error (the "
                   "requester cannot match it to a request and ignores it).")
        advice = ("A responder bug, not the network: its ACK PSN must be the PSN of the last request it "
                  "acknowledges (IBTA 9.7.5). Check the responder's PSN tracking (initial PSN from the CM "
                  "REQ/REP, the PSN after an RDMA READ); hardware RNICs do not do this, software responders may.")
        out.append(finding("warning", "ack_unsent_psn", summary, ctx.pair(name),
                           int(ev.ts.min()), int(ev.ts.max()), evidence, advice))
    return out


def duplicate_findings(ctx: Context) -> list[dict]:
    """Second captures of frames (analysis: `duplicate` events, roceview/analysis/copies.py): one
    finding for the capture, `duplicate_frames` when the copies come within DUPLICATE_WINDOW_NS
    (one mirror replicating frames), `capture_points` when later (two points of capture)."""
    flows = ctx.flows_with("duplicate")
    if not flows:
        return []
    evs = {name: ctx.ev("duplicate", name) for name in flows}
    total = int(ctx.summary.get("detected", {}).get("duplicate_frames") or sum(len(e.ts) for e in evs.values()))
    delays = np.concatenate([e.col("copy_delay_ns") for e in evs.values()])
    median = int(np.median(delays))
    worst = sorted(evs.items(), key=lambda kv: -len(kv[1].ts))
    evidence = [f"{name}: {plural(len(ev.ts), 'copy', 'copies')} at PSN {psn_list(ev.psn, 3)}, "
                f"{delay_span(ev.col('copy_delay_ns'))} after the first capture" for name, ev in worst[:5]]
    if len(worst) > 5:
        evidence.append(f"{len(worst) - 5} more flows")
    evidence.append(f"each repeats an earlier frame's flow, PSN, opcode, lengths and IPv4 identification (a resend "
                    f"is a new datagram with a new identification, and no endpoint resends within "
                    f"{duration(DUPLICATE_WINDOW_NS)}); counted once, at its first capture (the frame totals count both)")
    starts, ends = [int(e.ts.min()) for e in evs.values()], [int(e.ts.max()) for e in evs.values()]
    if median <= DUPLICATE_WINDOW_NS:
        summary = (f"The capture holds {plural(total, 'frame')} twice, on {plural(len(flows), 'flow')}: the same "
                   "frame delivered again within microseconds (a mirror of both ingress and egress, or two mirror "
                   "sessions), not a retransmission.")
        advice = ("Capture quality, not a network problem: mirror each link once (ingress or egress, one session "
                  "per port). The QP table counts each frame once.")
        return [finding("info", "duplicate_frames", summary, flows, min(starts), max(ends), evidence, advice)]
    summary = (f"The capture holds {plural(total, 'frame')} twice, on {plural(len(flows), 'flow')}, the second "
               f"capture {duration(median)} after the first (median): two capture points (mirrors on two "
               "switches, or two captures of the same traffic), each frame counted once.")
    evidence.append(f"copies up to {duration(COPY_WINDOW_NS)} after the first capture are recognised")
    advice = ("Not a network problem. Times are those of each frame's first capture, which may be at either "
              "point: an RTT or NAK-to-resend delay can pair the two points and be off by up to their offset. "
              "To time one point, capture there alone (one mirror session, or one of the files).")
    return [finding("info", "capture_points", summary, flows, min(starts), max(ends), evidence, advice)]


def two_capture_points(ctx: Context) -> bool:
    """Whether the capture holds its frames twice from two points (the second copies come later than
    DUPLICATE_WINDOW_NS, median): the capture_points finding's condition."""
    flows = ctx.flows_with("duplicate")
    if not flows:
        return False
    delays = np.concatenate([ctx.ev("duplicate", name).col("copy_delay_ns") for name in flows])
    return int(np.median(delays)) > DUPLICATE_WINDOW_NS


def delay_span(ns) -> str:
    """'a' or 'a to b': the least and the most of durations `ns`."""
    lo, hi = int(ns.min()), int(ns.max())
    return duration(lo) if lo == hi else f"{duration(lo)} to {duration(hi)}"


def pmtu_findings(ctx: Context) -> list[dict]:
    """pmtu_mismatch: `--pmtu` that the capture contradicts (analysis summary `pmtu_contradiction`)."""
    why = ctx.summary.get("pmtu_contradiction")
    if not why:
        return []
    given = ctx.summary.get("pmtu")
    summary = (f"--pmtu {given} contradicts the capture: {why}. READ spans, gaps, retransmissions and psn_reuse "
               "computed with it may be false.")
    evidence = [why, "a FIRST/MIDDLE packet carries exactly one path MTU, any packet at most one (IBTA 9.7.7)"]
    advice = ("Run again without --pmtu (roceview then takes the path MTU of each path from the traffic), or give "
              "the path MTU the QPs really use (ibv_query_qp path_mtu; the RDMA CM REQ carries it).")
    return [finding("warning", "pmtu_mismatch", summary, [], ctx.start_ns, ctx.end_ns, evidence, advice)]
