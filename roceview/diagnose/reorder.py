"""reordering: packets of one QP that arrived out of order, told apart from loss.

When a path change (a new UDP source port after an ECMP rehash, adaptive routing, a link flap)
lets PSN n+1 overtake n, a capture after the reordering point sees n+1 first (the analysis
records a gap at n) and n itself a moment later (recorded as a retransmission: its PSN went
back). A resend needs a cause the capture would show first: a NAK travels back and the
requester reacts, or an ACK timer runs out (>= ack_timeout_floor_us, 100 us). So where the
capture holds the responder's direction, a missing PSN that shows up within that floor after
the gap, with no NAK before it and no go-back-N run after it (the PSNs past the gap resent
too), is the late original: reordering, not loss. Where that direction is not captured (a
filter, one-way mirror) a NAK could have gone unseen: then only sooner than half the QP's
RTT p50 (at most REORDER_MAX_NS; REORDER_NO_RTT_NS without one) counts. A real RC responder NAKs the out-of-order arrival (PSN
sequence error, IBTA 9.7.5.1.3) before the late one lands; the requester then goes back N and
resends what had arrived: that NAK is spurious and its resends are the cost of reordering.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import PSN_MOD, Context, Events, requester_side
from roceview.diagnose.finding import finding, psn_list
from roceview.units import duration, plural

REORDER_MAX_NS = 5_000        # a late original comes within this of the gap, however slow the RTT
REORDER_NO_RTT_NS = 1_000     # ... or this, when the QP has no RTT sample
REORDER_MAX_RUN = 8           # a gap of more PSNs than this arriving late is not taken for reordering


def gap_numbers(gaps: Events) -> tuple[list, list]:
    """(PSN count, first missing PSN) of each gap event (events columns psn_count,
    first_missing_psn; without them one PSN, the one before)."""
    count, first = gaps.col("psn_count"), gaps.col("first_missing_psn")
    if len(count) != len(gaps.ts):
        count = first = np.full(len(gaps.ts), -1, dtype=np.int64)
    count = np.where(count >= 0, count, 1)
    first = np.where(first >= 0, first, (gaps.psn - 1) % PSN_MOD)
    return count.tolist(), first.tolist()


def window_ns(ctx: Context, name: str) -> int:
    """How late an original may arrive after its gap: the ACK-timeout floor when the NAKs would
    be in the capture, else half the QP's RTT p50 (at most REORDER_MAX_NS)."""
    if requester_side(ctx, name):
        return int(ctx.config.ack_timeout_floor_us * 1000)
    rtt = ctx.flow[name]["rtt_p50_us"] if name in ctx.flow else None
    if rtt is None or not np.isfinite(rtt) or rtt <= 0:
        return REORDER_NO_RTT_NS
    return int(min(REORDER_MAX_NS, rtt * 1000 / 2))


class _Late:
    """A flow's late originals, and the lookups the loss rules make per gap and per NAK."""

    def __init__(self, items: list, late: set):
        self.items = items                  # (gap ts, first missing, PSN count, last late ts, late PSNs)
        self.late = late                    # (ts, PSN) of the late originals
        self.gaps = {(g, f) for g, f, *_ in items}
        self.by_first: dict[int, list[int]] = {}
        for g, f, *_ in items:
            self.by_first.setdefault(f, []).append(g)


def late_originals(ctx: Context, name: str) -> list[tuple[int, int, int, int, tuple]]:
    """(gap ts, first missing PSN, PSN count, ts of the last late original, the PSNs that came
    late) of each gap of the request flow `name` whose first missing PSN arrived within
    window_ns after it, before any NAK (the others of the gap may have come late too, or been
    missed by the capture only). Built once per Context and flow."""
    return _lates(ctx, name).items


def _lates(ctx: Context, name: str) -> _Late:
    cache = ctx.__dict__.setdefault("_late_originals", {})
    if name not in cache:
        cache[name] = _late(ctx, name) if name in ctx.flow and ctx.is_reliable(name) else _Late([], set())
    return cache[name]


class _Sorted:
    """Events sorted by (PSN, ts): the first of a PSN after a time, by binary search."""

    def __init__(self, ev: Events):
        order = np.lexsort((ev.ts, ev.psn))
        self.psn, self.ts = np.asarray(ev.psn)[order], np.asarray(ev.ts)[order]

    def first_after(self, psn: int, after: int, before: int) -> int | None:
        lo, hi = np.searchsorted(self.psn, psn), np.searchsorted(self.psn, psn, "right")
        i = lo + int(np.searchsorted(self.ts[lo:hi], after, "right"))
        return int(self.ts[i]) if i < hi and self.ts[i] < before else None


def _late(ctx: Context, name: str) -> _Late:
    gaps, retx = ctx.ev("gap", name), ctx.ev("retransmit", name)
    if not len(gaps.ts) or not len(retx.ts):
        return _Late([], set())
    w, resends = window_ns(ctx, name), _Sorted(retx)
    nak_ts = np.sort(np.concatenate([np.asarray(ctx.ev("nak_seq", o).ts, np.int64)
                                     for o in requester_side(ctx, name)] or [np.zeros(0, np.int64)]))
    items, late_set = [], set()
    for g, count, first in zip(gaps.ts.tolist(), *gap_numbers(gaps)):
        if count > REORDER_MAX_RUN:
            continue
        # up to the first NAK after the gap: what comes after it may be the resend it asked for
        end = min(g + w + 1, _next(nak_ts, g - 1))
        seen = [resends.first_after((first + j) % PSN_MOD, g, end) for j in range(count)]
        if seen[0] is None:
            continue
        last = max(t for t in seen if t is not None)
        # the PSN that revealed the gap resent after them, before the next NAK: a go-back-N run
        # whose NAK the capture did not show
        if resends.first_after((first + count) % PSN_MOD, last, min(last + w, _next(nak_ts, last))) is not None:
            continue
        late = tuple((first + j) % PSN_MOD for j in range(count) if seen[j] is not None)
        late_set.update((t, (first + j) % PSN_MOD) for j, t in enumerate(seen) if t is not None)
        items.append((g, first, count, last, late))
    return _Late(items, late_set)


def _next(sorted_ts: np.ndarray, after: int) -> int:
    """The first time in sorted_ts after `after` (int64 max when none)."""
    i = int(np.searchsorted(sorted_ts, after, "right"))
    return int(sorted_ts[i]) if i < len(sorted_ts) else np.iinfo(np.int64).max


def reordered_gap(ctx: Context, name: str, ts: int, first: int) -> bool:
    return (ts, first) in _lates(ctx, name).gaps


def late_ts(ctx: Context, name: str) -> set[tuple[int, int]]:
    """(ts, PSN) of the late originals of `name` (retransmission events that were none)."""
    return _lates(ctx, name).late


def spurious_nak(ctx: Context, requester: str, ts: int, psn: int) -> bool:
    """A NAK of `psn` sent because a later PSN overtook it: its late original reached the
    capture point within the NAK window after the gap, before or as the NAK was sent."""
    window = int(ctx.config.nak_window_us * 1000)
    return any(g <= ts <= g + window for g in _lates(ctx, requester).by_first.get(psn, ()))


def reorder_findings(ctx: Context, spurious: dict[str, list[tuple[int, int, int]]]) -> list[dict]:
    """One `reordering` finding per request flow with late originals; `spurious` maps a flow to
    the (ts, PSN, packets resent after it) of the spurious NAKs its responder sent."""
    out = []
    for name in sorted(set(ctx.flows_with("gap")) | set(spurious)):
        late = late_originals(ctx, name) if name in ctx.flow else []
        if not late and not spurious.get(name):
            continue
        out.append(_finding(ctx, name, late, spurious.get(name, [])))
    return out


def _finding(ctx: Context, name: str, late: list, naks: list) -> dict:
    packets = sum(len(p) for *_, p in late)
    delays = [last - g for g, _, _, last, _ in late]
    resent = sum(r for *_, r in naks)
    summary = (f"Flow {name}: {plural(packets, 'packet')} arrived out of order (a later PSN first, the missing one "
               f"{duration(float(np.median(delays)))} after it, before any resend could): reordering in the fabric, "
               "not loss" if late else f"Flow {name}: reordering in the fabric, not loss")
    if naks:
        summary += (f"; {plural(len(naks), 'spurious NAK')} made the requester resend "
                    f"{plural(resent, 'packet')} by go-back-N")
    evidence = []
    if late:
        evidence.append(f"late originals at PSN {psn_list([p for *_, ps in late for p in ps])}, {duration(min(delays))} to "
                        f"{duration(max(delays))} after their gap, with no NAK before them and no go-back-N "
                        "after (a resend needs a NAK first, or an ACK timeout)")
        evidence.append(f"the QP table counts {plural(len(late), 'gap')} and {plural(packets, 'retransmission')} for them"
                        + (", and the resends after the spurious NAKs" if naks else ""))
    if naks:
        evidence.append(f"NAK PSN sequence error at PSN {psn_list([p for _, p, _ in naks])} after the original "
                        f"had arrived; {plural(resent, 'packet')} resent after them")
    advice = ("Packets of one QP took paths of different delay: an ECMP rehash (a new UDP source port or flow label), "
              "adaptive routing or packet spraying, a link flap. An RC responder NAKs each out-of-order arrival and the "
              "requester goes back N, so reordering costs throughput though nothing is lost: keep one path per QP "
              "(ECMP on the 5-tuple, adaptive routing off for the RoCE class unless the NICs handle out-of-order). "
              "On the receiver the RDMA hw counter out_of_sequence grows while `ethtool -S` rx_prio<p>_discards and "
              "rx_discards_phy stay flat (nothing dropped); on the requester packet_seq_err counts the NAKs.")
    times = [g for g, *_ in late] + [t for t, *_ in naks]
    return finding("warning" if naks else "info", "reordering", summary, ctx.pair(name), min(times), max(times),
                   evidence, advice)
