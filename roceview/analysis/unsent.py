"""Responses for PSNs the requester never sent (issue 15): a conformance error of the responder.

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
DC captures show "ACKs" 6.7 M PSNs away from the requests).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import PSN_MOD

OUTSIDE_LIMIT = 1 << 22
_CHECKED = np.zeros(9, dtype=bool)        # transport codes (opcodes.TRANSPORT_NAMES; -1 = last)
_CHECKED[[0, 5]] = True                   # RC, XRC


def check(an, resp_flow, req_flow, u, ts, idx, psn) -> None:
    """Response rows (the flow they travel in, the requester's flow, u in the requester's
    coordinate, ts, capture index, raw PSN): events for those outside the sent range."""
    if len(u) == 0:
        return
    st = an.spaces.state
    first, high = st.first_u[2 * req_flow], st.high[2 * req_flow]
    m = ((u < first - OUTSIDE_LIMIT) | (u > high + OUTSIDE_LIMIT)) & _CHECKED[an.flow.transport[req_flow]]
    if m.any():
        mask = PSN_MOD - 1
        an.events.add("ack_unsent_psn", ts[m], idx[m], resp_flow[m], psn[m], first[m] & mask, high[m] & mask)
