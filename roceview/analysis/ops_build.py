"""A chunk's request packets as operations: new operations from the packets that carry new PSNs,
every request packet given the operation whose PSNs hold it.

A packet ahead of its space's highest PSN (not retransmitted: psn.py) starts an operation when its
opcode starts a message (FIRST, ONLY, an RDMA READ or atomic request) or when the space's previous
such packet ended one (a MIDDLE or LAST whose FIRST the capture has not seen): that operation
starts right after the previous one ends, the PSNs of a QP's messages follow each other. Any other
packet continues the space's newest operation. A resent packet belongs to the operation whose
first PSN is the largest at or below its own; a resent FIRST or ONLY in the hole between two
operations (its original was lost before the capture point, a later message's packets were seen)
is an operation of its own, from then on.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_set import NEVER, OpSet, op_key

NONE_PSN = np.int64(-(1 << 62))


class Rows:
    """The chunk's request packets (PSN part, grouped by space, capture order inside one)."""

    def __init__(self, ch, part):
        data = (part.flags & op.F_DATA) != 0
        if not part.is_request_group.all():
            data &= np.repeat(part.is_request_group, ch.lengths)
        s = np.flatnonzero(data)
        r = ch.sorted_r(s)
        opc = ch.opcode.take(r)
        known = oc.KIND.take(opc) >= 0
        self.unknown = int(len(s) - np.count_nonzero(known))       # request opcodes no message has
        if self.unknown:
            s, r, opc = s[known], r[known], opc[known]
        res = part.res
        self.sid, self.u, self.end = ch.sid_rows().take(s), res.u.take(s), res.end.take(s)
        self.retrans = res.retransmitted.take(s)
        self.opc, self.idx, self.ts = opc, ch.idx(r), ch.ts.take(r)
        self.pay = ch.values_at("payload_len", r)
        self.dmalen = np.where(oc.RETH_LENGTH.take(opc), ch.values_at("reth_dmalen", r, fill=-1), -1)
        self.op = np.full(len(s), -1, dtype=np.int64)           # index into the chunk's OpSet

    def __len__(self) -> int:
        return len(self.sid)

    def subset(self, keep: np.ndarray) -> "Rows":
        """The rows where `keep` (the others taken by ops_fast)."""
        out = object.__new__(Rows)
        out.unknown = self.unknown
        for name in ("sid", "u", "end", "retrans", "opc", "idx", "ts", "pay", "dmalen", "op"):
            setattr(out, name, getattr(self, name)[keep])
        return out


def fresh_ops(tr, rows: Rows, an) -> tuple[OpSet, np.ndarray, np.ndarray]:
    """New operations of the packets ahead of their space's highest PSN; (ops, the fresh rows'
    positions, each fresh row's operation: >= 0 a new one, -1 the space's newest carried one)."""
    f = np.flatnonzero(~rows.retrans)
    if not len(f):
        return OpSet.empty(), f, f
    sid, opc, u, end = rows.sid[f], rows.opc[f], rows.u[f], rows.end[f]
    sp = tr.space
    first = np.r_[True, sid[1:] != sid[:-1]]
    prev_ended = np.empty(len(f), dtype=bool)
    prev_ended[1:] = oc.ENDS.take(opc[:-1])
    prev_ended[first] = sp.cur_ended[sid[first]]
    prev_end = np.empty(len(f), dtype=np.int64)
    prev_end[1:] = end[:-1]
    prev_end[first] = sp.cur_end[sid[first]]
    starts_msg = oc.STARTS.take(opc)
    floating = ~starts_msg & ~prev_ended & family_change(opc, first, sp.cur_family[sid[first]])
    is_start = starts_msg | prev_ended | floating
    at_u = starts_msg | floating | (prev_end == NONE_PSN)   # else right after the previous message
    n_new = int(np.count_nonzero(is_start))
    cs = np.cumsum(is_start)
    starts_at = np.flatnonzero(first)
    base = np.repeat((cs - is_start)[starts_at], np.diff(np.r_[starts_at, len(f)]))
    row_op = np.where(cs - base >= 1, cs - 1, -1)   # rows before their group's first start: the carried op
    s = np.flatnonzero(is_start)
    new = OpSet.empty(n_new)
    c = new.cols
    c["sid"] = sid[s]
    c["start"] = np.where(at_u[s], u[s], prev_end[s] + 1)
    c["key"] = op_key(c["sid"], c["start"])
    c["kind"] = oc.KIND.take(opc[s])
    c["by"] = completes_by(an, c["sid"] >> 1, rows.idx[f[s]], c["kind"])
    c["first_idx"], c["first_ts"] = rows.idx[f[s]], rows.ts[f[s]]
    c["last_idx"], c["last_ts"] = c["first_idx"].copy(), c["first_ts"].copy()
    c["dmalen"] = rows.dmalen[f[s]]
    c["floating"] = floating[s]
    return new, f, row_op


def family_change(opc: np.ndarray, first: np.ndarray, carried_family: np.ndarray) -> np.ndarray:
    """Each packet of another message family (SEND, RDMA WRITE) than the packet before it in its
    space (`first`: the first of its space here, compared with `carried_family`, its space's
    newest operation's): the message before it ended, in the PSNs the capture has not shown."""
    fam = oc.FAMILY.take(opc)
    prev = np.empty(len(opc), dtype=np.int8)
    prev[1:] = fam[:-1]
    prev[first] = carried_family
    return (fam != prev) & (fam > 0) & (prev > 0)


def inside_message(ops: OpSet, u: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Whether each PSN `u` (its operation `pos`, -1 none) is one of its operation's own: its
    first, or up to its last when that is known (a READ's range past its span, the PSNs up to an
    unended operation's successor, hold no FIRST or ONLY of it)."""
    if not len(ops):
        return np.zeros(len(u), dtype=bool)
    c = ops.cols
    p = np.maximum(pos, 0)
    return (pos >= 0) & ((c["start"][p] == u) | (c["ended"][p] & (u <= c["end"][p])))


def move_floating(ops: OpSet, sid: np.ndarray, u: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Resent FIRST / ONLY packets (space, PSN, the operation holding the PSN or -1) right below
    a floating operation and no PSN of the operation before it: that operation's first PSN (the
    highest such packet's, when several). Returns the rows whose PSN the move took."""
    c = ops.cols
    nxt = np.searchsorted(c["key"], op_key(sid, u), side="right")
    ok = nxt < len(ops)
    nxt = np.minimum(nxt, max(len(ops) - 1, 0))
    ok &= (c["sid"][nxt] == sid) & c["floating"][nxt] & (c["start"][nxt] > u)
    ok &= ~inside_message(ops, u, pos)
    if not ok.any():
        return ok
    at = np.flatnonzero(ok)
    order = np.lexsort((u[at], nxt[at]))
    at = at[order][np.r_[nxt[at][order][1:] != nxt[at][order][:-1], True]]   # the highest PSN per operation
    o = nxt[at]
    c["start"][o], c["key"][o], c["floating"][o] = u[at], op_key(sid[at], u[at]), False
    took = np.zeros(len(u), dtype=bool)
    took[at] = True
    return took


def completes_by(an, flow: np.ndarray, idx: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """How each new operation completes; NEVER on UC, and on a flow without a peer past the
    pairing horizon (as rtt.py: its responses are not expected)."""
    from roceview.analysis.chunk_psn import PAIRING_HORIZON

    by = oc.COMPLETES_BY.take(kind)
    transport = an.flow.transport.take(flow)
    never = transport == 1                                        # UC (opcode_classes.TRANSPORT_NAMES)
    never |= (an.pairing.peer.take(flow) < 0) & (idx - an.flow.first_idx.take(flow) >= PAIRING_HORIZON)
    return np.where(never, NEVER, by).astype(np.int8)


def resent(ops, rows) -> np.ndarray:
    """Operations retransmitted so far: before this chunk, or by one of its packets."""
    out = ops.cols["retrans"].copy()
    r = rows.op[rows.retrans & (rows.op >= 0)]
    out[r] = True
    return out


def ud_rows(ch):
    """(rows, row index, flow) of the chunk's UD SEND ONLY packets: an operation each."""
    m = (ch.opcode == oc.UD_SEND_ONLY) | (ch.opcode == oc.UD_SEND_ONLY_IMM)
    if not m.any():
        e = np.zeros(0, np.int64)
        return e, e, e
    r = np.flatnonzero(m)
    return r, ch.idx(r), ch.fid.take(r)


def fallback_mtu(an, flow: np.ndarray) -> np.ndarray:
    """The path MTU of each flow's path when known (a SEND of several packets whose FIRST and
    MIDDLE packets were all missed), else 0."""
    try:
        exact, _ = an.path_mtu.flow_bounds(an.flow_paths)
        exact = np.asarray(exact, np.int64)
        if len(exact) <= int(flow.max(initial=-1)):
            return np.zeros(len(flow), np.int64)
        return np.maximum(exact.take(flow), 0)
    except Exception:                                      # noqa: BLE001 - no evidence kept for it
        return np.zeros(len(flow), np.int64)


def ranks(firsts: np.ndarray) -> np.ndarray:
    """The rank of each distinct row index (a chunk's operations start on distinct packets)."""
    if not len(firsts):
        return firsts
    lo = int(firsts.min())
    span = int(firsts.max()) - lo + 1
    if span > 4 * len(firsts) + 1024:                      # sparse: a sort
        rank = np.empty(len(firsts), dtype=np.int64)
        rank[np.argsort(firsts, kind="stable")] = np.arange(len(firsts))
        return rank
    mark = np.zeros(span, dtype=np.int64)
    mark[firsts - lo] = 1
    return (np.cumsum(mark) - 1)[firsts - lo]


def merge(ops: OpSet, new: OpSet) -> tuple[OpSet, np.ndarray]:
    """ops and new in one set sorted by key; the positions of new's rows in it."""
    if not len(new):
        return ops, np.zeros(0, np.int64)
    if not len(ops):
        order = np.argsort(new.cols["key"], kind="stable")
        where = np.empty(len(new), np.int64)
        where[order] = np.arange(len(new))
        return new.take(order), where
    both = OpSet.concat([ops, new])
    order = np.argsort(both.cols["key"], kind="stable")
    where = np.empty(len(both), np.int64)
    where[order] = np.arange(len(both))
    return both.take(order), where[len(ops):]


def find(ops: OpSet, sid: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Position of the operation (sid, start), -1 when not there."""
    if not len(ops):
        return np.full(len(sid), -1, np.int64)
    key = op_key(sid, start)
    pos = np.minimum(np.searchsorted(ops.cols["key"], key), len(ops) - 1)
    return np.where((ops.cols["key"][pos] == key) & (start != NONE_PSN), pos, -1)


def containing(ops: OpSet, sid: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The operation whose PSNs hold each (space, PSN): the largest first PSN at or below it,
    the PSN inside its range (a READ's up to the next operation); -1 when none."""
    if not len(ops):
        return np.full(len(sid), -1, np.int64)
    c = ops.cols
    pos = np.searchsorted(c["key"], op_key(sid, u), side="right") - 1
    ok = pos >= 0
    pos = np.maximum(pos, 0)
    end_eff, range_end = ops.ends()
    last = np.where(c["by"] == oc.BY_READ_RESPONSE, range_end, end_eff)
    ok &= (c["sid"][pos] == sid) & (u <= last[pos])
    return np.where(ok, pos, -1)


def aggregate(ops, rows, counted: np.ndarray) -> None:
    """The counted sends into their operations: packets, retransmitted, last packet, payloads."""
    if not len(counted):
        return
    c = ops.cols
    o = rows.op[counted]
    n = len(ops)
    c["packets"] += np.bincount(o, minlength=n)
    c["retrans"] |= np.bincount(o, rows.retrans[counted], minlength=n) > 0
    max_into(c["hi_u"], o, rows.u[counted])
    last = np.r_[o[1:] != o[:-1], True]                     # sends are sorted by (op, idx)
    lo, li = o[last], counted[last]
    later = rows.idx[li] > c["last_idx"][lo]
    c["last_idx"][lo[later]], c["last_ts"][lo[later]] = rows.idx[li[later]], rows.ts[li[later]]
    fm = oc.FIRST_MIDDLE.take(rows.opc[counted])
    if fm.any():
        max_into(c["mtu_pay"], o[fm], rows.pay[counted[fm]])
    lo_ = oc.LAST_OR_ONLY.take(rows.opc[counted])
    if lo_.any():
        max_into(c["last_pay"], o[lo_], rows.pay[counted[lo_]])
    reth = np.flatnonzero(rows.dmalen[counted] >= 0)
    if len(reth):
        unset = c["dmalen"][o[reth]] < 0
        first = reth[unset][np.r_[True, o[reth[unset]][1:] != o[reth[unset]][:-1]]] if unset.any() else reth[:0]
        c["dmalen"][o[first]] = rows.dmalen[counted[first]]


def max_into(target: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
    """target[at] = max(target[at], values) with `at` sorted (ufunc.at is slow)."""
    first = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    where = at[first]
    target[where] = np.maximum(target[where], np.maximum.reduceat(values, first))
