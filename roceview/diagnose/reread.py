"""READ responses lost in the network, told from their re-read: a requester that misses a READ
response (a MIDDLE or the LAST) asks again with an RDMA READ request whose PSN is the first
missing response PSN, its VA advanced and its length cut (IBTA 9.7.5: it noticed a later
response out of sequence, or an ACK beyond the incomplete READ, an implied NAK, which mlx5
counts in implied_nak_seq_err; or its ACK timer ran out). The analysis sees a request at a PSN
its requester never sent (it lies inside the READ's response range) and records a resend whose
original was not captured; the diagnoser would call that an ACK timeout. A resend, original not
captured, that the peer answers by sending READ responses from that PSN again is a re-read.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context
from roceview.diagnose.finding import psn_list
from roceview.units import plural


def rereads(ctx: Context, name: str) -> list[tuple[int, int]]:
    """(ts, PSN) of the re-read READ requests of the request flow `name` (its peer's READ
    responses at those PSNs were lost). Built once per Context and flow."""
    cache = ctx.__dict__.setdefault("_rereads", {})
    if name not in cache:
        cache[name] = _rereads(ctx, name)
    return cache[name]


def _rereads(ctx: Context, name: str) -> list[tuple[int, int]]:
    """A resend of `name`, original not captured, that its peer answers by sending READ
    responses from that PSN again (the peer's responses going back: its own retransmission
    events) within nak_window_us."""
    peer = ctx.peer(name)
    ev = ctx.ev("timeout_retransmit", name)
    if peer is None or not len(ev.ts):
        return []
    replay = ctx.ev("retransmit", peer)
    delays = ev.col("resend_delay_ns")
    unknown = np.asarray(delays, np.int64) < 0 if len(delays) == len(ev.ts) else np.ones(len(ev.ts), bool)
    window = int(ctx.config.nak_window_us * 1000)
    return [(t, p) for t, p, u in zip(ev.ts.tolist(), ev.psn.tolist(), unknown.tolist())
            if u and ((replay.psn == p) & (replay.ts > t) & (replay.ts <= t + window)).any()]


def reread_text(found: list[tuple[int, int]]) -> str:
    return (f"{plural(len(found), 'RDMA READ')} re-requested from PSN {psn_list([p for _, p in found])}, inside "
            "the peer's READ response range: the responses there were lost after the capture point (the "
            "requester saw a later response out of sequence, or an ACK beyond the incomplete READ: an implied NAK)")
