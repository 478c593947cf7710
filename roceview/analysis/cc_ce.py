"""CE received without a CNP: per data flow, the CE-marked data packets that no CNP answered.

The receiver's notification point sends at most one CNP per QP per `min_time_between_cnps`: a
CE-marked packet at t is answered by a CNP from its receiver back to its sender within
(t - spacing, t + spacing] (one sent just before covers it; else one is due at once). CNPs are
matched by host pair (the CE's destination to its source, any QP): with several QPs between two
hosts a CNP to another QP answers too, so the count is a lower bound. Only CE marks the capture
sees count (a mirror before the marking switch sees none). CE packets whose window runs past the
chunk wait for the next one (those of the last `spacing` ns), so the counts do not depend on
the chunking.
"""
from __future__ import annotations

import numpy as np

_SPAN = 1 << 40          # ns: a chunk's time span, below this, keeps (pair, time) in one int64 key


class CeAnswers:
    def __init__(self, spacing_ns: int):
        self.spacing = spacing_ns
        self.pairs: dict[tuple, int] = {}            # (source, destination) -> host pair number
        self.last_cnp = np.zeros(0, dtype=np.int64)  # per host pair: newest CNP ts (-inf: none)
        self.pending = (np.zeros(0, dtype=np.int64),) * 3   # CE rows waiting: flow, pair, ts
        self.ce = np.zeros(0, dtype=np.int64)        # per data flow: CE-marked data packets
        self.missing = np.zeros(0, dtype=np.int64)   # ... of them, no CNP answered

    def pair(self, src, dst) -> int:
        """The number of a host pair (new ones get the next)."""
        key = (src, dst)
        if key not in self.pairs:
            self.pairs[key] = len(self.pairs)
            self.last_cnp = np.append(self.last_cnp, np.iinfo(np.int64).min // 2)
        return self.pairs[key]

    def grow(self, n: int) -> None:
        if n > len(self.ce):
            add = n - len(self.ce)
            self.ce = np.concatenate([self.ce, np.zeros(add, dtype=np.int64)])
            self.missing = np.concatenate([self.missing, np.zeros(add, dtype=np.int64)])

    def feed(self, ce_flow, ce_pair, ce_ts, cnp_pair, cnp_ts, now: int, final: bool = False) -> None:
        """This chunk's CE rows (data flow, host pair, ts) and CNP rows (host pair of the CNP's
        destination -> source, ts); `now`: the chunk's last timestamp."""
        np.add.at(self.ce, ce_flow, 1)
        flow, pair, ts = (np.concatenate([a, b]) for a, b in zip(self.pending, (ce_flow, ce_pair, ce_ts)))
        order = np.lexsort((cnp_ts, cnp_pair))
        cnp_pair, cnp_ts = cnp_pair[order], cnp_ts[order]
        t0 = min(int(ts.min()) if len(ts) else now, int(cnp_ts.min()) if len(cnp_ts) else now) - 1
        ckey = cnp_pair * _SPAN + np.clip(cnp_ts - t0, 0, _SPAN - 1)
        qkey = pair * _SPAN + np.clip(ts - t0, 0, _SPAN - 1)
        before = self._newest_before(ckey, cnp_pair, cnp_ts, qkey, pair)
        nxt = np.searchsorted(ckey, qkey, side="right")
        after = np.where(nxt < len(ckey), cnp_ts[np.minimum(nxt, max(len(ckey) - 1, 0))]
                         if len(ckey) else 0, np.iinfo(np.int64).max)
        after = np.where((nxt < len(ckey)) & (cnp_pair[np.minimum(nxt, max(len(ckey) - 1, 0))] == pair)
                         if len(ckey) else False, after, np.iinfo(np.int64).max)
        answered = (before > ts - self.spacing) | (after <= ts + self.spacing)
        wait = ~answered & (ts + self.spacing > now) & (not final)
        np.add.at(self.missing, flow[~answered & ~wait], 1)
        self.pending = (flow[wait], pair[wait], ts[wait])
        if len(cnp_pair):
            np.maximum.at(self.last_cnp, cnp_pair, cnp_ts)

    def _newest_before(self, ckey, cnp_pair, cnp_ts, qkey, pair) -> np.ndarray:
        """Per CE: the newest CNP of its host pair at or before it (this chunk's, else carried)."""
        carried = self.last_cnp[pair] if len(pair) else np.zeros(0, dtype=np.int64)
        if not len(ckey):
            return carried
        pos = np.searchsorted(ckey, qkey, side="right") - 1
        ok = (pos >= 0) & (cnp_pair[np.maximum(pos, 0)] == pair)
        return np.where(ok, cnp_ts[np.maximum(pos, 0)], carried)
