"""Operations: one row per RDMA message seen on the wire (`ops.csv`), streamed in one pass.

Per chunk (after the PSN step, psn.py, and the responses, chunk_psn.responses): the request
packets become operations (ops_build.py), the responses complete them (ops_match.py), the READ
depth moves (ops_depth.py); operations that can change no more are final (ops_rows.py): their row
is kept when it is one of the capture's first MAX_ROWS, and they count in the per-QP statistics
(ops_stats.py). What is carried between chunks is bounded:
  - the operations still open: at most PENDING_PER_SPACE newer operations of their space since
    (an operation whose space started that many newer ones is final: its completion, if any,
    was not captured), and a completed one at most LINGER_NS (ops_match.py) after its completion;
  - per PSN space a few numbers (its newest operation, its READ depth).
Every rule is decided per packet, so the result does not depend on the chunking (only an
operation's eviction does, and nothing that could still change it is evicted).
UD SEND ONLY packets are operations of one packet each; nothing completes them, as on UC.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_build as ob
from roceview.analysis import ops_classes as oc
from roceview.analysis import ops_depth, ops_direct, ops_fast, ops_rows
from roceview.analysis.ops_build import NONE_PSN, Rows, fresh_ops
from roceview.analysis.ops_complete import Completion
from roceview.analysis.ops_match import LINGER_NS, Responses
from roceview.analysis.ops_park import Parked
from roceview.analysis.ops_set import INF, NEVER, OpSet, op_key
from roceview.analysis.ops_stats import OpStats
from roceview.analysis.state import Columns

PENDING_PER_SPACE = 1024       # an operation is final once its space started this many newer ones
SPACE_STATE = {"n_ops": (np.int64, 0), "cur_start": (np.int64, NONE_PSN), "cur_end": (np.int64, NONE_PSN),
               "cur_ended": (bool, True), "cur_family": (np.int8, 0), "evicted_hi": (np.int64, NONE_PSN),
               "depth": (np.int64, 0),
               "depth_ts": (np.int64, 0)}


class OpTracker:
    def __init__(self, max_rows: int = ops_rows.MAX_ROWS):
        self.state = OpSet.empty()
        self.parked = Parked()      # open operations nothing can change for now (ops_park.py)
        self.space = Columns(SPACE_STATE)
        self.store = ops_rows.RowStore(max_rows)
        self.stats = OpStats()
        self.depth = ops_depth.DepthSweep()
        self.created = 0            # operations so far (their numbers: the row budget)
        self.late = 0               # request packets after their operation was final
        self.unmatched = 0          # request packets no operation holds

    def grow(self, n_flows: int) -> None:
        self.space.grow(2 * n_flows)

    # ---- one chunk ---------------------------------------------------------------------------
    def feed(self, an, ch, part, responses) -> None:
        if ops_fast.whole_chunk(self, an, ch, part, responses):     # one-way small messages: at once
            self._chunk_end(an)
            return
        rows = Rows(ch, part)
        self.unmatched += rows.unknown
        resp = Responses(ch, part, responses)
        ud = ob.ud_rows(ch)
        if not len(rows) and not len(resp) and not len(ud):
            return
        back = np.r_[rows.sid[rows.retrans], resp.sid]        # something may change parked operations there
        if len(back) and len(self.parked):
            self.state = OpSet.concat([self.state, self.parked.take_back(back)]).sorted()
        fast = ops_fast.eligible(self, an, rows, self.state.cols["sid"])
        extra = []                      # (first rows, what to do with their numbers) of operations made apart
        if fast.any():                  # spaces nothing completes: their operations at once
            quick = ops_fast.operations(self, rows, np.flatnonzero(fast))
            extra.append((quick["first_idx"], lambda number, v=quick: self._numbered(v, number)))
            rows = rows.subset(~fast)
        direct = ops_direct.eligible(self, an, rows, self.state)
        carried = None
        if direct.any():                # paired spaces of small messages without loss: at once
            values, carried, first_final, first_carried = ops_direct.operations(
                self, rows, np.flatnonzero(direct), resp, int(ch.ts.max()), PENDING_PER_SPACE)
            extra.append((first_final, lambda number, v=values: self._numbered(v, number)))
            extra.append((first_carried, lambda number, c=carried.cols: c["number"].__setitem__(slice(None), number)))
            rows = rows.subset(~direct)
        if not len(rows) and not len(resp) and carried is None:
            self._number(OpSet.empty(), np.zeros(0, bool), ch, ud, extra)
            self._chunk_end(an)
            return
        new, f, row_op = fresh_ops(self, rows, an)
        ops, where_new = ob.merge(self.state, new)
        fresh_new = np.zeros(len(ops), dtype=bool)
        fresh_new[where_new] = True
        self._place_fresh(ops, rows, f, row_op, where_new)
        self._ends(ops, rows)                              # the fresh packets' (resends need them)
        ops, fresh_new = self._place_resends(ops, rows, fresh_new, an)
        self._ends(ops, rows)
        self._number(ops, fresh_new, ch, ud, extra)
        sends = self._sends(ops, rows)
        done = Completion(ops, fresh_new, sends, resp, ob.resent(ops, rows))
        done.run()
        counted = self._counted(ops, rows, done.close)
        ob.aggregate(ops, rows, counted)
        ops.keep_ranges()
        final = self._final(ops, ch)
        self._newest(ops, rows.sid)
        self._finalize(ops.take(final), an)
        self.state = self.parked.park(ops.take(~final), an.pairing.peer)
        if carried is not None and len(carried):
            self.state = OpSet.concat([self.state, carried]).sorted()
        self._chunk_end(an)

    def _chunk_end(self, an) -> None:
        """Parked operations given up, rows whose READ depth is settled stored."""
        self._finalize(self.parked.expired(self.space.n_ops, PENDING_PER_SPACE), an)
        self._store(OpSet.concat([self.state, self.parked.ops]))

    def _place_fresh(self, ops, rows, f, row_op, where_new) -> None:
        if not len(f):
            return
        op = where_new[np.maximum(row_op, 0)] if len(where_new) else np.zeros(len(f), np.int64)
        op = np.where(row_op >= 0, op, -1)
        carried = np.flatnonzero(row_op < 0)
        if len(carried):
            sid = rows.sid[f[carried]]
            op[carried] = ob.find(ops, sid, self.space.cur_start[sid])
        rows.op[f] = op

    def _place_resends(self, ops, rows, fresh_new, an):
        t = np.flatnonzero(rows.retrans)
        if not len(t):
            return ops, fresh_new
        sid, u = rows.sid[t], rows.u[t]
        pos = ob.containing(ops, sid, u)
        starts = oc.STARTS.take(rows.opc[t]) & (u > self.space.evicted_hi[sid])
        if starts.any() and ops.cols["floating"].any():        # a floating operation's first packet, resent
            if ob.move_floating(ops, sid[starts], u[starts], pos[starts]).any():
                pos = ob.containing(ops, sid, u)
        gap = starts & ~ob.inside_message(ops, u, pos)
        if gap.any():                           # a FIRST/ONLY resent into a hole, or past a message's end
            ops, fresh_new = self._insert(ops, rows, t[gap], fresh_new, an)
            pos = ob.containing(ops, sid, u)
        rows.op[t] = pos
        return ops, fresh_new

    def _insert(self, ops, rows, at, fresh_new, an):
        key = op_key(rows.sid[at], rows.u[at])
        order = np.lexsort((rows.idx[at], key))            # one operation per PSN: its first resend
        at = at[order][np.r_[True, key[order][1:] != key[order][:-1]]]
        add = OpSet.empty(len(at))
        c = add.cols
        c["sid"], c["start"], c["key"] = rows.sid[at], rows.u[at], op_key(rows.sid[at], rows.u[at])
        c["kind"] = oc.KIND.take(rows.opc[at])
        c["by"] = ob.completes_by(an, c["sid"] >> 1, rows.idx[at], c["kind"])
        c["first_idx"], c["first_ts"] = rows.idx[at], rows.ts[at]
        c["last_idx"], c["last_ts"] = rows.idx[at], rows.ts[at]
        c["dmalen"] = rows.dmalen[at]
        merged, where_add = ob.merge(ops, add)
        moved = np.ones(len(merged), dtype=bool)
        moved[where_add] = False
        old_pos = np.flatnonzero(moved)                     # old op i is now at old_pos[i]
        rows.op = np.where(rows.op >= 0, old_pos[np.maximum(rows.op, 0)], -1)
        new_mask = np.zeros(len(merged), dtype=bool)
        new_mask[old_pos[fresh_new]] = True
        new_mask[where_add] = True
        return merged, new_mask

    @staticmethod
    def _ends(ops, rows) -> None:
        """An END packet (LAST, ONLY, a READ or atomic request) gives its operation's last PSN
        and kind (SEND LAST with immediate: a SEND_IMM)."""
        m = np.flatnonzero((rows.op >= 0) & oc.ENDS.take(rows.opc))
        if not len(m):
            return
        o, c = rows.op[m], ops.cols
        unset = ~c["ended"][o]
        c["end"][o[unset]] = rows.end[m[unset]]
        c["ended"][o] = True
        c["kind"][o] = oc.KIND.take(rows.opc[m])

    def _number(self, ops, new, ch, ud, extra) -> None:
        """Ordinals in each space (creation order), the expiry of operations PENDING_PER_SPACE
        behind, capture-wide numbers (the row budget: in order of first packet) of the new
        operations, UD's (final at once) and those made apart (`extra`: first rows, a callback
        given their numbers)."""
        c, sp = ops.cols, self.space
        q = np.flatnonzero(new)
        if len(q):
            sid_q, first_q = c["sid"][q], c["first_idx"][q]
            in_order = bool(((sid_q[1:] > sid_q[:-1]) | ((sid_q[1:] == sid_q[:-1]) & (first_q[1:] > first_q[:-1]))).all())
            order = q if in_order else q[np.lexsort((first_q, sid_q))]
            sid = c["sid"][order]
            first = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
            rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
            c["k"][order] = sp.n_ops[sid] + rank
            np.add.at(sp.n_ops, sid[first], np.diff(np.r_[first, len(order)]))
            self._expiry(ops, order)
        parts = [c["first_idx"][q], ud[1] if len(ud[0]) else np.zeros(0, np.int64)] + [x for x, _ in extra]
        bounds = np.cumsum([0] + [len(x) for x in parts])
        if self.created >= self.store.max_rows:     # none listed: a number past the budget is all they need
            rank = np.full(int(bounds[-1]), self.created, np.int64)
        else:
            rank = ob.ranks(np.concatenate(parts)) + self.created
        c["number"][q] = rank[:bounds[1]]
        if len(ud[0]):
            self._ud(ch, ud, rank[bounds[1]:bounds[2]])
        for (_, give), lo, hi in zip(extra, bounds[2:-1], bounds[3:]):
            give(rank[lo:hi])
        self.created += int(bounds[-1])

    def _numbered(self, values: dict, number: np.ndarray) -> None:
        """Final operations made apart (ops_fast, ops_direct), numbered: into the statistics."""
        values["number"] = number
        self._account(values, grouped=not (values["compl_idx"] >= 0).any())

    def _expiry(self, ops, order) -> None:
        """An operation expires at the creation of its space's operation PENDING_PER_SPACE + 1
        ordinals later: events from that row on no longer change it."""
        c = ops.cols
        sid_all = c["sid"]
        limit = self.space.n_ops[sid_all]
        target = c["k"] + PENDING_PER_SPACE + 1
        due = np.flatnonzero(target < limit)
        if not len(due):
            return
        new_key = (c["sid"][order] << 32) + c["k"][order]     # new ops sorted by (sid, k)
        at = np.searchsorted(new_key, (sid_all[due] << 32) + target[due])
        at = np.minimum(at, len(order) - 1)
        hit = new_key[at] == (sid_all[due] << 32) + target[due]
        c["expire"][due[hit]] = c["first_idx"][order[at[hit]]]
        c["expire_ts"][due[hit]] = c["first_ts"][order[at[hit]]]
        c["expire"][due[~hit]] = -1                          # expired before this chunk

    def _sends(self, ops, rows):
        c = ops.cols
        ok = rows.op >= 0
        if len(ops):
            o = np.maximum(rows.op, 0)
            ok &= rows.idx < c["expire"][o]
            # nothing resends on UC, nor is awaited (the packet that made an operation is its own)
            ok &= ~((c["by"][o] == NEVER) & rows.retrans & (rows.idx != c["first_idx"][o]))
        m = np.flatnonzero(ok)
        order = m[np.lexsort((rows.idx[m], rows.op[m]))]
        self.late += int(np.count_nonzero(~ok & (rows.op >= 0)))
        none = rows.op < 0
        if none.any():              # PSNs of operations already final: late; else no operation has them
            gone = rows.u[none] <= self.space.evicted_hi[rows.sid[none]]
            self.late += int(np.count_nonzero(gone))
            self.unmatched += int(np.count_nonzero(~gone))
        self._send_rows = order
        return rows.op[order], rows.idx[order], rows.ts[order]

    def _counted(self, ops, rows, close) -> np.ndarray:
        order = self._send_rows
        keep = rows.idx[order] < close[rows.op[order]]
        self.late += int(np.count_nonzero(~keep))
        return order[keep]

    def _final(self, ops, ch) -> np.ndarray:
        """Operations nothing can change any more: closed, expired, completed LINGER_NS before
        the chunk's last packet, or sent in full when nothing completes them."""
        c, sp = ops.cols, self.space
        final = c["closed"] | (c["k"] + PENDING_PER_SPACE + 1 < sp.n_ops[c["sid"]]) | (c["expire"] < INF)
        now = int(ch.ts.max()) if ch.n else 0
        final |= (c["compl_idx"] >= 0) & (c["compl_ts"] + LINGER_NS < now)
        end_eff, _ = ops.ends()
        final |= (c["by"] == NEVER) & (end_eff < INF)
        return final

    def _newest(self, ops, touched: np.ndarray) -> None:
        """The newest operation of each space with packets here (the next packet ahead of the
        space's highest PSN continues it or follows it)."""
        if not len(touched) or not len(ops):
            return
        c, sp = ops.cols, self.space
        sid = c["sid"]
        last = np.flatnonzero(np.r_[sid[1:] != sid[:-1], True] & np.isin(sid, touched))
        s = sid[last]
        sp.cur_start[s] = c["start"][last]
        sp.cur_ended[s] = c["ended"][last]
        sp.cur_family[s] = oc.KIND_FAMILY.take(c["kind"][last])
        sp.cur_end[s] = np.where(c["ended"][last], c["end"][last], NONE_PSN)

    def _finalize(self, ops, an) -> None:
        if not len(ops):
            return
        c, sp = ops.cols, self.space
        end_eff, _ = ops.ends()
        top = np.where(end_eff < INF, end_eff, np.maximum(c["hi_u"], c["start"]))
        ob.max_into(sp.evicted_hi, c["sid"], top)            # (final operations: sorted by space)
        v = ops_rows.values(ops, ob.fallback_mtu(an, c["sid"] >> 1))
        self._account(v)
        self.depth.add(ops)

    def _account(self, v: dict, grouped: bool = False) -> None:
        """Final operations into the statistics; their rows wait for their `outstanding`.
        `grouped`: ops_fast's, without completion or resend, grouped by flow."""
        flow, kind = v["flow"], v["kind"]
        starts = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]]) if grouped and len(flow) else None
        if starts is not None and (kind == np.repeat(kind[starts], np.diff(np.r_[starts, len(kind)]))).all():
            self.stats.add_grouped(flow[starts], starts, kind, v["bytes"])
        else:
            latency = np.where(v["compl_idx"] >= 0, v["compl_ts"] - v["first_ts"], -1)
            self.stats.add(flow, kind, v["bytes"], v["retrans"], latency)
        keep = v["number"] < self.store.max_rows
        if keep.any():
            self.depth.q_rows.append({k: x[keep] for k, x in v.items()})

    def _store(self, open_ops: OpSet) -> None:
        for rows in self.depth.sweep(self, open_ops):
            self.store.add(rows)

    def _ud(self, ch, ud, number) -> None:
        r, idx, flow = ud
        n = len(r)
        v = {"number": number, "flow": flow, "kind": oc.ud_kind(ch.opcode.take(r)).astype(np.int64),
             "first_psn": ch.psn_at(r), "packets": np.ones(n, np.int64), "bytes": ch.values_at("payload_len", r),
             "first_idx": idx, "last_idx": idx, "first_ts": ch.ts.take(r), "last_ts": ch.ts.take(r),
             "compl_idx": np.full(n, -1, np.int64), "compl_ts": np.full(n, ops_rows.NONE_TS, np.int64),
             "retrans": np.zeros(n, bool), "outstanding": np.zeros(n, np.int64)}
        self._account(v)

    # ---- the end -----------------------------------------------------------------------------
    def finish(self, an) -> None:
        """Every operation still open is final (its completion, if any, was not captured)."""
        self._finalize(OpSet.concat([self.state, self.parked.ops]).sorted(), an)
        self.state, self.parked = OpSet.empty(), Parked()
        self._store(OpSet.empty())

    def forget(self, flows: np.ndarray) -> None:
        """Withdrawn pairings (rtt.forget's flows): their operations' completions go."""
        if not len(flows):
            return
        gone = np.isin(self.state.cols["sid"] >> 1, flows)
        self.state.cols["compl_idx"][gone] = -1               # (parked operations have none)
        self.store.forget(flows)
        for part in self.depth.q_rows:
            ops_rows.forget_part(part, flows)
        self.stats.forget(flows)

    def rows(self, an, snapshot: bool = False) -> dict:
        """The kept rows (with the open operations' rows as they stand, for a snapshot)."""
        extra = list(self.depth.q_rows) if snapshot else []     # their `outstanding` not settled yet
        held = OpSet.concat([self.state, self.parked.ops])
        if snapshot and len(held):
            v = ops_rows.values(held, ob.fallback_mtu(an, held.cols["sid"] >> 1))
            keep = held.cols["number"] < self.store.max_rows
            extra.append({k: x[keep] for k, x in v.items()})
        return self.store.rows(extra)

    def summary(self) -> dict:
        listed = min(self.created, self.store.max_rows)
        return {"count": self.created, "listed": listed, "not_listed": self.created - listed,
                "late_packets": self.late, "unmatched_packets": self.unmatched}
