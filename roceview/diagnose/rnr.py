"""The NAKs other than a PSN sequence error: rnr (IBTA 9.7.5.2.8, the responder had no receive
WQE) and the requester that gave up when its rnr_retry budget was spent (the QP then is in the
error state); remote_error and invalid_rd_request (the responder refused a request)."""
from __future__ import annotations

import numpy as np

from dissectors.ib import RNR_TIMER_MS
from roceview.analysis.events import nak_meaning
from roceview.diagnose.context import Context, Events
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
        severity, (gave_up, why) = "warning", _rnr_gave_up(ctx, name, ev, waits)
        if gave_up:
            severity, summary = "critical", gave_up
        if why:
            evidence.append(why)
        out.append(finding(severity, "rnr", summary, ctx.pair(name),
                           int(ev.ts.min()), int(ev.ts.max()), evidence, advice))
    return out


RNR_GIVE_UP_TIMERS = 2      # silence this many RNR timers after the last RNR NAK: no resend is coming
# ... and at least this long: the timer is a minimum; soft-RoCE (rxe) rounds it up to whole
# jiffies (rxe_comp.c: max(usecs_to_jiffies(rnrnak_usec), 1)), up to 10 ms at HZ=100
RNR_GIVE_UP_FLOOR_NS = 10_000_000
RNR_RETRY_INFINITE = 7      # the QP attribute rnr_retry / CM RNR Retry Count that never runs out


def _rnr_gave_up(ctx, name, ev, waits: list[int]) -> tuple[str | None, str | None]:
    """(summary, evidence) when the requester stopped retrying, (None, evidence or None) when
    not. A requester resends after the RNR timer until its rnr_retry budget (IBTA 9.7.5.2.8;
    7 = infinite) is spent; then the send completes in error (IBV_WC_RNR_RETRY_EXC_ERR) and the
    QP goes to the error state. When RDMA CM negotiated the requester's RNR Retry Count (12.6.5,
    12.6.8: connections.csv) that decides: more RNR NAKs for one PSN than the count and no resend
    after the last is exhaustion, confirmed; 7 never is; fewer NAKs are not, whatever silence
    follows. Otherwise (_silent_after) the silence after the last RNR NAK tells. Only judged
    when the requester's own flow (the peer QP) is in the capture."""
    last = int(np.argmax(ev.ts))
    ts, psn, code = int(ev.ts[last]), int(ev.psn[last]), int(ev.col("rnr_timer")[last])
    requester = ctx.peer(name)
    if requester is None or requester not in ctx.flow:
        return None, None    # not the QP's own flow: another QP's silence says nothing
    naks, cm = int((ev.psn == psn).sum()), ctx.negotiated.get(requester)
    budget = cm.rnr_retry if cm is not None else -1
    told = f"rnr_retry_count {budget} negotiated (RDMA CM, connection {cm.connection if cm else ''})"
    if budget == RNR_RETRY_INFINITE:
        return None, f"{told}: the requester resends after RNR NAKs for ever, it cannot give up on them"
    if 0 <= budget < naks and not _resent_after(ctx, requester, psn, ts):
        return (f"The requester of {requester} gave up after {plural(naks, 'RNR NAK')} on PSN {psn}, more than the "
                f"{budget} RNR retries RDMA CM negotiated: the send completed in error (IBV_WC_RNR_RETRY_EXC_ERR) "
                "and the QP is in the error state.",
                f"{told}; {plural(naks, 'RNR NAK')} for PSN {psn} then no resend: the requester gave up "
                "(IBV_WC_RNR_RETRY_EXC_ERR)")
    silent = _silent_after(ctx, name, requester, ts, code, waits)
    if silent is None:
        return None, None
    if budget >= 0:
        return None, (f"{told}: {plural(naks, 'RNR NAK')} for PSN {psn} do not spend it, the requester did not "
                      f"give up on RNR; its silence for {duration(silent)} after the last is the application's "
                      "(or RNR NAKs the capture missed)")
    timer_ms = RNR_TIMER_MS[code]
    summary = (f"The requester of {requester} gave up after {plural(naks, 'RNR NAK')} on PSN {psn}: nothing more on "
               f"the QP pair for {duration(silent)} ({silent / (timer_ms * 1e6):.1f} RNR timers) while the capture "
               "went on; its rnr_retry budget is spent, the send completed in error (IBV_WC_RNR_RETRY_EXC_ERR) and "
               "the QP is in the error state.")
    evidence = (f"last RNR NAK at PSN {psn} (timer code {code} = {timer_ms:g} ms), no resend and no packet "
                f"of the QP pair in the {duration(silent)} after it")
    return summary, evidence


def _silent_after(ctx, name: str, requester: str, ts: int, code: int, waits: list[int]) -> int | None:
    """How long nothing was seen on the QP pair (no resend of the NAKed PSN, no ACK) after the
    last RNR NAK at `ts`, when that is at least RNR_GIVE_UP_TIMERS times the timer it asked for,
    twice the longest RNR NAK -> resend wait this QP showed and RNR_GIVE_UP_FLOOR_NS, while the
    capture went on; else None."""
    if not 0 <= code < len(RNR_TIMER_MS):
        return None
    if max(int(ctx.flow[n]["last_ts"]) for n in (name, requester)) > ts:
        return None
    silent = ctx.end_ns - ts
    if silent < max(RNR_GIVE_UP_TIMERS * RNR_TIMER_MS[code] * 1e6, 2 * max(waits, default=0), RNR_GIVE_UP_FLOOR_NS):
        return None
    return silent


def _resent_after(ctx, requester: str, psn: int, ts: int) -> bool:
    retx = ctx.ev("retransmit", requester)
    return bool(((retx.psn == psn) & (retx.ts > ts)).any())


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


INVALID_RD_REQUEST = "invalid RD request"    # NAK code 4 (IBTA Table 44): RD only, i.e. ConnectX DC
REMOTE_ERROR_ADVICE = (
    "Not a network problem: the responder refused the request. Remote access error: the R_Key / address range "
    "is not registered or lacks access rights (MR deregistered too early?); invalid request: opcode or length not "
    "allowed on the QP; remote operational error: responder-side failure. Check the NIC counters "
    "req_remote_access_errors / resp_remote_access_errors / req_remote_invalid_request and the application's "
    "completion status.")
INVALID_RD_REQUEST_ADVICE = (
    "DC (Dynamically Connected) is NVIDIA's vendor transport: the target refused the DC request (DC access key, "
    "DCT number or DCT state). Check the DC access key and DCT number the initiator uses, and the NIC's DC "
    "error counters.")


def remote_error_findings(ctx: Context) -> list[dict]:
    """remote_error per flow that NAKed with a code other than a sequence error, RNR or, on
    RD-range flows, Invalid RD Request. That code exists only for opcodes 0x40-0x5F, which on
    real wires are ConnectX DC transport (dissectors/opcodes.py), whose recovery is
    vendor-defined (the DC captures show a RESYNC 0x55 to the same target right after): the IBTA
    rule that a NAK moves an RC requester to the error state is not claimed, an info
    invalid_rd_request is reported instead."""
    out = []
    for name in ctx.flows_with("nak_other"):
        ev, rd = ctx.ev("nak_other", name), None
        if ctx.flow[name]["transport"] == "RD":
            ev, rd = _split(ev, INVALID_RD_REQUEST)
        by, of = ctx.flow[name]["src_ip"], ctx.peer(name) or "its peer"
        if rd is not None and len(rd.ts):
            summary = (f"{by} answered {plural(len(rd.ts), 'request')} of {of} with NAK invalid RD request "
                       "(ConnectX DC transport).")
            out.append(_nak_finding(ctx, name, rd, "info", "invalid_rd_request", summary, INVALID_RD_REQUEST_ADVICE))
        if len(ev.ts):
            kinds = sorted({nak_meaning(x) for x in ev.col("aeth_syndrome").tolist()})
            summary = (f"{by} rejected requests of {of} with {', '.join(kinds)}: the requester's QP moves to the "
                       "error state.")
            out.append(_nak_finding(ctx, name, ev, "critical", "remote_error", summary, REMOTE_ERROR_ADVICE))
    return out


def _nak_finding(ctx: Context, name: str, ev: Events, severity: str, kind: str, summary: str, advice: str) -> dict:
    evidence = [f"{plural(len(ev.ts), 'NAK')} at PSN {psn_list(ev.psn)}: {'; '.join(ev.detail[:3])}"]
    return finding(severity, kind, summary, ctx.pair(name),
                   int(ev.ts.min()), int(ev.ts.max()), evidence, advice)


def _split(ev: Events, text: str) -> tuple[Events, Events]:
    """(NAK events whose code means something else, NAK events whose code means `text`)."""
    has = np.array([nak_meaning(x) == text for x in ev.col("aeth_syndrome").tolist()], dtype=bool)
    return ev.select(~has), ev.select(has)
