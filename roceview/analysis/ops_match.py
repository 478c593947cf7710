"""When each operation completes: the first response after its last send that covers it.

A response of the peer (the responder's flow of the QP pair) with PSN p covers:
  - any operation of the SEND / RDMA WRITE kind whose last PSN is <= p for an ACK, an RDMA READ
    response or an ATOMIC ACKNOWLEDGE, <= p - 1 for a NAK of any kind (it refuses p and
    acknowledges what precedes it, IBTA 9.7.5.1.3): coalesced ACKs complete many at once;
  - an RDMA READ only with its own last response (READ RESPONSE LAST or ONLY, PSN inside the
    READ's range: its responses carry its PSNs), an atomic only with its ATOMIC ACKNOWLEDGE (PSN
    equal to its own). An ACK beyond an incomplete READ is an implied NAK, not its completion.
The loop that applies these rules to a chunk is ops_complete.py.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_set import INF, op_key
from roceview.analysis.segments import IDX_SHIFT, group_bounds, seg_running_max

LINGER_NS = 1_000_000          # 1 ms: a resend later than this after the completion is late
_FAR = np.int64(1 << 62)


class Responses:
    """The chunk's responses mapped to their requester's PSN space: sid (the requester's request
    space), p (the PSN, unwrapped in the requester's coordinate), cov (the last PSN it
    acknowledges), idx, ts, rtype (ops_classes.RESP_*), grouped by sid, capture order inside."""

    def __init__(self, ch, part, responses):
        peer_f, u, ts, idx, s = responses
        if not len(s):
            e = np.zeros(0, np.int64)
            self.sid = self.p = self.cov = self.idx = self.ts = e
            self.rtype = np.zeros(0, np.int8)
            return
        r = ch.sorted_r(s)
        opc = ch.opcode.take(r)
        rtype = oc.RESPONSE.take(opc)
        syn = ch.values_at("aeth_syndrome", r)
        nak = (rtype == oc.RESP_ACK) & ((syn >> 5) & 3 != 0)
        nak_seq = nak & ((syn >> 5) & 3 == 3) & ((syn & 0x1F) == 0)
        p = u + nak_seq                                  # chunk_psn.responses took 1 off a NAK's PSN
        order = np.argsort(peer_f, kind="stable")         # one responder flow per requester space
        self.sid = (2 * peer_f)[order]
        self.p, self.cov = p[order], (p - nak)[order]
        self.idx, self.ts, self.rtype = idx[order], ts[order], rtype[order]

    def __len__(self) -> int:
        return len(self.sid)


def own_responses(resp: Responses, ops, range_end: np.ndarray):
    """(op, idx, ts) of the responses that complete a READ (its LAST/ONLY READ response) or an
    atomic (its ATOMIC ACKNOWLEDGE), sorted by (op, idx)."""
    m = (resp.rtype == oc.RESP_READ_LAST) | (resp.rtype == oc.RESP_ATOMIC_ACK)
    if not len(ops) or not m.any():
        e = np.zeros(0, np.int64)
        return e, e, e
    at = np.flatnonzero(m)
    key = op_key(resp.sid[at], resp.p[at])
    pos = np.searchsorted(ops.key, key, side="right") - 1
    ok = pos >= 0
    pos = np.maximum(pos, 0)
    ok &= ops.sid[pos] == resp.sid[at]
    read = resp.rtype[at] == oc.RESP_READ_LAST
    ok &= np.where(read, (ops.by[pos] == oc.BY_READ_RESPONSE) & (resp.p[at] <= range_end[pos]),
                   (ops.by[pos] == oc.BY_ATOMIC_ACK) & (ops.start[pos] == resp.p[at]))
    pos, at = pos[ok], at[ok]
    order = np.lexsort((resp.idx[at], pos))
    return pos[order], resp.idx[at][order], resp.ts[at][order]


def first_after(group: np.ndarray, idx: np.ndarray, q_group: np.ndarray, q_after: np.ndarray) -> np.ndarray:
    """Per query the position of the first row of its group with idx > q_after (rows sorted by
    (group, idx)); len(group) when none."""
    if not len(group):
        return np.zeros(len(q_group), np.int64)
    pos = np.searchsorted(group * IDX_SHIFT + idx, q_group * IDX_SHIFT + np.minimum(q_after, IDX_SHIFT - 1),
                          side="right")
    pos = np.minimum(pos, len(group))
    hit = pos < len(group)
    hit[hit] = group[pos[hit]] == q_group[hit]
    return np.where(hit, pos, len(group))


def first_covering(resp: Responses, sid: np.ndarray, after: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per query (requester space, row index, last PSN): the position of the first response of
    the space after `after` whose cov >= end; len(resp) when none. Responses are mostly in PSN
    order (a running maximum answers); the others (after a re-read, PSNs go back) by binary
    lifting over range maxima."""
    n = len(resp)
    out = np.full(len(sid), n, dtype=np.int64)
    if not n or not len(sid):
        return out
    rsid, cov = resp.sid, resp.cov
    starts = np.flatnonzero(np.r_[True, rsid[1:] != rsid[:-1]])
    stops = np.r_[starts[1:], n]
    g = _group_of(rsid[starts], sid)                                          # each query's group
    has = rsid[starts][g] == sid
    gid = np.repeat(np.arange(len(starts), dtype=np.int64), stops - starts)
    # the first response after `after`: (group, row index) keys, groups in order
    a = np.searchsorted(gid * IDX_SHIFT + resp.idx, g * IDX_SHIFT + np.minimum(after, IDX_SHIFT - 1), side="right")
    c = _first_reaching(cov, starts, stops, gid, g, end)
    hi = stops[g]
    pos = np.maximum(a, c)
    ok = has & (pos < hi)
    good = ok.copy()
    good[ok] = cov[pos[ok]] >= end[ok]
    out[good] = pos[good]
    slow = np.flatnonzero(ok & ~good)
    if len(slow):
        found = _lift(cov, a[slow], hi[slow], end[slow])
        out[slow] = np.where(found < hi[slow], found, n)
    return out


def _group_of(group_sids: np.ndarray, sid: np.ndarray) -> np.ndarray:
    """Index into the sorted `group_sids` of each query's space (clipped); one search per run
    of equal spaces when the queries come grouped (a chunk's operations do)."""
    runs = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    if len(runs) * 4 < len(sid):
        at = np.searchsorted(group_sids, sid[runs])
        return np.minimum(np.repeat(at, np.diff(np.r_[runs, len(sid)])), len(group_sids) - 1)
    return np.minimum(np.searchsorted(group_sids, sid), len(group_sids) - 1)


def _first_reaching(cov, starts, stops, gid, g, end) -> np.ndarray:
    """Per query (group g) the first position of its group where the running maximum of cov
    reaches `end`, the group's end when never."""
    low = np.minimum.reduceat(cov, starts)
    rel = cov - low[gid]
    span = int(rel.max()) + 2
    if span * len(starts) >= (1 << 62):            # pathological PSN jumps: a search per group
        out = stops[g].copy()
        for q in range(len(g)):
            a, b = starts[g[q]], stops[g[q]]
            out[q] = a + np.searchsorted(np.maximum.accumulate(cov[a:b]), end[q], side="left")
        return out
    off = np.arange(len(starts), dtype=np.int64) * span
    runmax = rel + off[gid] if _rising(cov, starts) else np.maximum.accumulate(rel + off[gid])
    pos = np.searchsorted(runmax, off[g] + np.clip(end - low[g], 0, span - 1), side="left")
    return np.minimum(pos, stops[g])


def _rising(values: np.ndarray, starts: np.ndarray) -> bool:
    """Never decreasing inside any group (the running maximum is the values themselves)."""
    step = np.empty(len(values), dtype=bool)
    np.greater_equal(values[1:], values[:-1], out=step[1:])
    step[starts] = True
    return bool(step.all())


def _lift(cov: np.ndarray, start: np.ndarray, stop: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per query the first position in [start, stop) with cov >= end, else stop: binary lifting
    over a table of range maxima (level j: the maximum of 2^j positions from each)."""
    levels = [cov]
    while (1 << len(levels)) <= len(cov):
        prev, w = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-w], prev[w:]))
    pos = start.copy()
    for j in range(len(levels) - 1, -1, -1):
        fits = np.flatnonzero(pos + (1 << j) <= stop)
        step = fits[levels[j][pos[fits]] < end[fits]]
        pos[step] += 1 << j
    return np.minimum(pos, stop)


def sends_after(send_op: np.ndarray, send_idx: np.ndarray, ops_idx: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Position (in the (op, idx)-sorted sends) of each op's first send after `after`; len when none."""
    return first_after(send_op, send_idx, ops_idx, after)


def _later_min(values: np.ndarray, sid: np.ndarray) -> np.ndarray:
    """Per row the minimum of `values` (row indexes, INF: none) over the later rows of its group
    (rows grouped by sid), INF when none: a segmented running maximum of the negated values."""
    big = np.int64(1 << 41)                       # above any row index: a small span for the scan
    rv = -np.minimum(values[::-1], big)
    starts, lengths, gid = group_bounds(sid[::-1])
    excl, _ = seg_running_max(rv, starts, lengths, gid, np.full(len(starts), -big, dtype=np.int64))
    out = -excl[::-1]
    return np.where(out >= big, INF, out)
