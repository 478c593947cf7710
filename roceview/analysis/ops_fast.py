"""The operations of PSN spaces nothing completes, made directly from their packets: the same
rows the general path (ops.py) gives them, a few passes over the packets instead of an operation
set merged, matched and evicted.

A space qualifies for a chunk when its operations cannot complete (UC; RC, RD, XRC whose flow has
no peer PAIRING_HORIZON rows after its first packet: ops_build.completes_by), nothing of it is
carried (no operation open, READ depth 0), none of its packets here is retransmitted (late, in
such a space, as on the general path) and its last packet here ends a message: every operation
of it starts and ends in the chunk and is final at once (a mirror of one direction only, a UC
stream: most of a capture's operations when the peers are not seen).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_build import NONE_PSN, completes_by, family_change, ranks
from roceview.analysis.ops_set import NEVER
from roceview.analysis.segments import PSN_MOD
from roceview.analysis.tables import NONE_TS
from roceview.arrays import runs


def eligible(tr, an, rows, held_sids: np.ndarray) -> np.ndarray:
    """Mask of the rows whose space qualifies (rows grouped by space)."""
    n = len(rows)
    if not n:
        return np.zeros(0, dtype=bool)
    starts, stops = runs(rows.sid)
    s = rows.sid[starts]
    flow = s >> 1
    never = completes_by(an, flow, rows.idx[starts], np.zeros(len(s), np.int8)) == NEVER
    sp = tr.space
    ok = never & sp.cur_ended[s] & (sp.depth[s] == 0) & oc.ENDS.take(rows.opc[stops - 1])
    if len(held_sids):
        ok &= ~np.isin(s, held_sids)
    resent = np.add.reduceat(rows.retrans.astype(np.int64), starts) > 0
    ok &= ~resent
    return np.repeat(ok, stops - starts)


def operations(tr, rows, take: np.ndarray) -> dict:
    """The final operations (ops_rows.values' fields, `number` to be set) of the qualifying rows
    `take` (positions, grouped by space, capture order, all ahead of their space's highest PSN);
    updates the spaces' newest operation and counters."""
    sid, opc, u, end = rows.sid[take], rows.opc[take], rows.u[take], rows.end[take]
    n = len(take)
    if oc.WHOLE.take(opc).all():                          # every packet a message (ONLY, READ, atomic)
        return _whole(tr, rows, take, sid, opc, u, end)
    first = np.r_[True, sid[1:] != sid[:-1]]
    sp = tr.space
    prev_end = np.empty(n, dtype=np.int64)
    prev_end[1:] = end[:-1]
    prev_end[first] = sp.cur_end[sid[first]]
    ends = oc.ENDS.take(opc)
    prev_ended = np.empty(n, dtype=bool)
    prev_ended[1:] = ends[:-1]
    prev_ended[first] = True
    starts_msg = oc.STARTS.take(opc)
    floating = ~starts_msg & ~prev_ended & family_change(opc, first, np.zeros(int(first.sum()), np.int8))
    is_start = starts_msg | prev_ended | floating
    op_first = np.flatnonzero(is_start)
    op_last = np.r_[op_first[1:], n] - 1
    at_u = starts_msg[op_first] | floating[op_first] | (prev_end[op_first] == NONE_PSN)
    start = np.where(at_u, u[op_first], prev_end[op_first] + 1)
    last_opc = opc[op_last]
    ended = ends[op_last]
    kind = np.where(ended, oc.KIND.take(last_opc), oc.KIND.take(opc[op_first])).astype(np.int64)
    pay = rows.pay[take]
    mtu = np.maximum.reduceat(np.where(oc.FIRST_MIDDLE.take(opc), pay, 0), op_first)
    last = np.where(oc.LAST_OR_ONLY.take(last_opc), pay[op_last], -1)
    top = np.where(ended, end[op_last], np.maximum(u[op_last], start))
    dmalen = _first_reth(rows.dmalen[take], op_first, n)
    nbytes = _bytes(kind, top - start + 1, np.where(mtu > 0, mtu, 0), last, dmalen)
    idx, ts = rows.idx[take], rows.ts[take]
    count = len(op_first)
    g_sid = sid[op_first]
    _advance(sp, sid, first, start, op_first, op_last, end, top, g_sid)
    return {"number": np.zeros(count, np.int64), "flow": g_sid >> 1, "kind": kind,
            "first_psn": start & (PSN_MOD - 1), "packets": np.diff(np.r_[op_first, n]), "bytes": nbytes,
            "first_idx": idx[op_first], "last_idx": idx[op_last], "first_ts": ts[op_first], "last_ts": ts[op_last],
            "compl_idx": np.full(count, -1, np.int64), "compl_ts": np.full(count, NONE_TS, np.int64),
            "retrans": np.zeros(count, bool), "outstanding": np.zeros(count, np.int64)}


def _whole(tr, rows, take, sid, opc, u, end) -> dict:
    """operations() when each packet is a message of its own (the common case: small messages)."""
    n = len(take)
    kind = oc.KIND.take(opc).astype(np.int64)
    pay, dmalen = rows.pay[take], rows.dmalen[take]
    if oc.PAYLOAD_BYTES.take(opc).all():                  # SEND / WRITE ONLY: the payload or RETH length
        nbytes = np.where(dmalen >= 0, dmalen, pay)
    else:
        nbytes = _bytes(kind, end - u + 1, np.zeros(n, np.int64), pay, dmalen)
    idx, ts = rows.idx[take], rows.ts[take]
    first = np.r_[True, sid[1:] != sid[:-1]]
    ones = np.arange(n)
    _advance(tr.space, sid, first, u, ones, ones, end, end, sid)
    return {"number": np.zeros(n, np.int64), "flow": sid >> 1, "kind": kind, "first_psn": u & (PSN_MOD - 1),
            "packets": np.ones(n, np.int64), "bytes": nbytes, "first_idx": idx, "last_idx": idx, "first_ts": ts,
            "last_ts": ts, "compl_idx": np.full(n, -1, np.int64), "compl_ts": np.full(n, NONE_TS, np.int64),
            "retrans": np.zeros(n, bool), "outstanding": np.zeros(n, np.int64)}


def _first_reth(dmalen: np.ndarray, op_first: np.ndarray, n: int) -> np.ndarray:
    """Each operation's first RETH DMA length (-1 without)."""
    has = dmalen >= 0
    if not has.any():
        return np.full(len(op_first), -1, np.int64)
    mark = np.zeros(n, dtype=np.int64)
    mark[op_first] = 1
    op_of = np.cumsum(mark) - 1
    at = np.flatnonzero(has)
    out = np.full(len(op_first), -1, np.int64)
    first = at[np.r_[True, op_of[at][1:] != op_of[at][:-1]]]
    out[op_of[first]] = dmalen[first]
    return out


def _bytes(kind, n_psn, mtu, last, dmalen) -> np.ndarray:
    """As ops_rows.values: the formula, the RETH length, the fixed sizes."""
    last = np.where(last >= 0, last, mtu)
    nbytes = np.where(n_psn > 1, (n_psn - 1) * mtu + last, np.maximum(last, 0))
    written = (kind == oc.OP_CODE["WRITE"]) | (kind == oc.OP_CODE["WRITE_IMM"])
    nbytes = np.where(written & (dmalen >= 0), dmalen, nbytes)
    nbytes = np.where(kind == oc.OP_CODE["READ"], np.maximum(dmalen, 0), nbytes)
    fixed = (kind == oc.OP_CODE["CMP_SWAP"]) | (kind == oc.OP_CODE["FETCH_ADD"]) | (kind == oc.OP_CODE["ATOMIC_WRITE"])
    return np.where(fixed, oc.ATOMIC_BYTES, np.where(kind == oc.OP_CODE["FLUSH"], 0, nbytes))


def _advance(sp, sid, first, start, op_first, op_last, end, top, g_sid) -> None:
    """The spaces' newest operation (ended), their operation counts, the PSNs now final."""
    group_last = np.flatnonzero(np.r_[g_sid[1:] != g_sid[:-1], True])
    s = g_sid[group_last]
    sp.cur_start[s] = start[group_last]
    sp.cur_end[s] = end[op_last[group_last]]
    sp.cur_ended[s] = True
    counts = np.diff(np.r_[-1, group_last])
    sp.n_ops[s] += counts
    sp.evicted_hi[s] = np.maximum(sp.evicted_hi[s], top[group_last])


def whole_chunk(tr, an, ch, part, responses) -> bool:
    """The whole chunk at once when every request packet in it is a message of its own (ONLY, a
    READ or atomic request) ahead of its space's highest PSN, in spaces that qualify (above), and
    no response concerns an operation: a capture of one-way flows of small messages. Few passes,
    no row array unless its rows are still within the table's budget. False: not such a chunk."""
    q = part.is_request_group
    if len(responses[0]) or not q.any() or len(tr.state):
        return False
    sids, starts, lengths = ch.sids[q], ch.starts[q], ch.lengths[q]
    first_idx = ch.idx(ch.sorted_r(starts))
    sp = tr.space
    never = completes_by(an, sids >> 1, first_idx, np.zeros(len(sids), np.int8)) == NEVER
    # a young flow without a peer yet: its operations wait, parked (ops_park.py), as they would
    young = ~never & (an.pairing.peer.take(sids >> 1) < 0)
    if not ((never | young).all() and sp.cur_ended[sids].all() and not sp.depth[sids].any()):
        return False
    if not ch.in_psn_all:                                  # UD SEND ONLY (with immediate) has no PSN space
        rest = ch.opcode.take(ch.sorted_r(slice(ch.n_psn, ch.n)))
        if bool(((rest | 1) == oc.UD_SEND_ONLY_IMM).any()):
            return False
    s = np.arange(ch.n_psn) if q.all() else np.flatnonzero(np.repeat(q, ch.lengths))
    if part.res.retransmitted.take(s).any():
        return False
    r = ch.sorted_r(s)
    opc = ch.opcode.take(r)
    fast = oc.FAST.take(opc)
    if not (fast & oc.F_WHOLE).all():
        return False
    if young.any() and not (fast[np.repeat(young, lengths)] & oc.F_PAYLOAD_BYTES).all():
        return False                                       # a young flow's READ / atomic: the general path
    _whole_chunk(tr, ch, part, s, r, opc, fast, sids, lengths, young)
    return True


def _whole_chunk(tr, ch, part, s, r, opc, fast, sids, lengths, young) -> None:
    """whole_chunk's work: each packet an operation; those of never-completing spaces final now
    (statistics; rows while within the budget), those of young flows parked."""
    n = len(s)
    kind = oc.KIND.take(opc).astype(np.int64)
    pay = ch.values_at("payload_len", r)
    reth = (fast & oc.F_RETH) != 0
    every = np.bitwise_and.reduce(fast)
    if every & oc.F_RETH:                                  # (a READ's or a WRITE ONLY's length)
        dmalen = ch.values_at("reth_dmalen", r, fill=-1)
    else:
        dmalen = np.where(reth, ch.values_at("reth_dmalen", r, fill=-1), -1) if reth.any() else np.full(n, -1, np.int64)
    u, end = part.res.u.take(s), part.res.end.take(s)
    nbytes = np.where(dmalen >= 0, dmalen, pay) if every & oc.F_PAYLOAD_BYTES else \
        _bytes(kind, end - u + 1, np.zeros(n, np.int64), pay, dmalen)
    sp = tr.space
    listed = tr.created < tr.store.max_rows
    idx = ts = number = None
    if listed or young.any():
        idx, ts = ch.idx(r), ch.ts.take(r)
        number = tr.created + ranks(idx)
    final = ~young
    if young.any():
        wait = np.repeat(young, lengths)
        tr.parked.add(_waiting(sp, sids[young], lengths[young], kind[wait], u[wait], end[wait], pay[wait],
                               dmalen[wait], idx[wait], ts[wait], number[wait]))
        take = ~wait
        kind, nbytes, u_f, n_final = kind[take], nbytes[take], u[take], int(take.sum())
        if listed:
            idx, ts, number = idx[take], ts[take], number[take]
    else:
        u_f, n_final = u, n
    if n_final:
        _final_stats(tr, sids[final] >> 1, lengths[final], kind, nbytes)
        if listed:                                      # rows still listed: the table's columns
            tr.depth.q_rows.append({
                "number": number, "flow": np.repeat(sids[final] >> 1, lengths[final]), "kind": kind,
                "first_psn": u_f & (PSN_MOD - 1), "packets": np.ones(n_final, np.int64), "bytes": nbytes,
                "first_idx": idx, "last_idx": idx, "first_ts": ts, "last_ts": ts,
                "compl_idx": np.full(n_final, -1, np.int64), "compl_ts": np.full(n_final, NONE_TS, np.int64),
                "retrans": np.zeros(n_final, bool), "outstanding": np.zeros(n_final, np.int64)})
    last = np.cumsum(lengths) - 1
    sp.cur_start[sids], sp.cur_end[sids], sp.cur_ended[sids] = u[last], end[last], True
    sp.n_ops[sids] += lengths
    sp.evicted_hi[sids[final]] = np.maximum(sp.evicted_hi[sids[final]], end[last[final]])
    tr.created += n


def _final_stats(tr, flows, lengths, kind, nbytes) -> None:
    starts = np.cumsum(lengths) - lengths
    if (kind == np.repeat(kind[starts], lengths)).all():
        tr.stats.add_grouped(flows, starts, kind, nbytes)
    else:
        n = len(kind)
        tr.stats.add(np.repeat(flows, lengths), kind, nbytes, np.zeros(n, bool), np.full(n, -1, np.int64))


def _waiting(sp, sids, lengths, kind, u, end, pay, dmalen, idx, ts, number):
    """A young flow's operations as they wait (ops_park.py): sent in full, no completion yet."""
    from roceview.analysis.ops_set import OpSet, op_key

    n = len(kind)
    ops = OpSet.empty(n)
    c = ops.cols
    sid = np.repeat(sids, lengths)
    c["sid"], c["start"], c["key"], c["end"] = sid, u, op_key(sid, u), end
    c["k"] = np.repeat(sp.n_ops[sids], lengths) + np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    c["kind"] = kind.astype(np.int8)
    c["first_idx"], c["first_ts"], c["last_idx"], c["last_ts"] = idx, ts, idx, ts
    c["last_pay"], c["dmalen"], c["number"], c["hi_u"] = pay, dmalen, number, u
    c["ended"][:], c["by"][:], c["packets"][:] = True, oc.BY_ANY, 1
    return ops
