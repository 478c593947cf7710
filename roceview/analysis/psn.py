"""PSN spaces: unwrap 24-bit PSNs, highest-seen marks, gaps, retransmissions, unrecovered PSNs.

One direction of an RC QP has two PSN spaces: its requests and its responses to the
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

from roceview.analysis.segments import (group_of, merge_intervals, seg_running_max_grouped,
                                        subtract_intervals)
from roceview.analysis.state import Columns

_KEY_SHIFT = 41
_KEY_BIAS = 1 << 40
_PSN_MASK, _PSN_HALF = (1 << 24) - 1, 1 << 23


@dataclass
class SpaceRows:
    u: np.ndarray
    h_prev: np.ndarray
    retransmitted: np.ndarray
    gap: np.ndarray           # rows (positions) that open a gap, ascending
    gap_psns: np.ndarray      # PSNs skipped by each of those
    end: np.ndarray           # the last PSN each row consumes


class PsnSpaces:
    def __init__(self):
        self.state = Columns({"seen": (bool, False), "last_raw": (np.int64, 0),
                              "last_u": (np.int64, 0), "high": (np.int64, 0), "first_u": (np.int64, 0),
                              "slack": (np.int64, 0)})
        self.gap_lo = np.zeros(0, dtype=np.int64)
        self.gap_hi = np.zeros(0, dtype=np.int64)

    def grow(self, n_flows: int) -> None:
        self.state.grow(2 * n_flows)

    def process(self, sids: np.ndarray, lengths: np.ndarray, psn: np.ndarray, span: np.ndarray | None,
                is_data: np.ndarray, gap_check: np.ndarray, slack: np.ndarray | None = None) -> SpaceRows:
        """Rows grouped by space id (group g: `lengths[g]` rows of space `sids[g]`, capture order);
        psn raw 24-bit as int64; span >= 1 (0 for a NAK, which acknowledges only the PSNs before
        its own), None when 1 for every row; gap_check: rows that may open a gap; slack: PSNs a
        READ request may take beyond its span (its path MTU unknown, pmtu.py), None when 0."""
        starts = np.cumsum(lengths) - lengths
        seen = self.state.seen[sids]
        u = self._unwrap(sids, seen, psn, starts, lengths)
        end = u if span is None else u + span - 1
        init = np.where(seen, self.state.high[sids] + self._carried_stretch(sids, seen, u[starts]), u[starts] - 1)
        h_prev, high = seg_running_max_grouped(end, starts, lengths, init)
        if slack is not None:
            end, h_prev, high = self._stretch(u, end, h_prev, high, slack, starts, lengths, init)
        self._keep_slack(sids, slack, end, high, starts + lengths - 1)
        self.state.first_u[sids[~seen]] = u[starts[~seen]]
        self._store(sids, psn, u, high, starts + lengths - 1)
        counted = is_data.copy()
        counted[starts[~seen]] = False    # a space's first packet ever: neither gap nor retransmission
        ahead = u - h_prev
        retrans = counted & (ahead <= 0)
        gap = np.flatnonzero(counted & (ahead > 1) & gap_check)
        gap_psns = ahead[gap] - 1
        self._track_gaps(sids[group_of(starts, gap)], u[gap], h_prev[gap], retrans, sids, starts, u, end)
        return SpaceRows(u, h_prev, retrans, gap, gap_psns, end)

    # A READ of unknown path MTU at the top of its space takes as many PSNs as the requester's next
    # request shows, within its slack (pmtu.py): never more than the smallest MTU allows.
    def _carried_stretch(self, sids, seen, first_u) -> np.ndarray:
        slack = self.state.slack[sids]
        extra = first_u - self.state.high[sids] - 1
        return np.where(seen & (extra > 0) & (extra <= slack), extra, 0)

    @staticmethod
    def _stretch(u, end, h_prev, high, slack, starts, lengths, init):
        nxt = np.empty_like(u)
        nxt[:-1] = u[1:]
        last = starts + lengths - 1
        extra = nxt - end - 1
        ok = (slack > 0) & (end > h_prev) & (extra > 0) & (extra <= slack)
        ok[last] = False                                   # decided by the next chunk (carried)
        if not ok.any():
            return end, h_prev, high
        end = end + np.where(ok, extra, 0)
        h_prev, high = seg_running_max_grouped(end, starts, lengths, init)
        return end, h_prev, high

    def _keep_slack(self, sids, slack, end, high, last_rows) -> None:
        st = self.state.slack
        st[sids] = 0
        if slack is not None:
            top = (slack[last_rows] > 0) & (end[last_rows] >= high)
            st[sids[top]] = slack[last_rows][top]

    def _unwrap(self, sids, seen, psn, starts, lengths) -> np.ndarray:
        if len(psn) == 0:
            return psn.astype(np.int64)
        delta = np.empty_like(psn)                  # 24-bit serial difference to the previous row
        np.subtract(psn[1:], psn[:-1], out=delta[1:])
        delta[starts] = psn[starts] - np.where(seen, self.state.last_raw[sids], psn[starts])
        delta += _PSN_HALF
        delta &= _PSN_MASK
        delta -= _PSN_HALF
        base = np.where(seen, self.state.last_u[sids], psn[starts])
        cs = np.cumsum(delta)
        return cs + np.repeat(base - (cs[starts] - delta[starts]), lengths)

    def _store(self, sids, psn, u, high, last_rows) -> None:
        st = self.state
        st.seen[sids] = True
        st.last_raw[sids] = psn[last_rows]
        st.last_u[sids] = u[last_rows]
        st.high[sids] = high

    def _track_gaps(self, gap_sid, gap_u, gap_h_prev, retrans, sids, starts, u, end) -> None:
        if len(gap_sid):
            base = gap_sid << _KEY_SHIFT
            self.gap_lo = np.concatenate([self.gap_lo, base + gap_h_prev + 1 + _KEY_BIAS])
            self.gap_hi = np.concatenate([self.gap_hi, base + gap_u + _KEY_BIAS])
        if len(self.gap_lo) and retrans.any():
            rt = np.flatnonzero(retrans)
            base = sids[group_of(starts, rt)] << _KEY_SHIFT
            b_lo, b_hi = merge_intervals(base + u[rt] + _KEY_BIAS, base + end[rt] + 1 + _KEY_BIAS)
            self.gap_lo, self.gap_hi = subtract_intervals(self.gap_lo, self.gap_hi, b_lo, b_hi)

    def unrecovered_per_flow(self, n_flows: int) -> np.ndarray:
        """PSNs skipped by gaps and never seen since, summed over both spaces of each flow."""
        flow = (self.gap_lo >> _KEY_SHIFT) // 2
        return np.bincount(flow, self.gap_hi - self.gap_lo, minlength=n_flows).astype(np.int64)

    def request_high(self, flows: np.ndarray) -> np.ndarray:
        return self.state.high[2 * flows]
