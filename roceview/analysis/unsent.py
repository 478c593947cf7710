"""Responses for PSNs the requester never sent: a conformance error of the responder.

A response (ACK, NAK, ATOMIC ACK, READ response) acknowledges request PSNs up to its own (a NAK
PSN sequence error up to its PSN - 1, IBTA 9.7.5.1.3), so its PSN lies among those its peer's
request space has sent. The capture may have missed some of them: a capture that starts
mid-stream misses the requests of the first responses, a lossy mirror misses requests whose ACKs
it keeps (the ConnectX captures show ACKs a few hundred PSNs beyond the last request captured).
So only a PSN more than OUTSIDE_LIMIT PSNs before the first request seen or beyond the highest
is taken as never sent: more than a requester can have outstanding in practice, less than the
2^23 at which serial arithmetic (IBTA 9.7.5.1.1) turns "ahead" into "behind". The soft-RoCE
captures show such an ACK, PSN 0xffffff, after requests at 7,488,511..7,488,513. RC and XRC only:
RD-range opcodes are ConnectX DC on real wires, whose responses number PSNs their own way (the
DC captures show "ACKs" 6.7 M PSNs away from the requests). Each response is judged against its
requester's request space as it was at that response; the events are kept at the end of the
capture only for responses whose requester is still their flow's peer then.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import IDX_SHIFT, PSN_MOD, psn_delta

OUTSIDE_LIMIT = 1 << 22
_CHECKED = np.zeros(9, dtype=bool)        # transport codes (opcode_classes.TRANSPORT_NAMES; -1 = last)
_CHECKED[[0, 5]] = True                   # RC, XRC


def check(an, ch, part, resp_flow, req_flow, ts, idx, psn) -> None:
    """Response rows (the flow they travel in, the requester's flow, ts, capture index, raw PSN):
    events for those outside what the requester had sent when they came. A cheap test against
    the chunk's end finds the few rows that can be (the exact one needs the requester's highest
    PSN at each response)."""
    st = an.spaces.state
    ok = _CHECKED[an.flow.transport[req_flow]] & st.seen[2 * req_flow]
    high_end = st.high[2 * req_flow]
    u_end = high_end + psn_delta(psn, high_end & (PSN_MOD - 1))
    d = u_end - high_end
    near = (d > -_LOOSE) & (d < _LOOSE) & (u_end >= st.first_u[2 * req_flow] - _LOOSE)
    high0 = high_before_chunk(ch, part, st, req_flow)
    maybe = np.flatnonzero(ok & ~(near & (high_end - high0 < _LOOSE)))
    if len(maybe) == 0:
        return
    high_t, seen_t = high_at(ch, part, st, req_flow[maybe], idx[maybe], high0[maybe])
    u = high_t + psn_delta(psn[maybe], high_t & (PSN_MOD - 1))
    first = st.first_u[2 * req_flow[maybe]]
    m = seen_t & ((u < first - OUTSIDE_LIMIT) | (u > high_t + OUTSIDE_LIMIT))
    if m.any():
        rows, mask = maybe[m], PSN_MOD - 1
        an.unsent_found.append((ts[rows], idx[rows], resp_flow[rows], req_flow[maybe][m], psn[rows],
                                first[m] & mask, high_t[m] & mask))


def finish(an) -> None:
    """The events of responses whose requester is still the flow's peer at the end (a pair made
    on a chunk boundary and broken later named the wrong requester)."""
    if not an.unsent_found:
        return
    ts, idx, resp, req, psn, first, high = (np.concatenate(c) for c in zip(*an.unsent_found))
    keep = an.pairing.peer[resp] == req
    an.events.add("ack_unsent_psn", ts[keep], idx[keep], resp[keep], psn[keep], first[keep], high[keep])
    an.unsent_found = []


_LOOSE = OUTSIDE_LIMIT // 2


def high_before_chunk(ch, part, st, flow) -> np.ndarray:
    """The request space's highest PSN before this chunk (its state when absent from it; its
    first PSN - 1 when first seen in it)."""
    high0 = st.high[2 * flow].copy()
    g = np.searchsorted(ch.sids, 2 * flow)
    inside = g < len(ch.sids)
    inside[inside] = ch.sids[g[inside]] == 2 * flow[inside]
    gi = g[inside]                        # first seen in this chunk: from its first PSN on
    high0[inside] = np.where(part.prev_seen[gi], part.prev_high[gi], part.res.u[ch.starts[gi]] - 1)
    return high0


def high_at(ch, part, st, flow, idx, high0):
    """(highest request PSN of `flow` just before capture index `idx`, whether any request of it
    was seen by then)."""
    res = part.res
    keys = ch.sid_rows() * IDX_SHIFT + ch.idx(ch.sorted_r(np.arange(ch.n_psn)))
    pos = np.searchsorted(keys, 2 * flow * IDX_SHIFT + idx) - 1
    mine = pos >= 0
    mine[mine] = ch.sid_rows()[pos[mine]] == 2 * flow[mine]
    p = np.maximum(pos, 0)
    high = np.where(mine, np.maximum(res.h_prev[p], res.end[p]), high0)
    g = np.searchsorted(ch.sids, 2 * flow)
    g = np.minimum(g, len(ch.sids) - 1)
    first_here = (ch.sids[g] == 2 * flow) & ~part.prev_seen[g]         # first request in this chunk
    return high, mine | ~first_here
