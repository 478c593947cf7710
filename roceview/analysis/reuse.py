"""PSN reuse: a request (SEND, WRITE, ATOMIC) carrying a PSN that the requester's own earlier
READ request already consumed (a READ takes ceil(len / PMTU) PSNs, IBTA 9.7.5.1.2).

By the analysis's definition such a packet is "retransmitted" (its PSN is behind the highest seen),
but no packet was lost: the requester numbered it wrongly, the responder takes it for a duplicate
and answers with an ACK instead of executing it, and the QP stalls. A re-issued READ inside the
span is legitimate (a requester re-reads the part it did not get), so only non-READ requests
count. The last READ span of each request space is carried between chunks.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import seg_running_max

NONE_LO, NONE_HI = np.int64(1 << 62), np.int64(-(1 << 62))


def psn_reuse(state, sids: np.ndarray, lengths: np.ndarray, u: np.ndarray, span: np.ndarray | None,
              is_read: np.ndarray, retrans: np.ndarray) -> np.ndarray | None:
    """Rows grouped by space id (group g: `lengths[g]` rows of space `sids[g]`, capture order
    inside); u unwrapped PSNs; span None means 1 everywhere. `state` has per-space columns
    read_lo / read_hi (the last READ's first and last PSN). None when no row is a reuse."""
    if len(u) == 0:
        return None
    if not is_read.any() and not (retrans.any() and (state.read_hi[sids] != NONE_HI).any()):
        return None    # no READ to remember, and no retransmission a remembered span could hold
    starts = np.cumsum(lengths) - lengths
    gid = np.repeat(np.arange(len(sids), dtype=np.int64), lengths)
    sid = sids[gid]
    if span is None:
        span = np.ones(len(u), dtype=np.int64)
    pos = np.where(is_read, np.arange(len(u), dtype=np.int64), -1)
    last, final = seg_running_max(pos, starts, lengths, gid, np.full(len(starts), -1, dtype=np.int64))
    has = last >= 0
    at = np.maximum(last, 0)
    lo = np.where(has, u[at] + 1, state.read_lo[sid])           # the READ's own PSN is not reused
    hi = np.where(has, u[at] + span[at] - 1, state.read_hi[sid])
    done = final >= 0
    spaces, rows = sids[done], final[done]
    state.read_lo[spaces] = u[rows] + 1
    state.read_hi[spaces] = u[rows] + span[rows] - 1
    return retrans & ~is_read & (u >= lo) & (u <= hi)
