"""The requester's READ depth: how many of its RDMA READ and atomic operations are in flight, as
the requester sees it.

A READ or atomic is in flight from its first packet to its completion (its final one: a re-read
after its responses were lost past the capture point keeps it in flight); without one, to the
first response past its PSNs (the responder answered later requests: it had answered this one,
the capture missed that) or its expiry (PENDING_PER_SPACE newer operations), whichever comes
first. Each operation's `outstanding` is the depth just before its first packet; the time
at each depth >= 1 and the READs started at each depth go to the statistics (`read_depth`).

Those are known only once every READ of the space started before has its interval settled (it
is final): events (+1, -1 of final READs' intervals) and queries (final operations' first
packets, whose row waits for its `outstanding`) are buffered and swept per space up to its
frontier, the first packet of its oldest READ still open. The buffers hold what comes after
the oldest open READ: at most about PENDING_PER_SPACE operations of a space.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_set import INF
from roceview.analysis.segments import group_bounds


def own(by: np.ndarray) -> np.ndarray:
    return (by == oc.BY_READ_RESPONSE) | (by == oc.BY_ATOMIC_ACK)


def intervals(ops) -> tuple:
    """(sid, start idx, start ts, end idx, end ts) of the final READs / atomics `ops`; end INF:
    in flight to the end of the capture."""
    c = ops.cols
    m = np.flatnonzero(own(c["by"]))
    done = c["compl_idx"][m] >= 0
    end, end_ts = c["sup_idx"][m], c["sup_ts"][m]                    # without a completion: passed,
    sooner = (c["expire"][m] >= 0) & (c["expire"][m] < end)          # or given up
    end, end_ts = np.where(sooner, c["expire"][m], end), np.where(sooner, c["expire_ts"][m], end_ts)
    end, end_ts = np.where(done, c["compl_idx"][m], end), np.where(done, c["compl_ts"][m], end_ts)
    return c["sid"][m], c["first_idx"][m], c["first_ts"][m], end, end_ts


class DepthSweep:
    """The buffered events and queries, swept per space up to its frontier."""

    def __init__(self):
        e = np.zeros(0, np.int64)
        self.events = (e, e, e, e)              # sid, idx, ts, delta
        self.q_rows: list[dict] = []            # final operations' row values awaiting `outstanding`

    def add(self, ops_final) -> None:
        """Final operations: their READ intervals as events (their rows come as queries)."""
        sid, s_idx, s_ts, e_idx, e_ts = intervals(ops_final)
        ends = e_idx < INF
        ev = (np.r_[sid, sid[ends]], np.r_[s_idx, e_idx[ends]], np.r_[s_ts, e_ts[ends]],
              np.r_[np.ones(len(sid), np.int64), -np.ones(int(ends.sum()), np.int64)])
        self.events = tuple(np.concatenate([a, b]) for a, b in zip(self.events, ev))

    def sweep(self, tr, open_ops) -> list[dict]:
        """Process, per space, every event and query before the first packet of its oldest
        operation still open (`open_ops`: all of them, parked too: a query may still come from
        any); a query of a space with no READ in flight, open or to be swept, is depth 0 now.
        The query rows answered (their `outstanding` set), to be stored."""
        rows = _joined(self.q_rows)
        self.q_rows = []
        if rows is None and not len(self.events[0]):
            return []
        frontier = _first_open(open_ops, all_ops=True)
        q_sid = rows["flow"] * 2 if rows is not None else np.zeros(0, np.int64)
        q_idx = rows["first_idx"] if rows is not None else q_sid
        e_sid, e_idx, e_ts, e_delta = self.events
        e_now = e_idx < frontier(e_sid)
        q_now = q_idx < frontier(q_sid)
        self.events = tuple(a[~e_now] for a in self.events)
        out = _sweep(tr, (e_sid[e_now], e_idx[e_now], e_ts[e_now], e_delta[e_now]), q_sid[q_now], q_idx[q_now])
        if rows is None:
            return []
        outstanding = np.zeros(len(q_sid), np.int64)
        outstanding[q_now] = out
        quiet = q_now | _quiet(tr, q_sid, self.events[0], _first_open(open_ops, all_ops=False))
        if not quiet.all():
            self.q_rows.append({k: v[~quiet] for k, v in rows.items()})
        return [_answered(rows, quiet, outstanding[quiet])] if quiet.any() else []


def _quiet(tr, q_sid, waiting_sids, own_open) -> np.ndarray:
    """Queries whose space has depth 0 and no READ open or waiting to be swept: depth 0 for
    them whatever comes (a READ that starts later starts after them)."""
    quiet = tr.space.depth[q_sid] == 0
    quiet &= own_open(q_sid) >= INF
    if len(waiting_sids):
        quiet &= ~np.isin(q_sid, waiting_sids)
    return quiet


def _joined(parts: list[dict]):
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _answered(rows: dict, now: np.ndarray, outstanding: np.ndarray) -> dict:
    out = {k: v[now] for k, v in rows.items()}
    out["outstanding"] = outstanding
    return out


def _sweep(tr, events, q_sid, q_idx) -> np.ndarray:
    """Depth before each query (in the queries' order); the time at each depth between events;
    the READs started at each depth; the spaces' carried depth."""
    e_sid, e_idx, e_ts, e_delta = events
    n_q = len(q_sid)
    sid = np.r_[q_sid, e_sid]
    idx = np.r_[q_idx, e_idx]
    is_event = np.r_[np.zeros(n_q, bool), np.ones(len(e_sid), bool)]
    delta = np.r_[np.zeros(n_q, np.int64), e_delta]
    ts = np.r_[np.zeros(n_q, np.int64), e_ts]
    order = np.lexsort((delta, is_event, idx, sid))   # a query before an event at its row; -1 before +1
    sid, idx, is_event, delta, ts = sid[order], idx[order], is_event[order], delta[order], ts[order]
    starts, lengths, _ = group_bounds(sid)
    sp = tr.space
    cs = np.cumsum(delta)
    excl = cs - delta
    before = excl - np.repeat(excl[starts], lengths) + np.repeat(sp.depth[sid[starts]], lengths)
    out = np.empty(n_q, dtype=np.int64)
    out[order[~is_event]] = np.maximum(before[~is_event], 0)
    _time(tr, sid[is_event], ts[is_event], np.maximum(before[is_event], 0))
    rise = is_event & (delta > 0)
    if rise.any():
        tr.stats.add_depth(sid[rise] >> 1, np.maximum(before[rise], 0), np.zeros(int(rise.sum()), np.int64),
                           np.ones(int(rise.sum()), np.int64))
    last = starts + lengths - 1
    sp.depth[sid[last]] = np.maximum(before[last] + delta[last], 0)
    return out


def _time(tr, sid: np.ndarray, ts: np.ndarray, depth: np.ndarray) -> None:
    """The time from each depth change to the previous one of its space (the first from the
    space's carried last change), at the depth between them."""
    if not len(sid):
        return
    sp = tr.space
    starts, lengths, _ = group_bounds(sid)
    prev = np.empty(len(ts), dtype=np.int64)
    prev[1:] = ts[:-1]
    prev[starts] = sp.depth_ts[sid[starts]]
    dt = np.maximum(ts - prev, 0)
    m = depth >= 1
    if m.any():
        tr.stats.add_depth(sid[m] >> 1, depth[m], dt[m], np.zeros(int(m.sum()), np.int64))
    last = starts + lengths - 1
    sp.depth_ts[sid[last]] = ts[last]


def _first_open(ops, all_ops: bool):
    """f(sid): the first packet of the space's oldest operation still open (READs and atomics
    only, unless `all_ops`); INF for none."""
    c = ops.cols
    m = np.arange(len(ops)) if all_ops else np.flatnonzero(own(c["by"]))
    if not len(m):
        return lambda sid: np.full(len(sid), INF, dtype=np.int64)
    sid, first = c["sid"][m], c["first_idx"][m]
    order = np.lexsort((first, sid))
    sid, first = sid[order], first[order]
    head = np.r_[True, sid[1:] != sid[:-1]]
    sid, first = sid[head], first[head]

    def frontier(q: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(sid, q), len(sid) - 1)
        return np.where(sid[pos] == q, first[pos], INF)
    return frontier
