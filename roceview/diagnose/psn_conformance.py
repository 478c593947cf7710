"""PSN findings that are about conformance and the capture, not loss: duplicate_frames (the
capture holds frames twice), ack_unsent_psn (a responder acknowledged a PSN never sent) and
pmtu_mismatch (the capture contradicts `--pmtu`).
Both come from analysis events (roceview/analysis/chunk_psn.py, roceview/analysis/unsent.py)."""
from __future__ import annotations

from roceview.analysis.chunk_psn import DUPLICATE_WINDOW_NS
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
    """Capture duplicates (analysis: `duplicate` events): one finding for the capture."""
    flows = ctx.flows_with("duplicate")
    if not flows:
        return []
    evs = {name: ctx.ev("duplicate", name) for name in flows}
    total = int(ctx.summary.get("detected", {}).get("duplicate_frames") or sum(len(e.ts) for e in evs.values()))
    worst = sorted(evs.items(), key=lambda kv: -len(kv[1].ts))
    evidence = [f"{name}: {plural(len(ev.ts), 'copy', 'copies')} at PSN {psn_list(ev.psn, 3)}" for name, ev in worst[:5]]
    if len(worst) > 5:
        evidence.append(f"{len(worst) - 5} more flows")
    evidence.append(f"each repeats the PSN, opcode, AckReq and lengths of its flow's previous packet within "
                    f"{duration(DUPLICATE_WINDOW_NS)}: not counted as retransmissions")
    summary = (f"The capture holds {plural(total, 'data frame')} twice, on {plural(len(flows), 'flow')}: the same "
               "frame delivered again within microseconds (a mirror of both ingress and egress, or two mirror "
               "sessions), not a retransmission.")
    advice = ("Capture quality, not a network problem: mirror each link once (ingress or egress, one session per "
              "port). Packet and byte counts in this report include the copies.")
    starts = [int(e.ts.min()) for e in evs.values()]
    ends = [int(e.ts.max()) for e in evs.values()]
    return [finding("info", "duplicate_frames", summary, flows, min(starts), max(ends), evidence, advice)]


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
