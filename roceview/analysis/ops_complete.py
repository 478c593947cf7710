"""The completion of a chunk's operations, by the rules of ops_match.py, plus two:

  - a send of an operation after its completion reopens it when it comes within LINGER_NS of
    it (a re-read after the READ's responses were lost past the capture point, a resend whose
    ACK was lost there): its completion is then the first covering response after that send.
    A later send closes the operation (the capture saw what completed it; a late packet);
  - completions are in order (IBTA 9.7.5.1): an operation completes no earlier than every
    earlier operation of its space that was retransmitted (while that one is not given up: its
    expiry, after which it is gone). After a loss the responses to the
    requests sent before the go-back-N (or the re-read) still arrive and cover later PSNs; the
    requester, waiting for the resent request's answer, discards them. Only retransmitted
    operations block: one whose completion the capture alone missed would block every later
    one for ever, while a requester that resends shows it waited.
The second makes each operation's completion depend on earlier ones': the loop runs again with
the earlier operations' completions as lower bounds until they settle (a few rounds, only in a
chunk with retransmissions).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_match import (
    LINGER_NS,
    first_after,
    first_covering,
    own_responses,
)
from roceview.analysis.ops_set import INF, NEVER
from roceview.analysis.segments import group_bounds, seg_running_max

MAX_ROUNDS = 64
_STATE = ("compl_idx", "compl_ts", "closed")


class Completion:
    """One chunk's operations (an OpSet sorted by key); sends (op, idx, ts) sorted by (op, idx)
    without those past an operation's expiry; `new`: created in this chunk; `resent`: the
    operations retransmitted so far (this chunk's packets included)."""

    def __init__(self, ops, new: np.ndarray, sends, resp, resent: np.ndarray):
        self.ops, self.c, self.resp, self.new = ops, ops.cols, resp, new
        self.end_eff, self.range_end = ops.ends()
        self.known = ops.known_since()
        self.own_op, self.own_idx, self.own_ts = own_responses(resp, ops, self.range_end)
        self.s_op, self.s_idx, self.s_ts = sends
        c = self.c
        self.own = (c["by"] == oc.BY_READ_RESPONSE) | (c["by"] == oc.BY_ATOMIC_ACK)
        self.blocks = resent & (c["by"] != NEVER)
        self.start = {k: c[k].copy() for k in _STATE}
        self.block = np.full(len(ops), -1, dtype=np.int64)

    def run(self) -> None:
        for _ in range(MAX_ROUNDS):
            self._round()
            if not self.blocks.any():
                break
            block = self._bounds()
            if np.array_equal(block, self.block):
                break
            self.block = block
            for k, v in self.start.items():
                self.c[k][:] = v
        self._passed()

    def _passed(self) -> None:
        """Each READ / atomic learns the first response past its PSNs (the responder answered
        later requests: without a completion the READ depth no longer counts it, ops_depth.py),
        completed or not for now (a resend may yet reopen it: the response stays the first)."""
        c, resp = self.c, self.resp
        wait = np.flatnonzero(self.own & (c["sup_idx"] >= INF) & (self.range_end < INF))
        if not len(wait) or not len(resp):
            return
        since = np.maximum(c["first_idx"][wait], self.ops.known_since(ranges=True)[wait])   # its range known
        pos = first_covering(resp, c["sid"][wait], since, self.range_end[wait] + 1)
        ok = pos < len(resp)
        c["sup_idx"][wait[ok]], c["sup_ts"][wait[ok]] = resp.idx[pos[ok]], resp.ts[pos[ok]]

    def _bounds(self) -> np.ndarray:
        """Per operation the latest completion of the retransmitted operations before it in its
        space (INF while one of them is open): it completes no earlier."""
        c = self.c
        # an open one blocks until it completes, or is given up (its expiry: evicted, it would
        # no longer be there to block)
        value = np.where(c["compl_idx"] >= 0, c["compl_idx"], np.where(c["expire"] < INF, c["expire"], INF))
        value = np.where(self.blocks, value, -1)
        starts, lengths, gid = group_bounds(c["sid"])
        before, _ = seg_running_max(value, starts, lengths, gid, np.full(len(starts), -1, dtype=np.int64))
        return before

    def _round(self) -> None:
        c = self.c
        self.close = np.full(len(self.ops), INF, dtype=np.int64)
        self.t0 = np.where(self.new, c["first_idx"], -1)
        todo = np.flatnonzero((c["compl_idx"] < 0) & ~c["closed"] & (c["by"] != NEVER))
        has_sends = np.zeros(len(self.ops), dtype=bool)
        has_sends[self.s_op] = True
        check = np.flatnonzero((c["compl_idx"] >= 0) & ~c["closed"] & has_sends)
        while len(todo) or len(check):
            if len(todo):
                check = _union(check, self._complete(todo))
            todo = self._reopen(check) if len(check) else check[:0]
            check = check[:0]

    def _complete(self, todo: np.ndarray) -> np.ndarray:
        c, resp = self.c, self.resp
        after = np.maximum(self.t0, self.block - 1)          # the same response may complete both
        todo = todo[self.block[todo] < INF]
        done = []
        generic = todo[(c["by"][todo] == oc.BY_ANY) & (self.end_eff[todo] < INF)]
        if len(generic) and len(resp):
            since = np.maximum(after[generic], np.where(self.known[generic] < INF, self.known[generic], -1))
            pos = first_covering(resp, c["sid"][generic], since, self.end_eff[generic])
            ok = pos < len(resp)
            ok[ok] = resp.idx[pos[ok]] < c["expire"][generic[ok]]
            done.append(self._set(generic[ok], resp.idx[pos[ok]], resp.ts[pos[ok]]))
        own = todo[self.own[todo]]
        if len(own) and len(self.own_op):
            pos = first_after(self.own_op, self.own_idx, own, after[own])
            ok = pos < len(self.own_op)
            ok[ok] = self.own_idx[pos[ok]] < c["expire"][own[ok]]
            done.append(self._set(own[ok], self.own_idx[pos[ok]], self.own_ts[pos[ok]]))
        return np.concatenate(done) if done else todo[:0]

    def _set(self, ops, idx, ts) -> np.ndarray:
        self.c["compl_idx"][ops], self.c["compl_ts"][ops] = idx, ts
        return ops

    def _reopen(self, check: np.ndarray) -> np.ndarray:
        """A send after the completion: within LINGER_NS it reopens the operation, later it
        closes it for good."""
        c = self.c
        pos = first_after(self.s_op, self.s_idx, check, c["compl_idx"][check])
        has = pos < len(self.s_op)
        check, pos = check[has], pos[has]
        soon = self.s_ts[pos] - c["compl_ts"][check] <= LINGER_NS
        late, lpos = check[~soon], pos[~soon]
        c["closed"][late] = True
        self.close[late] = self.s_idx[lpos]
        again, apos = check[soon], pos[soon]
        c["compl_idx"][again] = -1
        self.t0[again] = self.s_idx[apos]
        return again


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted distinct values of both (np.union1d imports numpy.ma: 10 ms of a run's start)."""
    both = np.sort(np.concatenate([a, b]))
    return both[np.r_[True, both[1:] != both[:-1]]] if len(both) else both
