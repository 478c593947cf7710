"""PSN spaces: unwrap 24-bit PSNs, highest-seen marks, gaps, retransmissions, unrecovered PSNs.

One direction of an RC QP has two PSN spaces (issue 4): its requests and its responses to the
peer. A space id is `flow * 2 + space`. Rows arrive sorted by space id, capture order inside a
space. For every row:
  u       the PSN unwrapped into a monotone 64-bit sequence (24-bit serial arithmetic from the
          previous packet of the space, IBTA 9.7.5.1.1);
  end     the last PSN the packet consumes (a READ request consumes ceil(len / PMTU) PSNs);
  h_prev  the highest PSN seen in the space before this row (ACK/NAK PSNs move it too).
A data packet is retransmitted when u <= h_prev and opens a gap when u > h_prev + 1; the skipped
PSNs are [h_prev + 1, u). Only the space's state (last raw PSN, last u, highest end) is carried.

Unrecovered PSNs: a skipped PSN lies above every PSN seen before the gap, so only a later
retransmitted packet can cover it; pending gaps are kept as disjoint intervals of
`space * 2^41 + u + 2^40` and every chunk subtracts the PSN ranges of its retransmitted packets.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roceview.analysis.segments import (group_bounds, merge_intervals, psn_delta, seg_cumsum,
                                        seg_running_max, subtract_intervals)
from roceview.analysis.state import Columns

_KEY_SHIFT = 41
_KEY_BIAS = 1 << 40


@dataclass
class SpaceRows:
    u: np.ndarray
    h_prev: np.ndarray
    first_ever: np.ndarray  # first packet ever seen in its space: neither gap nor retransmission
    retransmitted: np.ndarray
    gap: np.ndarray
    gap_psns: np.ndarray


class PsnSpaces:
    def __init__(self):
        self.state = Columns({"seen": (bool, False), "last_raw": (np.int64, 0),
                              "last_u": (np.int64, 0), "high": (np.int64, 0)})
        self.gap_lo = np.zeros(0, dtype=np.int64)
        self.gap_hi = np.zeros(0, dtype=np.int64)

    def grow(self, n_flows: int) -> None:
        self.state.grow(2 * n_flows)

    def process(self, space: np.ndarray, psn: np.ndarray, span: np.ndarray,
                is_data: np.ndarray, gap_check: np.ndarray | None = None) -> SpaceRows:
        """Rows sorted by space id; psn raw 24-bit as int64; span >= 1 (0 for a NAK, which
        acknowledges only the PSNs before its own); gap_check: rows that may open a gap."""
        starts, lengths, gid = group_bounds(space)
        u = self._unwrap(space, psn, starts, lengths, gid)
        end = u + span - 1
        sids = space[starts] if len(starts) else space[:0]
        seen = self.state.seen[sids]
        init = np.where(seen, self.state.high[sids], u[starts] - 1)
        h_prev, high = seg_running_max(end, starts, lengths, gid, init)
        self._store(sids, psn, u, high, starts + lengths - 1)
        first_ever = np.zeros(len(u), dtype=bool)
        first_ever[starts[~seen]] = True
        counted = is_data & ~first_ever
        retrans = counted & (u <= h_prev)
        gap = counted & (u > h_prev + 1)
        if gap_check is not None:
            gap &= gap_check
        gap_psns = np.where(gap, u - h_prev - 1, 0)
        self._track_gaps(space, u, end, h_prev, gap, retrans)
        return SpaceRows(u, h_prev, first_ever, retrans, gap, gap_psns)

    def _unwrap(self, space, psn, starts, lengths, gid) -> np.ndarray:
        if len(psn) == 0:
            return psn.astype(np.int64)
        sids = space[starts]
        seen = self.state.seen[sids]
        prev = np.empty_like(psn)
        prev[1:] = psn[:-1]
        prev[starts] = np.where(seen, self.state.last_raw[sids], psn[starts])
        base = np.where(seen, self.state.last_u[sids], psn[starts])
        return base[gid] + seg_cumsum(psn_delta(psn, prev), starts, lengths)

    def _store(self, sids, psn, u, high, last_rows) -> None:
        st = self.state
        st.seen[sids] = True
        st.last_raw[sids] = psn[last_rows]
        st.last_u[sids] = u[last_rows]
        st.high[sids] = high

    def _track_gaps(self, space, u, end, h_prev, gap, retrans) -> None:
        if gap.any():
            base = space[gap] << _KEY_SHIFT
            self.gap_lo = np.concatenate([self.gap_lo, base + h_prev[gap] + 1 + _KEY_BIAS])
            self.gap_hi = np.concatenate([self.gap_hi, base + u[gap] + _KEY_BIAS])
        if retrans.any() and len(self.gap_lo):
            base = space[retrans] << _KEY_SHIFT
            b_lo, b_hi = merge_intervals(base + u[retrans] + _KEY_BIAS, base + end[retrans] + 1 + _KEY_BIAS)
            self.gap_lo, self.gap_hi = subtract_intervals(self.gap_lo, self.gap_hi, b_lo, b_hi)

    def unrecovered_per_flow(self, n_flows: int) -> np.ndarray:
        """PSNs skipped by gaps and never seen since, summed over both spaces of each flow."""
        flow = (self.gap_lo >> _KEY_SHIFT) // 2
        return np.bincount(flow, self.gap_hi - self.gap_lo, minlength=n_flows).astype(np.int64)

    def request_high(self, flows: np.ndarray) -> np.ndarray:
        return self.state.high[2 * flows]
