"""clock_skew: the capture's two directions stamped by clocks that disagree, shown by causality.

* A response stamped before the request it acknowledges (analysis: `response_before_request`
  events, roceview/analysis/causality.py): the responses' clock is behind.
* A NAK (PSN sequence error) stamped after the resend it asks for (resent_before): the
  responder's clock is ahead. A requester resends from a NAK'd PSN only after the NAK arrives
  (go-back-N, IBTA 9.7.5); a run of resends from that PSN that no NAK explains, too soon after
  the original send for an ACK timeout, just before a NAK of that PSN that nothing answers
  after, is that NAK's answer.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context, requester_side
from roceview.diagnose.finding import finding
from roceview.diagnose.psn_conformance import delay_span
from roceview.units import duration, plural

MIN_EARLY = 3          # one out-of-order pair may be a timestamping glitch; three are a pattern


class ByPsn:
    """Event times grouped by PSN, each group sorted: the times of one PSN by two binary
    searches (a rule that asks per NAK costs O(log n), not a scan of every event: 100 k NAKs
    against 250 k resends took hours)."""

    def __init__(self, ts: np.ndarray, psn: np.ndarray):
        order = np.lexsort((ts, psn))
        self.ts, self.psn = ts[order], psn[order]

    def times(self, psn: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.psn, (psn, psn + 1))
        return self.ts[lo:hi]

    def first_after(self, psn: int, ts: int) -> int | None:
        """The first time of `psn` later than `ts`, else None."""
        t = self.times(psn)
        at = int(np.searchsorted(t, ts, "right"))
        return int(t[at]) if at < len(t) else None

    def last_until(self, psn: int, ts: int) -> int | None:
        """The last time of `psn` at or before `ts`, else None."""
        t = self.times(psn)
        at = int(np.searchsorted(t, ts, "right"))
        return int(t[at - 1]) if at else None


def resent_before(ctx: Context, responder: str, requester: str) -> list:
    """Per NAK (PSN sequence error) of `responder`: the time of the requester's resend that it
    asked for but is stamped after, else None. That resend starts a retransmission run no NAK
    explained (the analysis's `timeout_retransmit` event) too soon after the PSN's original send
    for an ACK timeout (`ack_timeout_floor_us`), at most that long before the NAK; no NAK or RNR
    NAK of the PSN came before it, and nothing resends the PSN after the NAK (the NAK was
    answered, only out of order)."""
    naks = ctx.ev("nak_seq", responder)
    out: list = [None] * len(naks.ts)
    runs = ctx.ev("timeout_retransmit", requester)
    delay = runs.col("resend_delay_ns")
    floor = int(ctx.config.ack_timeout_floor_us * 1000)
    soon = (delay >= 0) & (delay < floor) if len(delay) == len(runs.ts) else np.zeros(len(runs.ts), bool)
    if not len(naks.ts) or not soon.any():
        return out
    starts = ByPsn(runs.ts[soon], runs.psn[soon])
    retx = ByPsn(ctx.ev("retransmit", requester).ts, ctx.ev("retransmit", requester).psn)
    rnr = ctx.ev("nak_rnr", responder)
    asked = ByPsn(np.concatenate([naks.ts, rnr.ts]), np.concatenate([naks.psn, rnr.psn]))
    for i, (ts, psn) in enumerate(zip(naks.ts.tolist(), naks.psn.tolist())):
        t = starts.times(psn)
        t = t[(t < ts) & (t > ts - floor)]
        if len(t) and not (retx.times(psn) > ts).any() and not (asked.times(psn) < t[-1]).any():
            out[i] = int(t[-1])
    return out


def naked_resends(ctx: Context, name: str, ev, floor_ns: float) -> np.ndarray:
    """Timeout-looking resends of requester `name` (`ev`) that a NAK of their PSN asked for: one
    from the peer at most an ACK timeout before them (the analysis saw it before the previous
    run ended), or one stamped after them (resent_before)."""
    out = np.zeros(len(ev.ts), dtype=bool)
    for other in requester_side(ctx, name):
        naks = ctx.ev("nak_seq", other)
        by_psn = ByPsn(naks.ts, naks.psn)
        late = {t for t in resent_before(ctx, other, name) if t is not None}
        for i, (t, p) in enumerate(zip(ev.ts.tolist(), ev.psn.tolist())):
            before = by_psn.times(p)
            out[i] |= t in late or bool(((before <= t) & (before > t - floor_ns)).any())
    return out


def clock_findings(ctx: Context) -> list[dict]:
    early = _early_responses(ctx)
    late = _late_naks(ctx)
    total = sum(len(ns) for ns, _, _ in early.values()) + sum(len(ns) for ns, _, _ in late.values())
    if total < MIN_EARLY:
        return []
    evidence = [f"{name}: {plural(len(ns), 'response')} stamped before their request, by {_span(ns)}{first}"
                for name, (ns, first, _) in sorted(early.items(), key=lambda kv: -len(kv[1][0]))[:4]]
    evidence += [f"{name}: {plural(len(ns), 'NAK')} stamped after the resend {'it asks' if len(ns) == 1 else 'they ask'} "
                 f"for, by {_span(ns)}{first}"
                 for name, (ns, first, _) in sorted(late.items(), key=lambda kv: -len(kv[1][0]))[:4]]
    evidence.append("a response acknowledges requests already received (IBTA 9.7.5)"
                    + (" and a go-back-N resend follows its NAK" if late else "") + ": on one clock it comes after")
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
        evidence.append("no single clock offset between the two hosts of a pair explains these together: the stamps "
                        "do not follow the order on the wire")
        summary = (f"{told}, not as one clock offset would: the capture's timestamps do not follow the order on the wire "
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
        resent = resent_before(ctx, name, req[0])
        hit = [i for i, t in enumerate(resent) if t is not None]
        if hit:
            ns = np.array([int(naks.ts[i]) - resent[i] for i in hit], dtype=np.int64)
            frames = naks.col("frame")
            first = f"; first: the NAK in frame {int(frames[hit[0]])}" if len(frames) else ""
            out[name] = (ns, first, (int(naks.ts[hit[0]]), int(naks.ts[hit[-1]])))
    return out


def _span(ns: np.ndarray) -> str:
    return f"{delay_span(ns)} (median {duration(int(np.median(ns)))})"
