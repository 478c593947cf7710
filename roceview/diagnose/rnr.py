"""rnr: RNR NAKs (IBTA 9.7.5.2.8, the responder had no receive WQE), and the requester that
gave up when its rnr_retry budget was spent (the QP then is in the error state)."""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context
from dissectors.ib import RNR_TIMER_MS
from roceview.diagnose.finding import finding, psn_list
from roceview.units import duration, plural



def rnr_findings(ctx: Context) -> list[dict]:
    out = []
    for name in ctx.flows_with("nak_rnr"):
        ev = ctx.ev("nak_rnr", name)
        codes = sorted({c for c in ev.col("rnr_timer").tolist() if c >= 0})
        timers = ", ".join(f"code {c} = {RNR_TIMER_MS[c]:g} ms" for c in codes)
        waits = _rnr_waits(ctx, name, ev)
        evidence = [f"{plural(len(ev.ts), 'RNR NAK')} at PSN {psn_list(ev.psn)}", f"RNR timer {timers or 'unknown'}"]
        if waits:
            evidence.append(f"RNR NAK to resend median {duration(np.median(waits))}, min {duration(min(waits))}")
        summary = (f"The receiver of {ctx.peer(name) or name} had no receive WQE posted: "
                   f"{plural(len(ev.ts), 'RNR NAK')} ({timers or 'timer unknown'}).")
        advice = ("The application posts receive buffers too slowly: post more receive WQEs up front (larger RQ "
                  "or SRQ), repost sooner; raise the responder QP's min_rnr_timer (the wait it asks for) and the "
                  "requester's `rnr_retry` (7 = infinite). Counters (mlx5 RDMA hw counters): the requester's "
                  "rnr_nak_retry_err counts RNR NAKs received within the retry limit, req_rnr_retries_exceeded "
                  "(and an RNR-retry-exceeded completion error) the times it gave up; the responder's "
                  "out_of_buffer counts requests that found no receive WQE.")
        severity, gave_up = "warning", _rnr_gave_up(ctx, name, ev, waits)
        if gave_up:
            severity, summary = "critical", gave_up[0]
            evidence.append(gave_up[1])
        out.append(finding(severity, "rnr", summary, ctx.pair(name),
                           int(ev.ts.min()), int(ev.ts.max()), evidence, advice))
    return out


RNR_GIVE_UP_TIMERS = 2      # silence this many RNR timers after the last RNR NAK: no resend is coming
# ... and at least this long: the timer is a minimum; soft-RoCE (rxe) rounds it up to whole
# jiffies (rxe_comp.c: max(usecs_to_jiffies(rnrnak_usec), 1)), up to 10 ms at HZ=100
RNR_GIVE_UP_FLOOR_NS = 10_000_000


def _rnr_gave_up(ctx, name, ev, waits: list[int]) -> tuple[str, str] | None:
    """(summary, evidence) when the requester stopped retrying: after the last RNR NAK nothing
    more was seen on the QP pair (no resend of the NAKed PSN, no ACK) for RNR_GIVE_UP_TIMERS
    times the timer that NAK asked for, twice the longest RNR NAK -> resend wait this QP showed
    and RNR_GIVE_UP_FLOOR_NS, while the capture went on. A requester resends after the RNR
    timer until its rnr_retry budget (IBTA 9.7.5.2.8; 7 = infinite) is spent; then the send
    completes in error (IBV_WC_RNR_RETRY_EXC_ERR) and the QP goes to the error state. Only
    judged when the requester's own flow (the peer QP) is in the capture."""
    last = int(np.argmax(ev.ts))
    ts, psn, code = int(ev.ts[last]), int(ev.psn[last]), int(ev.col("rnr_timer")[last])
    if not 0 <= code < len(RNR_TIMER_MS):
        return None
    timer_ns = RNR_TIMER_MS[code] * 1e6
    requester = ctx.peer(name)
    if requester is None or requester not in ctx.flow:
        return None          # not the QP's own flow: another QP's silence says nothing
    if max(int(ctx.flow[n]["last_ts"]) for n in (name, requester)) > ts:
        return None
    silent = ctx.end_ns - ts
    if silent < max(RNR_GIVE_UP_TIMERS * timer_ns, 2 * max(waits, default=0), RNR_GIVE_UP_FLOOR_NS):
        return None
    naks = int((ev.psn == psn).sum())
    summary = (f"The requester of {requester} gave up after {plural(naks, 'RNR NAK')} on PSN {psn}: nothing more on "
               f"the QP pair for {duration(silent)} ({silent / timer_ns:.1f} RNR timers) while the capture went on; "
               "its rnr_retry budget is spent, the send completed in error (IBV_WC_RNR_RETRY_EXC_ERR) and the QP "
               "is in the error state.")
    evidence = (f"last RNR NAK at PSN {psn} (timer code {code} = {RNR_TIMER_MS[code]:g} ms), no resend and no packet "
                f"of the QP pair in the {duration(silent)} after it")
    return summary, evidence


def _rnr_waits(ctx, name, ev) -> list[int]:
    peer = ctx.peer(name)
    if not peer:
        return []
    retx = ctx.ev("retransmit", peer)
    waits = []
    for ts, psn in zip(ev.ts.tolist(), ev.psn.tolist()):
        m = (retx.ts > ts) & (retx.psn == psn)
        if m.any():
            waits.append(int(retx.ts[m][0] - ts))
    return waits
