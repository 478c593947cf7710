"""Responses stamped before the request they answer: the capture's clocks disagree.

A response (ACK, NAK, ATOMIC ACK, READ response) acknowledges request PSNs up to its own (IBTA
9.7.5), so on one wire, stamped by one clock, it comes after the request carrying that PSN. A TAP
whose two directions are stamped by two capture ports, two interfaces or hosts whose clocks
differ, or two capture points of which the response's is nearer the responder, stamp some
responses before their request. Each such response gets a `response_before_request` event: the
frame of the response, the frame of the request (`rel`) and by how much the request came later
(`a`, ns). The diagnoser's `clock_skew` finding reads them.

Only a response whose request is itself captured counts: a request the capture missed (a lossy
mirror keeps ACKs a few hundred PSNs beyond the last request captured) is never looked for among
later requests, so capture loss does not read as skew. A response is "early" when its PSN lies
beyond everything its requester had sent at that row (at most EARLY_PSNS beyond: farther is a
response for a PSN never sent, unsent.py); it waits, at most MAX_PENDING at a time, for the first
send whose PSNs include it.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.chunk_psn import KEY_SPACE, first_sends
from roceview.analysis.segments import PSN_MOD
from roceview.analysis.unsent import high_at, high_before_chunk

EARLY_PSNS = 1 << 16
MAX_PENDING = 1 << 14
_EMPTY = np.zeros(0, dtype=np.int64)


class EarlyResponses:
    """Early responses still waiting for their request: (space key, response ts, idx, flow, raw PSN)."""

    def __init__(self):
        self.pending = (_EMPTY,) * 5

    def feed(self, an, ch, part, responses) -> None:
        req_flow, u, ts, idx, s = responses
        if len(s):
            self._add_early(an, ch, part, req_flow, u, ts, idx, s)
        if len(self.pending[0]):
            self._resolve(an, ch, part)

    def _add_early(self, an, ch, part, req_flow, u, ts, idx, s) -> None:
        st = an.spaces.state
        cand = np.flatnonzero(u > st.high[2 * req_flow] - EARLY_PSNS)         # cheap: near the end's high
        if len(cand) == 0:
            return
        f = req_flow[cand]
        high, seen = high_at(ch, part, st, f, idx[cand], high_before_chunk(ch, part, st, f))
        ahead = u[cand] - high
        early = seen & (ahead > 0) & (ahead <= EARLY_PSNS)
        if not early.any():
            return
        c = cand[early]
        rows = ch.sorted_r(s[c])
        new = (2 * f[early] * KEY_SPACE + u[c], ts[c], idx[c], ch.fid.take(rows), part.psn[s[c]])
        self.pending = tuple(np.concatenate([a, b])[-MAX_PENDING:] for a, b in zip(self.pending, new))

    def _resolve(self, an, ch, part) -> None:
        """Pending responses whose request is sent in this chunk: the first send covering the PSN."""
        res = part.res
        fresh = first_sends(ch, part)
        if len(fresh) == 0:
            return
        sid = ch.sid_rows()[fresh]
        key_end = sid * KEY_SPACE + np.maximum(res.end[fresh], res.u[fresh])
        key, ts, idx, flow, psn = self.pending
        pos = np.searchsorted(key_end, key)              # the first send reaching the PSN
        inside = pos < len(fresh)
        p = np.minimum(pos, len(fresh) - 1)
        hit = inside & (key_end[p] // KEY_SPACE == key // KEY_SPACE) & (sid[p] * KEY_SPACE + res.u[fresh[p]] <= key)
        r = ch.sorted_r(fresh[p[hit]])
        later = ch.ts.take(r) - ts[hit]
        e = later > 0                                   # stamped alike (a coarse clock): not early
        h = np.flatnonzero(hit)[e]
        an.events.add("response_before_request", ts[h], idx[h], flow[h], psn[h] & (PSN_MOD - 1),
                      later[e], rel=ch.idx(r[e]))
        gone = hit | (inside & (key_end[p] // KEY_SPACE == key // KEY_SPACE))   # sent, uncaptured: dropped
        self.pending = tuple(a[~gone] for a in self.pending)
