"""The operations of paired spaces sending small messages without loss, made directly: the
general path's result (ops.py) in a few passes, as most RC traffic is.

A space qualifies for a chunk when its flow has a peer, every request packet of it here is a
SEND / RDMA WRITE ONLY ahead of its space's highest PSN (no resend, no READ or atomic), nothing
of it is carried but completed operations, and it has no READ in flight. Each packet is then an
operation; its completion is the first covering response after it (ops_match.first_covering:
no resend can reopen it, no retransmitted operation precedes it), and before the row its space's
operation PENDING_PER_SPACE ordinals later starts (its expiry). Completed more than LINGER_NS
before the chunk's end, or given up, it is final at once; else (a resend may still reopen it, a
response still complete it) it is carried in the operation set as the general path would.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_build import max_into
from roceview.analysis.ops_match import LINGER_NS, first_covering
from roceview.analysis.ops_set import INF, OpSet, op_key
from roceview.analysis.segments import PSN_MOD
from roceview.analysis.tables import NONE_TS
from roceview.arrays import runs
from roceview.kernels import backend as kernels


def eligible(tr, an, rows, state) -> np.ndarray:
    """Mask of the rows whose space qualifies (rows grouped by space)."""
    n = len(rows)
    if not n:
        return np.zeros(0, dtype=bool)
    starts, stops = runs(rows.sid)
    s = rows.sid[starts]
    sp = tr.space
    ok = (an.pairing.peer.take(s >> 1) >= 0) & (an.flow.transport.take(s >> 1) != 1)        # RC, RD, XRC
    ok &= sp.cur_ended[s] & (sp.depth[s] == 0)
    fast = oc.FAST.take(rows.opc)
    ok &= np.logical_and.reduceat(((fast & oc.F_PAYLOAD_BYTES) != 0) & ~rows.retrans, starts)
    if len(state) and ok.any():
        c = state.cols
        busy = c["sid"][(c["compl_idx"] < 0) | c["closed"]]          # carried ops it still awaits
        if len(busy):
            ok &= ~np.isin(s, busy)
    return np.repeat(ok, stops - starts)


def operations(tr, rows, take: np.ndarray, resp, now: int, pending: int):
    """(final operations' values with `number` to set, the others as a new OpSet) of the
    qualifying rows `take` (grouped by space, capture order). Past the ops table's row budget
    the values are only what the statistics read (ops._account)."""
    sid, u, idx = rows.sid[take], rows.u[take], rows.idx[take]
    n = len(take)
    sp = tr.space
    expire, compl_idx, compl_ts, final = match(resp, sid, u, idx, pending, now)
    kind = oc.KIND.take(rows.opc[take]).astype(np.int64)
    pay, dmalen, ts = rows.pay[take], rows.dmalen[take], rows.ts[take]
    nbytes = np.where(dmalen >= 0, dmalen, pay)
    first, stops = runs(sid)
    lengths, last = stops - first, stops - 1
    o = np.flatnonzero(~final)
    carried_k = (np.repeat(sp.n_ops[sid[first]] - first, lengths)[o] + o) if len(o) else o
    s = sid[first]
    sp.cur_start[s], sp.cur_end[s], sp.cur_ended[s] = u[last], u[last], True
    sp.n_ops[s] += lengths
    f = slice(None) if not len(o) else np.flatnonzero(final)         # (a slice: no copies)
    count = n - len(o)
    if count:
        max_into(sp.evicted_hi, sid[f], u[f])
    values = {"number": np.zeros(count, np.int64), "flow": sid[f] >> 1, "kind": kind[f], "bytes": nbytes[f],
              "first_ts": ts[f], "compl_idx": compl_idx[f], "compl_ts": compl_ts[f],
              "retrans": np.zeros(count, bool)}
    if tr.created < tr.store.max_rows:              # rows may be listed: every column
        done = values["compl_idx"] >= 0
        values.update({"first_psn": u[f] & (PSN_MOD - 1), "packets": np.ones(count, np.int64),
                       "first_idx": idx[f], "last_idx": idx[f], "last_ts": values["first_ts"],
                       "compl_ts": np.where(done, values["compl_ts"], NONE_TS),
                       "outstanding": np.zeros(count, np.int64)})
    carried = _carried(sid[o], u[o], carried_k, kind[o], idx[o], ts[o], pay[o], dmalen[o], compl_idx[o], compl_ts[o],
                       expire[o])
    return values, carried, idx[f], idx[o]


def match(resp, sid, u, idx, pending: int, now: int):
    """(expire, compl_idx, compl_ts, final) per operation (grouped by space, rows and PSNs
    rising in one): its expiry (the row of its space's operation `pending` + 1 later, INF
    when not here), its completion (the first covering response after it, before its expiry;
    -1 and 0 without) and whether it is final (as ops._final decides). The C kernel when built
    (one walk per space), else match_numpy."""
    if kernels.ops_direct is not None:
        out = kernels.ops_direct(sid, u, idx, resp.sid, resp.cov, resp.idx, resp.ts, pending, now, LINGER_NS, int(INF))
        if out is not None:
            return out
    return match_numpy(resp, sid, u, idx, pending, now)


def match_numpy(resp, sid, u, idx, pending: int, now: int):
    """match() in numpy: binary searches per operation (ops_match.first_covering)."""
    n = len(sid)
    first, stops = runs(sid)
    lengths = stops - first
    pos = np.arange(n) - np.repeat(first, lengths)                      # ordinal within the chunk
    expire = _expiry(idx, pos, lengths, first, pending)
    at = first_covering(resp, sid, idx, u) if len(resp) else np.full(n, len(resp))
    done = at < len(resp)
    done[done] = resp.idx[at[done]] < expire[done]
    compl_idx = np.where(done, resp.idx[np.minimum(at, max(len(resp) - 1, 0))] if len(resp) else -1, -1)
    compl_ts = np.where(done, resp.ts[np.minimum(at, max(len(resp) - 1, 0))] if len(resp) else 0, 0)
    final = (expire < INF) | (done & (compl_ts + LINGER_NS < now))
    return expire, compl_idx, compl_ts, final


def _expiry(idx, pos, lengths, first, pending: int) -> np.ndarray:
    """The row of the space's operation `pending` + 1 ordinals later, INF when not in the chunk."""
    later = pos + pending + 1
    inside = later < np.repeat(lengths, lengths)
    out = np.full(len(idx), INF, dtype=np.int64)
    out[inside] = idx[(np.repeat(first, lengths) + later)[inside]]
    return out


def _carried(sid, u, k, kind, idx, ts, pay, dmalen, compl_idx, compl_ts, expire) -> OpSet:
    ops = OpSet.empty(len(sid))
    c = ops.cols
    c["sid"], c["start"], c["key"], c["end"], c["k"] = sid, u, op_key(sid, u), u, k
    c["kind"] = kind.astype(np.int8)
    c["first_idx"], c["first_ts"], c["last_idx"], c["last_ts"] = idx, ts, idx, ts
    c["last_pay"], c["dmalen"], c["hi_u"] = pay, dmalen, u
    c["compl_idx"], c["compl_ts"], c["expire"] = compl_idx, compl_ts, expire
    c["ended"][:], c["by"][:], c["packets"][:] = True, oc.BY_ANY, 1
    return ops
