"""RTT at the capture point: request with AckReq -> first ACK/NAK/response of the peer that covers it.

A response with PSN p (ACK, NAK, ATOMIC ACK, READ response) covers every request PSN <= p of the
peer's request space. Samples are taken only from packets that were not retransmitted before the
covering response arrived (Karn's rule: a later retransmission of the same PSN makes the sample
ambiguous). Requests still unanswered at the end of a chunk are carried to the next one (the
newest 1024 per flow: a flow whose peer is unknown never gets answers), so the result does not
depend on chunking. Percentiles are nearest-rank (an actual sample value).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import IDX_SHIFT, group_bounds, last_before, seg_running_max

_MAX_PENDING_PER_FLOW = 1024  # unanswered requests kept per flow (an unpaired flow never gets answers)


class RttMatcher:
    def __init__(self):
        empty = np.zeros(0, dtype=np.int64)
        self.pending = (empty, empty, empty, empty)  # flow, u, ts, idx
        self.sample_flow: list[np.ndarray] = []
        self.sample_ns: list[np.ndarray] = []
        self.sink = None             # packet_flags.FlagSink of the chunk, when flags are asked for

    def feed(self, requests, responses, retransmissions, gaps=(), last_gap_idx=None) -> None:
        """Each of the first three is (flow, u, ts, idx) in capture order; responses are already
        mapped to the requester's flow and PSN coordinate. gaps: (flow, idx) of this chunk's
        request-space gaps, last_gap_idx: per flow the last one before the chunk (-1: none)."""
        if not (len(requests[0]) or len(responses[0]) or len(retransmissions[0])):
            return   # nothing to match or expire: the pending requests stay as they are
        q = tuple(np.concatenate([a, b]) for a, b in zip(self.pending, requests))
        order = np.argsort(q[0], kind="stable")
        q = tuple(a.take(order) for a in q)
        r_order = np.argsort(responses[0], kind="stable")
        responses = tuple(a.take(r_order) for a in responses)
        matched, pos = self._match(q, responses)
        resp_idx = np.where(matched, responses[3][np.minimum(pos, max(len(responses[3]) - 1, 0))]
                            if len(responses[3]) else 0, np.iinfo(np.int64).max)
        karn = self._retransmitted_before(q, resp_idx, retransmissions)
        if last_gap_idx is not None:
            karn |= matched & _gap_between(q, resp_idx, gaps, last_gap_idx)
        take = matched & ~karn
        if take.any():
            self.sample_flow.append(q[0][take])
            self.sample_ns.append(responses[2][pos[take]] - q[2][take])
            if self.sink is not None:
                self.sink.rtt_samples(responses[3][pos[take]], q[3][take], self.sample_ns[-1])
        keep = ~matched & ~karn
        if keep.all():                      # nothing answered (e.g. no peer yet): no copy
            keep = _newest_per_flow(q[0], _MAX_PENDING_PER_FLOW)
        else:
            keep[keep] = _newest_per_flow(q[0][keep], _MAX_PENDING_PER_FLOW)
        self.pending = q if keep.all() else tuple(a.compress(keep) for a in q)

    @staticmethod
    def _match(q, responses):
        q_flow, q_u, _, q_idx = q
        r_flow, r_u, _, r_idx = responses
        n = len(q_flow)
        if n == 0 or len(r_flow) == 0:
            return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
        starts, lengths, gid = group_bounds(r_flow)
        groups = r_flow[starts]
        low = np.minimum.reduceat(r_u, starts) - 1
        excl, _ = seg_running_max(r_u, starts, lengths, gid, low)
        rel = np.maximum(excl, r_u) - low[gid]  # running max of covered PSN, >= 1
        span = int(rel.max()) + 1
        g = np.minimum(np.searchsorted(groups, q_flow), len(groups) - 1)
        ok = groups[g] == q_flow
        after = np.searchsorted(gid * IDX_SHIFT + r_idx, g * IDX_SHIFT + q_idx, side="right")
        covers = np.searchsorted(gid * span + rel, g * span + np.clip(q_u - low[g], 0, span))
        pos = np.maximum(after, covers)
        end = starts[g] + lengths[g]
        return ok & (pos < end), np.minimum(pos, len(r_flow) - 1)

    @staticmethod
    def _retransmitted_before(q, resp_idx, retransmissions) -> np.ndarray:
        """The first retransmission of the flow after the request, if it comes before the
        covering response and starts at or below the request's PSN (go-back-N from the loss)."""
        t_flow, t_u, _, t_idx = retransmissions
        if len(t_flow) == 0 or len(q[0]) == 0:
            return np.zeros(len(q[0]), dtype=bool)
        order = np.lexsort((t_idx, t_flow))
        t_flow, t_u, t_idx = t_flow[order], t_u[order], t_idx[order]
        keys = t_flow * IDX_SHIFT + t_idx
        pos = np.searchsorted(keys, q[0] * IDX_SHIFT + q[3], side="right")
        ok = pos < len(keys)
        pos = np.minimum(pos, len(keys) - 1)
        return ok & (t_flow[pos] == q[0]) & (t_idx[pos] < resp_idx) & (t_u[pos] <= q[1])

    def forget(self, flows: np.ndarray) -> None:
        """Drop the samples of these requester flows (their pairing was withdrawn)."""
        if len(flows) and self.sample_flow:
            keep = [~np.isin(f, flows) for f in self.sample_flow]
            self.sample_flow = [f[k] for f, k in zip(self.sample_flow, keep)]
            self.sample_ns = [s[k] for s, k in zip(self.sample_ns, keep)]

    def keep_newest(self, limit: int) -> None:
        """Past `limit` samples in all, keep only each flow's newest (limit // 2 shared by the
        flows that have samples): memory stays flat on an endless input (`roceview live`), and
        the percentiles then describe the recent RTT. `analyze` never calls it: every sample."""
        if sum(len(f) for f in self.sample_flow) <= limit:
            return
        flow, ns = np.concatenate(self.sample_flow), np.concatenate(self.sample_ns)
        order = np.argsort(flow, kind="stable")        # each flow's samples stay oldest first
        flow, ns = flow[order], ns[order]
        keep = _newest_per_flow(flow, max(1, limit // 2 // len(np.unique(flow))))
        self.sample_flow, self.sample_ns = [flow[keep]], [ns[keep]]

    def percentiles(self, n_flows: int, pcts=(50, 99)) -> list[np.ndarray]:
        """Per flow nearest-rank percentiles in ns (NaN where a flow has no sample)."""
        out = [np.full(n_flows, np.nan) for _ in pcts]
        if not self.sample_flow:
            return out
        flow = np.concatenate(self.sample_flow)
        ns = np.concatenate(self.sample_ns)
        order = np.lexsort((ns, flow))
        flow, ns = flow[order], ns[order]
        starts, lengths, _ = group_bounds(flow)
        for res, p in zip(out, pcts):
            rank = np.maximum(np.ceil(lengths * (p / 100.0)).astype(np.int64), 1) - 1
            res[flow[starts]] = ns[starts + rank]
        return out


def _gap_between(q, resp_idx, gaps, last_gap_idx) -> np.ndarray:
    """A gap of the request's flow at or after the request and before its covering response: the
    response may be a later ACK covering a request whose own ACK the capture lost."""
    q_flow, q_idx = q[0], q[3]
    g_flow, g_idx = gaps if len(gaps) else (np.zeros(0, np.int64),) * 2
    pos, before = last_before(g_flow, g_idx, last_gap_idx, q_flow, np.minimum(resp_idx, IDX_SHIFT - 1))
    if len(g_idx):                                      # else: the last gap before this chunk
        before = np.where(pos >= 0, g_idx[np.maximum(pos, 0)], before)
    return before >= q_idx


def _newest_per_flow(flow: np.ndarray, limit: int) -> np.ndarray:
    """Mask keeping the last `limit` rows of each flow (rows grouped by flow, oldest first)."""
    keep = np.ones(len(flow), dtype=bool)
    if len(flow) <= limit:
        return keep
    starts, lengths, _ = group_bounds(flow)
    excess = lengths - limit
    over = excess > 0
    if over.any():                   # drop the oldest `excess` rows of each over-full flow
        excess = excess[over]
        first = np.cumsum(excess) - excess
        keep[np.repeat(starts[over] - first, excess) + np.arange(int(excess.sum()))] = False
    return keep
