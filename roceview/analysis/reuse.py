"""PSN reuse: a request (SEND, WRITE, ATOMIC) carrying a PSN that the requester's own earlier
READ request already consumed (a READ takes ceil(len / PMTU) PSNs, IBTA 9.7.5.1.2).

By the issue's definition such a packet is "retransmitted" (its PSN is behind the highest seen),
but no packet was lost: the requester numbered it wrongly, the responder takes it for a duplicate
and answers with an ACK instead of executing it, and the QP stalls. A re-issued READ inside the
span is legitimate (a requester re-reads the part it did not get), so only non-READ requests
count. The last READ span of each request space is carried between chunks.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import group_bounds, seg_running_max

NONE_LO, NONE_HI = np.int64(1 << 62), np.int64(-(1 << 62))


def psn_reuse(state, sid: np.ndarray, u: np.ndarray, span: np.ndarray, is_read: np.ndarray,
              retrans: np.ndarray) -> np.ndarray:
    """Rows sorted by request-space id (capture order inside); u unwrapped PSNs. `state` has
    per-space columns read_lo / read_hi (the last READ's first and last PSN)."""
    if len(u) == 0 or not (is_read.any() or (state.read_hi[sid] != NONE_HI).any()):
        return np.zeros(len(u), dtype=bool)
    starts, lengths, gid = group_bounds(sid)
    pos = np.where(is_read, np.arange(len(u), dtype=np.int64), -1)
    last, final = seg_running_max(pos, starts, lengths, gid, np.full(len(starts), -1, dtype=np.int64))
    has = last >= 0
    at = np.maximum(last, 0)
    lo = np.where(has, u[at] + 1, state.read_lo[sid])           # the READ's own PSN is not reused
    hi = np.where(has, u[at] + span[at] - 1, state.read_hi[sid])
    done = final >= 0
    spaces, rows = sid[starts][done], final[done]
    state.read_lo[spaces] = u[rows] + 1
    state.read_hi[spaces] = u[rows] + span[rows] - 1
    return retrans & ~is_read & (u >= lo) & (u <= hi)
