"""clock_skew: the capture's two directions stamped by clocks that disagree, shown by causality.

* A response stamped before the request it acknowledges (analysis: `response_before_request`
  events, roceview/analysis/causality.py): the responses' clock is behind.
* A NAK (PSN sequence error) stamped after the resend it asks for (resent_before): the
  responder's clock is ahead. A requester resends from a NAK'd PSN only after the NAK arrives
  (go-back-N, IBTA 9.7.5); a resend of that PSN within `ack_timeout_floor_us` before the NAK,
  with no earlier NAK of it, cannot be a timeout (an ACK timeout is longer) nor an answer.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context, requester_side
from roceview.diagnose.finding import finding
from roceview.units import duration, plural

MIN_EARLY = 3          # one out-of-order pair may be a timestamping glitch; three are a pattern


def resent_before(ctx: Context, naks, retx) -> list:
    """Per NAK of `naks` (a responder flow's nak_seq events): the time of the requester's last
    resend of its PSN (`retx`: its retransmit events) before the NAK, within the ACK-timeout floor
    and after any earlier NAK of that PSN, when none follows the NAK; else None."""
    floor = int(ctx.config.ack_timeout_floor_us * 1000)
    out = []
    for i, (ts, psn) in enumerate(zip(naks.ts.tolist(), naks.psn.tolist())):
        same = naks.psn[:i] == psn
        since = int(naks.ts[:i][same].max()) if same.any() else ts - floor
        hit = (retx.psn == psn) & (retx.ts < ts) & (retx.ts > max(since, ts - floor))
        out.append(int(retx.ts[hit][-1]) if hit.any() and not ((retx.psn == psn) & (retx.ts > ts)).any() else None)
    return out


def naked_resends(ctx: Context, name: str, ev, floor_ns: float) -> np.ndarray:
    """Resends of a PSN the peer NAKed within an ACK timeout of them, before or after: the NAK asked
    for them, though the capture's clocks (clocks.py) or a run still under way put it elsewhere."""
    out = np.zeros(len(ev.ts), dtype=bool)
    for other in requester_side(ctx, name):
        naks = ctx.ev("nak_seq", other)
        for i, (t, p) in enumerate(zip(ev.ts.tolist(), ev.psn.tolist())):
            out[i] |= bool(((naks.psn == p) & (np.abs(naks.ts - t) < floor_ns)).any())
    return out


def clock_findings(ctx: Context) -> list[dict]:
    early = _early_responses(ctx)
    late = _late_naks(ctx)
    total = sum(len(ns) for ns, _, _ in early.values()) + sum(len(ns) for ns, _, _ in late.values())
    if total < MIN_EARLY:
        return []
    evidence = [f"{name}: {plural(len(ns), 'response')} stamped before their request, by {_span(ns)}{first}"
                for name, (ns, first, _) in sorted(early.items(), key=lambda kv: -len(kv[1][0]))[:4]]
    evidence += [f"{name}: {plural(len(ns), 'NAK')} stamped after the resend they ask for, by {_span(ns)}{first}"
                 for name, (ns, first, _) in sorted(late.items(), key=lambda kv: -len(kv[1][0]))[:4]]
    evidence.append("a response acknowledges requests already received (IBTA 9.7.5) and a go-back-N resend follows "
                    "its NAK: on one clock neither comes first")
    most = max(int(ns.max()) for ns, _, _ in list(early.values()) + list(late.values()))
    names = set(early) | set(late)
    pairs = sorted(names | {p for p in (ctx.peer(n) for n in names) if p})
    told = (f"{plural(total, 'response')} on {plural(len(names), 'flow')} are stamped out of causal order (before "
            f"the request they answer, or after the resend they cause), by up to {duration(most)}")
    if _one_offset(ctx, early, late):
        summary = (f"{told}: the capture's two directions are stamped by clocks at least {duration(most)} apart (a "
                   "TAP with two capture ports, two interfaces or capture points). RTT and NAK-to-resend figures of "
                   "these queue pairs are off by at least that offset.")
        advice = ("The capture, not the fabric: stamp both directions with one clock (both directions mirrored to "
                  "one capture port, or a TAP aggregator that stamps them), or synchronise the capture ports' clocks "
                  "(PTP: linuxptp's ptp4l and phc2sys). Until then, read these flows' RTTs and delays as off by at "
                  f"least {duration(most)}.")
    else:
        evidence.append("both hosts of a pair are stamped early against each other: no single clock offset does "
                        "that, the stamps do not follow the order on the wire")
        summary = (f"{told}, in both directions: the capture's timestamps do not follow the order on the wire "
                   "(stamped in software, at different points for sent and received frames, or captures merged). "
                   "RTT and NAK-to-resend figures of these queue pairs are unreliable.")
        advice = ("The capture, not the fabric: capture on a mirror or TAP rather than on an endpoint, or with "
                  "hardware timestamps (`tcpdump -j adapter_unsynced` where the NIC supports it).")
    times = [t for _, _, t in list(early.values()) + list(late.values())]
    return [finding("info", "clock_skew", summary, pairs, min(a for a, _ in times), max(b for _, b in times),
                    evidence, advice)]


def _one_offset(ctx: Context, early: dict, late: dict) -> bool:
    """Whether one clock offset per pair of hosts explains it all: an early response puts its
    sender's clock behind its peer's, a late NAK ahead; no pair may show both."""
    sides: dict[tuple, set] = {}
    for group, behind in ((early, True), (late, False)):
        for name in group:
            src, dst = ctx.flow[name]["src_ip"], ctx.flow[name]["dst_ip"]
            sides.setdefault(tuple(sorted((src, dst))), set()).add(behind == (src < dst))
    return all(len(s) == 1 for s in sides.values())


def _early_responses(ctx: Context) -> dict:
    """Per response flow: (how much early each, '; first: ...', (first ts, last ts))."""
    out = {}
    for name in ctx.flows_with("response_before_request"):
        ev = ctx.ev("response_before_request", name)
        frames, related = ev.col("frame"), ev.col("related_frame")
        first = f"; first: frame {int(frames[0])} answers frame {int(related[0])}" if len(frames) else ""
        out[name] = (ev.col("early_ns"), first, (int(ev.ts.min()), int(ev.ts.max())))
    return out


def _late_naks(ctx: Context) -> dict:
    """Per responder flow: (how much later than its resend each late NAK, '; first: ...', (first, last))."""
    out = {}
    for name in ctx.flows_with("nak_seq"):
        req = requester_side(ctx, name)
        if len(req) != 1:
            continue
        naks = ctx.ev("nak_seq", name)
        resent = resent_before(ctx, naks, ctx.ev("retransmit", req[0]))
        hit = [i for i, t in enumerate(resent) if t is not None]
        if hit:
            ns = np.array([int(naks.ts[i]) - resent[i] for i in hit], dtype=np.int64)
            frames = naks.col("frame")
            first = f"; first: the NAK in frame {int(frames[hit[0]])}" if len(frames) else ""
            out[name] = (ns, first, (int(naks.ts[hit[0]]), int(naks.ts[hit[-1]])))
    return out


def _span(ns: np.ndarray) -> str:
    lo, hi = int(ns.min()), int(ns.max())
    return (duration(lo) if lo == hi else f"{duration(lo)} to {duration(hi)}") + f" (median {duration(int(np.median(ns)))})"
