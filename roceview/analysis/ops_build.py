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
from roceview.analysis.ops_set import INF, NEVER, OpSet, op_key
from roceview.analysis.segments import PSN_MOD

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
    is_start = starts_msg | prev_ended
    at_u = starts_msg | (prev_end == NONE_PSN)            # else right after the previous message
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
    c["by"] = _completes_by(an, c["sid"] >> 1, rows.idx[f[s]], c["kind"])
    c["first_idx"], c["first_ts"] = rows.idx[f[s]], rows.ts[f[s]]
    c["last_idx"], c["last_ts"] = c["first_idx"].copy(), c["first_ts"].copy()
    c["dmalen"] = rows.dmalen[f[s]]
    return new, f, row_op


def _completes_by(an, flow: np.ndarray, idx: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """How each new operation completes; NEVER on UC, and on a flow without a peer past the
    pairing horizon (as rtt.py: its responses are not expected)."""
    from roceview.analysis.chunk_psn import PAIRING_HORIZON

    by = oc.COMPLETES_BY.take(kind)
    transport = an.flow.transport.take(flow)
    never = transport == 1                                        # UC (opcode_classes.TRANSPORT_NAMES)
    never |= (an.pairing.peer.take(flow) < 0) & (idx - an.flow.first_idx.take(flow) >= PAIRING_HORIZON)
    return np.where(never, NEVER, by).astype(np.int8)
