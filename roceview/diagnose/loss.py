"""Loss findings: network_loss, capture_loss, timeout_retransmit, psn_reuse, unreliable_gap,
duplicate_frames, ack_unsent_psn; rnr, remote_error and invalid_rd_request come from rnr.py.

A PSN gap is judged by what the endpoints did about it (IBTA 9.7.5): a NAK PSN sequence error for
the first missing PSN, or its retransmission, means the network lost it; neither means the
receiver had it all along and only the capture missed it. Gaps in a flow's response space are
normal (a coalesced ACK or a READ response implicitly acknowledges earlier PSNs) unless a READ
response sequence itself breaks (FactCollector.read_breaks).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.diagnose.capture import capture_loss_finding
from roceview.diagnose.clocks import ByPsn, naked_resends, resent_before
from roceview.diagnose.context import PSN_MOD, Context, Events, in_arcs, requester_side
from roceview.diagnose.finding import finding, psn_list
from roceview.diagnose.priority import dcb_map, flow_priorities, keep_on, pfc_vector, protected_priorities
from roceview.diagnose.reorder import gap_numbers, late_ts, reorder_findings, reordered_gap, spurious_nak
from roceview.diagnose.reread import reread_text, rereads
from roceview.diagnose.rnr import remote_error_findings, rnr_findings
from roceview.diagnose.psn_conformance import duplicate_findings, pmtu_findings, unsent_ack_findings
from roceview.units import duration, plural

# Counter names: mlx5 counters.rst (ethtool) and drivers/infiniband/hw/mlx5/counters.c (RDMA hw
# counters); docs/findings.md, Sources.
LOSS_ADVICE = ("Read `ethtool -S <if>` rx_prio<p>_discards and rx_discards_phy on both hosts and the switch "
               "port drop counters for the RoCE priority; on the NICs compare the RDMA hw counters "
               "out_of_sequence (the receiver's: requests that arrived out of order) and packet_seq_err (the "
               "requester's: NAK sequence errors it received) and implied_nak_seq_err (the requester's: an ACK "
               "beyond an incomplete RDMA READ, i.e. a lost READ response) with the NAKs and retransmissions seen here. "
               "Lossless RoCE needs PFC on its priority end to end (`mlnx_qos -i <if> --trust dscp --pfc "
               "{vector}` or `dcb pfc set dev <if> prio-pfc {dcb}`) and the same MTU end to end; for "
               "bit errors read rx_crc_errors_phy, rx_symbol_err_phy and rx_corrected_bits_phy.")


def loss_advice(ctx: Context, name: str) -> str:
    """LOSS_ADVICE with a PFC vector that keeps PFC on where it is (DCBX, --pfc-priorities, PFC
    frames seen) and adds the flow's own priority (3 when none is known)."""
    prios = keep_on(ctx, protected_priorities(ctx)[0]) | (set(flow_priorities(ctx, name)) or {3})
    return LOSS_ADVICE.format(vector=pfc_vector(prios), dcb=dcb_map(prios))


@dataclass
class FlowLoss:
    naks: list = field(default_factory=list)       # (nak ts, psn, retx delay ns|None, resent, gen delay|None)
    net_gaps: list = field(default_factory=list)   # (ts, first missing, count)
    cap_gaps: list = field(default_factory=list)
    blind: bool = False     # the requester's direction is not in the capture (or the filter)
    spurious: list = field(default_factory=list)   # (nak ts, psn, resent): NAKs reordering caused
    rereads: list = field(default_factory=list)    # (ts, psn): READs asked again, responses lost


def loss_findings(ctx: Context) -> list[dict]:
    per_flow: dict[str, FlowLoss] = {}
    out = []
    for name in ctx.flows_with("gap"):
        out += _classify_gaps(ctx, name, per_flow)
    for name in ctx.flows_with("nak_seq"):
        _naks(ctx, name, per_flow)
    for name in ctx.flows_with("timeout_retransmit"):
        if rereads(ctx, name):
            per_flow.setdefault(name, FlowLoss()).rereads = rereads(ctx, name)
    for name, fl in sorted(per_flow.items()):
        if fl.naks or fl.net_gaps or fl.rereads:
            out.append(_network_loss(ctx, name, fl))
    out += reorder_findings(ctx, {name: fl.spurious for name, fl in per_flow.items() if fl.spurious})
    too_soon: dict = {}
    timeouts = _timeouts(ctx, too_soon)
    captured = {name: fl.cap_gaps for name, fl in per_flow.items() if fl.cap_gaps}
    if captured or too_soon:
        out.append(_capture_loss(ctx, captured, too_soon))
    out += timeouts + _psn_reuse(ctx) + rnr_findings(ctx) + remote_error_findings(ctx)
    out += duplicate_findings(ctx) + unsent_ack_findings(ctx) + pmtu_findings(ctx)
    return out


# ---- gaps ------------------------------------------------------------------------------------
def _classify_gaps(ctx: Context, name: str, per_flow) -> list[dict]:
    flow = ctx.flow.get(name)
    if flow is None or flow["transport"] in ("UD", "CNP", "") or flow["dest_qp"] in (0, 1):
        return []  # datagrams and management QPs: several senders share one key, PSNs interleave
    gaps = ctx.ev("gap", name)
    if not ctx.is_reliable(name):
        return [_unreliable(ctx, name, gaps)]
    breaks = ctx.read_breaks().get(name, [])
    for ts, psn, count, first in zip(gaps.ts.tolist(), gaps.psn.tolist(), *gap_numbers(gaps)):
        if _response_space(ctx, name, psn):
            if not any(b[0] == ts and b[1] == psn for b in breaks):
                continue  # implicit acknowledgement of earlier PSNs, not a missing packet
            lost = _reread(ctx, name, ts, first, psn)
        elif reordered_gap(ctx, name, ts, first):
            continue  # the missing PSN arrived late, before any resend could: reordering
        else:
            lost = _nak_for(ctx, name, ts, first, psn) or _resent(ctx, name, ts, first, psn)
        target = per_flow.setdefault(name, FlowLoss())
        (target.net_gaps if lost else target.cap_gaps).append((ts, first, count))
    return []


def _response_space(ctx: Context, name: str, psn: int) -> bool:
    ff = ctx.flow_facts.get(name)
    if ff is None:
        return False
    return in_arcs(psn, ff.response_arc, 0) and not in_arcs(psn, ff.request_arc, 0)


def _between(psn: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """PSNs in the serial range [lo, hi]."""
    return (psn - lo) % PSN_MOD <= (hi - lo) % PSN_MOD


def _window(ctx: Context, ev, ts: int) -> np.ndarray:
    return (ev.ts >= ts) & (ev.ts <= ts + int(ctx.config.nak_window_us * 1000))


def _nak_for(ctx, name, ts, first, psn) -> bool:
    for other in requester_side(ctx, name):
        ev = ctx.ev("nak_seq", other)
        if (_window(ctx, ev, ts) & _between(ev.psn, first, psn)).any():
            return True
    return False


def _resent(ctx, name, ts, first, psn) -> bool:
    """A missing PSN resent later: lost on the way, unless an RNR NAK explains the resend: the
    requester resends from the RNR-NAKed PSN on (IBTA 9.7.5.2.8), so a PSN after it that only
    the capture missed comes again too. Excused only when that resend run (a resend of the
    NAKed PSN, at most read_rerequest_span PSNs before the gap) starts after the gap and at or
    before the missing PSN's resend."""
    ev = ctx.ev("retransmit", name)
    hits = ev.ts[_window(ctx, ev, ts + 1) & _between(ev.psn, first, (psn - 1) % PSN_MOD)]
    if not len(hits):
        return False
    window, span = int(ctx.config.nak_window_us * 1000), ctx.config.read_rerequest_span
    for other in requester_side(ctx, name):
        rnr = ctx.ev("nak_rnr", other)
        near = (rnr.ts >= ts - window) & (rnr.ts < int(hits.min())) & ((first - rnr.psn) % PSN_MOD <= span)
        for pn in set(rnr.psn[near].tolist()):
            if ((ev.psn == pn) & (ev.ts >= ts) & (ev.ts <= int(hits.min()))).any():
                return False
    return True


def _reread(ctx, name, ts, first, psn) -> bool:
    """A missing READ response that the requester asked for again (a new READ request)."""
    lo = (first - ctx.config.read_rerequest_span) % PSN_MOD
    for other in requester_side(ctx, name):
        ev = ctx.ev("retransmit", other)
        if (_window(ctx, ev, ts + 1) & _between(ev.psn, lo, psn)).any():
            return True
    return False


# A NAK before the requester's first captured packet (its resend, if that packet, is not told
# from a first send: the first packet of a PSN space is no retransmission), or stamped after its
# resend by a skewed clock (clocks.resent_before): not "unrecovered", and no NAK-to-resend delay.
UNSEEN = -1


# ---- NAK PSN sequence error -> go-back-N -----------------------------------------------------
def _naks(ctx: Context, responder: str, per_flow) -> None:
    naks = ctx.ev("nak_seq", responder)
    requesters = requester_side(ctx, responder)
    req = requesters[0] if len(requesters) == 1 else None
    retx = ctx.ev("retransmit", req) if req else None
    gaps = ctx.ev("gap", req) if req else None
    target = per_flow.setdefault(req or responder, FlowLoss())
    target.blind = not requesters
    nts = naks.ts.tolist() + [np.iinfo(np.int64).max]
    early = resent_before(ctx, responder, req) if req else [None] * len(naks.ts)
    if retx is not None:
        resends = ByPsn(retx.ts, retx.psn)
        gap_at = ByPsn(gaps.ts, np.array(gap_numbers(gaps)[1], dtype=np.int64))
        # the resends between each NAK and the next (retx.ts is in time order)
        window = np.searchsorted(retx.ts, nts[:-1], "right"), np.searchsorted(retx.ts, nts[1:], "left")
    for i, (ts, e) in enumerate(zip(naks.ts.tolist(), naks.psn.tolist())):
        delay = resent = gen = None
        if retx is not None:
            first = resends.first_after(e, ts)
            if first is not None:
                delay = first - ts
            elif ctx.flow[req]["first_ts"] > ts or early[i] is not None:
                delay = UNSEEN        # the capture began between the NAK and the requester's first packet,
                                      # or the NAK is stamped after its resend (clocks.py: clock_skew)
            lo, hi = int(window[0][i]), int(window[1][i])
            resent = max(0, hi - lo)
            gap = gap_at.last_until(e, ts)
            if gap is not None:
                gen = ts - gap
            if spurious_nak(ctx, req, ts, e):     # its resends, not the late originals among them
                late = late_ts(ctx, req)
                resent = sum((t, p) not in late for t, p in zip(retx.ts[lo:hi].tolist(), retx.psn[lo:hi].tolist()))
                target.spurious.append((ts, e, resent))
                continue
        target.naks.append((ts, e, delay, resent, gen))


def _network_loss(ctx: Context, name: str, fl: FlowLoss) -> dict:
    unrecovered = [] if fl.blind else [e for _, e, d, _, _ in fl.naks if d is None]
    # the QP table's count, so the finding and the table agree whatever --filter or the capture
    # point left out (NAKs filtered away still leave the resent packets in this flow)
    table = int(ctx.flow[name]["retransmitted_packets"])
    # ... less what reordering explains (late originals, spurious NAKs' go-back-N: its finding)
    reordered = len(late_ts(ctx, name)) + sum(r for *_, r in fl.spurious)
    resent = max(0, table - reordered)
    delays = [d for _, _, d, _, _ in fl.naks if d is not None and d != UNSEEN]
    gens = [g for *_, g in fl.naks if g is not None]
    times = [t for t, *_ in fl.naks] + [t for t, *_ in fl.net_gaps] + [t for t, _ in fl.rereads]
    gap_psns = sum(c for *_, c in fl.net_gaps)
    evidence = [f"{plural(len(fl.naks), 'NAK')} (PSN sequence error) at PSN {psn_list([e for _, e, *_ in fl.naks])}"
                if fl.naks else "no NAK: a lost READ response is not NAKed, the requester reads again" if fl.rereads
                else "no NAK captured" + ("" if requester_side(ctx, name) else
                                          " (the other direction is not in this capture or filter)"),
                "the requester's direction is not in this capture or filter: its resends cannot be seen" if fl.blind
                else f"{plural(resent, 'packet')} resent (the QP table's retx"
                + (f", {table:,}, less {reordered:,} that reordering explains)" if reordered else ")")
                + (f", {sum(r or 0 for *_, r, _ in fl.naks):,} of them by go-back-N after the NAKs" if fl.naks else "")]
    if fl.rereads:
        evidence.append(reread_text(fl.rereads))
    if fl.net_gaps:
        evidence.append(f"{plural(len(fl.net_gaps), 'gap')} of {plural(gap_psns, 'PSN')} seen before the "
                        "NAK/retransmission (capture point after the loss point)")
    elif not fl.rereads:
        evidence.append("retransmissions without a gap (capture point before the loss point)")
    if gens:
        evidence.append(f"NAK generation delay median {duration(np.median(gens))}, max {duration(max(gens))}")
    if delays:
        evidence.append(f"NAK-to-retransmission delay median {duration(np.median(delays))}, "
                        f"max {duration(max(delays))}")
    if unrecovered:
        evidence.append(f"never retransmitted after the NAK: PSN {psn_list(unrecovered)}")
    n_lost = len(fl.naks) or len(fl.net_gaps) or len(fl.rereads)
    told = (f"{plural(len(fl.naks), 'NAK')}, " if fl.naks else
            f"{plural(len(fl.net_gaps), 'gap')} of {plural(gap_psns, 'PSN')}, no NAK captured, " if fl.net_gaps else
            f"{plural(len(fl.rereads), 'READ')} asked again for lost responses, ")
    summary = (f"Flow {name} lost packets in the network: {told}"
               + ("the requester's direction not captured" if fl.blind else
                  f"{plural(resent, 'packet')} resent")
               + (f", {plural(len(unrecovered), 'PSN')} not recovered" if unrecovered else "") + ".")
    return finding("critical" if unrecovered else "warning", "network_loss", summary,
                   [name] + requester_side(ctx, name)[:1] if n_lost else [name],
                   min(times), max(times), evidence, loss_advice(ctx, name))


def _unreliable(ctx: Context, name: str, gaps) -> dict:
    total = sum(gap_numbers(gaps)[0])
    summary = (f"Flow {name} ({ctx.flow[name]['transport']}) skips {plural(total, 'PSN')} in "
               f"{plural(len(gaps.ts), 'gap')}: lost in the network or by the capture (an unreliable "
               "transport sends no ACK or NAK that would tell which).")
    return finding("info", "unreliable_gap", summary, [name], int(gaps.ts.min()), int(gaps.ts.max()),
                   [f"{plural(len(gaps.ts), 'gap')} totalling {plural(total, 'PSN')}"],
                   "Compare the receiver's `ethtool -S` rx_discards_phy / rx_prio<p>_discards and switch drop "
                   "counters with these gaps.")


# ---- timeouts, RNR, other NAKs ---------------------------------------------------------------
def _timeouts(ctx: Context, too_soon: dict) -> list[dict]:
    """timeout_retransmit runs whose delay from the original send is plausible for an ACK
    timeout (unknown when the original was not captured): at least the Local ACK Timeout RDMA CM
    negotiated for the requester (IBTA 9.7.6.1.3: the timer runs 4.096 us x 2^t at least), else
    at least config ack_timeout_floor_us. A CM flow's resends sooner than its negotiated timeout
    go to `too_soon` (flow -> (ts, psn, delays)): a NAK the capture missed asked for them."""
    out = []
    floor_ns = ctx.config.ack_timeout_floor_us * 1000
    for name in ctx.flows_with("timeout_retransmit"):
        ev = ctx.ev("timeout_retransmit", name)
        delays = _resend_delays(ev)
        cm = ctx.negotiated.get(name)
        least = cm.ack_timeout_ns if cm is not None and cm.ack_timeout_ns else floor_ns
        late = late_ts(ctx, name) | set(rereads(ctx, name))   # late originals, re-reads: no ACK timeout
        naked = naked_resends(ctx, name, ev, floor_ns)
        other = ~naked & np.array([(t, p) not in late for t, p in zip(ev.ts.tolist(), ev.psn.tolist())], dtype=bool)
        plausible = ((delays < 0) | (delays >= least)) & other
        soon = ~plausible & other
        # a tail packet (nothing sent beyond it) draws no PSN sequence error NAK: resent after the
        # floor, its own timer did it, shorter than CM carried (rdma_set_option overrides it)
        own_timer = soon & (_sent_beyond(ev) == 0) & (delays >= floor_ns) if least != floor_ns else soon & False
        plausible, soon = plausible | own_timer, soon & ~own_timer
        if least != floor_ns and soon.any():
            too_soon[name] = (ev.ts[soon], ev.psn[soon], delays[soon])
        if not plausible.any():
            continue
        ts, psn, known = ev.ts[plausible], ev.psn[plausible], delays[plausible & (delays >= 0)]
        evidence = [f"{plural(len(ts), 'retransmission')} with no NAK since the previous one, at PSN {psn_list(psn)}"]
        if len(known):
            evidence.append(f"delay from the original send median {duration(np.median(known))}, "
                            f"min {duration(known.min())} " + (
                                f"(the Local ACK Timeout RDMA CM negotiated: {cm.ack_timeout_text()}, connection "
                                f"{cm.connection}; resends after {duration(known.min())})" if least != floor_ns else
                                f"(an ACK timeout is at least {duration(floor_ns)}: ack_timeout_floor_us)"))
        if own_timer.any():
            mine = delays[own_timer]
            evidence.append(f"{plural(len(mine), 'resend')} of the last packet sent (no later PSN for a NAK to "
                            f"follow) came {duration(mine.min())} to {duration(mine.max())} after the original "
                            "send, sooner than the negotiated timeout: the QP's ACK timeout is not the one RDMA CM "
                            "carried (the application set its own: rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT)")
        if len(known) < len(ts):
            evidence.append(f"{plural(len(ts) - len(known), 'original send')} not in the capture")
        if soon.any():
            evidence.append(f"{plural(int(soon.sum()), 'more resend')} without a NAK came sooner than that "
                            "after the original send: not a timeout (reordering, or a NAK the capture missed)")
        if naked.any():
            evidence.append(f"{plural(int(naked.sum()), 'more resend')} answered a NAK of its PSN stamped out of "
                            "order with it (a run under way, or the capture's clocks: clock_skew)")
        summary = (f"Flow {name} resent {plural(len(ts), 'packet')} that no NAK explains: tail loss recovered "
                   "only by the requester's ACK timer (Local ACK Timeout).")
        advice = ("Each costs a full ACK timeout (4.096 us x 2^timeout). Read the requester's RDMA hw counter "
                  "local_ack_timeout_err (its ACK timer expired), req_transport_retries_exceeded (retries ran "
                  "out) and the drop counters (`ethtool -S` rx_prio<p>_discards, rx_discards_phy) along the path; "
                  "lower the QP `timeout` (NCCL_IB_TIMEOUT) only if the fabric RTT allows, keep `retry_cnt` at 7.")
        out.append(finding("warning", "timeout_retransmit", summary, [name], int(ts.min()),
                           int(ts.max()), evidence, advice))
    return out


def _capture_loss(ctx: Context, captured: dict, too_soon: dict) -> dict:
    """capture_loss: the gaps the endpoints never noticed, and the NAKs the capture missed (CM
    flows' resends sooner than their negotiated ACK timeout, _missed_naks)."""
    if captured:
        record = capture_loss_finding(captured, ctx.summary.get("capture_drops"))
        if too_soon:
            record["evidence"] += "; ".join([""] + _missed_naks(ctx, too_soon))
            record["flows"] = ";".join(sorted(set(record["flows"].split(";")) | set(too_soon)))
        return record
    n = sum(len(v[0]) for v in too_soon.values())
    times = np.concatenate([v[0] for v in too_soon.values()])
    summary = (f"The capture missed the NAKs that asked for {plural(n, 'resend')} on {plural(len(too_soon), 'flow')}: "
               "they came sooner than the ACK timeout RDMA CM negotiated, so no timer sent them.")
    advice = ("Counts from this capture are lower bounds. Check the mirror of the responder's direction (SPAN "
              "oversubscription, mirror drop counters, capture host `ethtool -S` rx_discards_phy / "
              "rx_out_of_buffer, `tcpdump -B`); the requester's RDMA hw counters packet_seq_err (NAK sequence "
              "errors) and rnr_nak_retry_err (RNR NAKs) tell which NAKs it got.")
    return finding("warning", "capture_loss", summary, sorted(too_soon), int(times.min()), int(times.max()),
                   _missed_naks(ctx, too_soon), advice)


def _missed_naks(ctx: Context, too_soon: dict) -> list[str]:
    """Evidence for capture_loss: resends of CM flows sooner than the negotiated ACK timeout with
    no NAK captured. The requester resends before its timer only on a NAK (PSN sequence error, or
    RNR: IBTA 9.7.5.2), so one came and the capture missed it (the late originals of reordering,
    READs asked again and NAKs stamped out of order are set apart before)."""
    out = []
    for name, (ts, psn, delays) in sorted(too_soon.items()):
        cm, known = ctx.negotiated[name], delays[delays >= 0]
        out.append(f"{name}: {plural(len(ts), 'resend')} at PSN {psn_list(psn, 3)} with no NAK captured, "
                   f"{duration(known.min())} to {duration(known.max())} after the original send; the negotiated "
                   f"ACK timeout is {cm.ack_timeout_text()} (connection {cm.connection}): not a timeout, the "
                   "NAK (PSN sequence error or RNR) that asked for them is not in the capture (unless the "
                   "application set its own timeout: rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT)")
    return out


def _sent_beyond(ev: Events) -> np.ndarray:
    """PSNs the requester had sent beyond each resent packet's (-1: not known)."""
    d = ev.col("sent_beyond")
    return np.asarray(d, dtype=np.int64) if len(d) == len(ev.ts) else np.full(len(ev.ts), -1, dtype=np.int64)


def _resend_delays(ev: Events) -> np.ndarray:
    """Delay of each timeout retransmission from the original send in ns (-1: not captured)."""
    d = ev.col("resend_delay_ns")
    return np.asarray(d, dtype=np.int64) if len(d) == len(ev.ts) else np.full(len(ev.ts), -1, dtype=np.int64)


def _psn_reuse(ctx: Context) -> list[dict]:
    out = []
    for name in ctx.flows_with("psn_reuse"):
        ev = ctx.ev("psn_reuse", name)
        evidence = [f"{plural(len(ev.ts), 'request')} at PSN {psn_list(ev.psn)} inside the PSN span of an earlier "
                    "READ request of the same requester (a READ consumes ceil(length / path MTU) PSNs)",
                    "no NAK and no gap: the network lost nothing"]
        peer = ctx.peer(name)
        if peer:
            acks = ctx.ev("ack_unsent_psn", peer)
            if len(acks.ts):
                evidence.append(f"the responder then acknowledged PSN {psn_list(acks.psn)}, which the requester never sent")
        summary = (f"Flow {name} reused {plural(len(ev.ts), 'PSN')} its own READ request had consumed: a requester "
                   "bug. The responder takes such a request for a duplicate (IBTA 9.7.5, duplicate requests): it ACKs it again and "
                   "does not execute it, so the requester sees success and the message is silently lost; the QP "
                   "does not stall.")
        advice = ("Fix the requester's PSN accounting after RDMA READ (next PSN = READ PSN + ceil(DMA length / "
                  "path MTU), IBTA 9.7.5.1.2); check that both ends agree on the path MTU (ibv_query_qp "
                  "path_mtu, MTU end to end). Counter: the responder's RDMA hw counter duplicate_request counts "
                  "the reused request (acknowledged again, not executed); the requester sees success, so no "
                  "requester error counter need move.")
        out.append(finding("warning", "psn_reuse", summary, ctx.pair(name),
                           int(ev.ts.min()), int(ev.ts.max()), evidence, advice))
    return out
