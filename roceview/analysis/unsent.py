"""Responses for PSNs the requester never sent (issue 15): a conformance error of the responder.

A response (ACK, NAK, ATOMIC ACK, READ response) acknowledges request PSNs up to its own (a NAK
PSN sequence error up to its PSN - 1, IBTA 9.7.5.1.3), so its PSN must lie among those its peer's
request space has sent: not beyond the highest, and not far behind the first one seen (a capture
that starts mid-stream may miss the requests of the first responses, never 2^20 PSNs of them).
One beyond the highest PSN of the chunk's end is only decided at the end of the capture: a
capture merged from two ports may show an ACK a little before its request. The soft-RoCE captures
show such an ACK with PSN 0xffffff after requests at 7,488,511..7,488,513.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import PSN_MOD

BEHIND_LIMIT = 1 << 20     # PSNs before the first request seen that no outstanding window reaches


class UnsentAcks:
    def __init__(self):
        self._later: list[tuple[np.ndarray, ...]] = []     # beyond the chunk's high: decided at the end

    def check(self, an, resp_flow, req_flow, u, ts, idx, psn) -> None:
        """Response rows (flow they travel in, requester flow, u in the requester's coordinate,
        ts, capture index, raw PSN)."""
        if len(u) == 0:
            return
        st = an.spaces.state
        first, high = st.first_u[2 * req_flow], st.high[2 * req_flow]
        behind = u < first - BEHIND_LIMIT
        if behind.any():
            self._add(an, behind, resp_flow, ts, idx, psn, first, high)
        ahead = u > high
        if ahead.any():
            self._later.append(tuple(a[ahead] for a in (resp_flow, req_flow, u, ts, idx, psn)))

    def finish(self, an) -> None:
        """Responses beyond the requester's highest PSN at the end of the capture."""
        if not self._later:
            return
        resp_flow, req_flow, u, ts, idx, psn = (np.concatenate(c) for c in zip(*self._later))
        st = an.spaces.state
        first, high = st.first_u[2 * req_flow], st.high[2 * req_flow]
        self._add(an, u > high, resp_flow, ts, idx, psn, first, high)
        self._later = []

    @staticmethod
    def _add(an, m, resp_flow, ts, idx, psn, first, high) -> None:
        mask = PSN_MOD - 1
        an.events.add("ack_unsent_psn", ts[m], idx[m], resp_flow[m], psn[m], first[m] & mask, high[m] & mask)
