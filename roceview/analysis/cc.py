"""DCQCN reaction per sender QP, from the wire: each CNP a sender received, whether and how fast
its rate limiter cut the rate, how deep, how long it took to recover (cc.csv; per flow columns
for qps.csv).

Fed the capture's batches in order (`feed`), like the Analyzer's collectors: wired into it, with
its registry and flow ids (`CnpReactions(registry=an.registry)`, `feed(batch, an.flow_ids(batch))`:
no second flow index, a mirror's second copy of a frame left out); alone, with an index of its
own. Memory is bounded by flows (a few samples carried per flow, cc_rate.py) and by `max_rows`
CNP rows (later CNPs are counted, their spacing too, but not judged). Chunks of single-packet
messages only update each flow's last packet (no samples: no sort). A chunk's CNPs, samples and
cuts are worked in numpy, per flow, never per CNP or per cut (tests/analysis/test_cc_work.py).
The rate of a sender's data flow is read from the spacing of its packets (cc_rate.py). A CNP
(BTH opcode 0x81) goes from the receiver to the sender's QP (its dest QP); the sender's data
flow is the CNP flow's peer, which the pairing knows only at the end: each CNP is followed on
every data flow from its destination to its source that sent data before it (usually one) and
the peer is chosen by `table(peers)` (without peers: the only such flow).

Judging a CNP, in capture order per data flow (cc_match.py):
  - covered: it came less than `rate_reduce_period_ns` after a CNP that cut the rate (mlx5
    roce_rp `rate_reduce_monitor_period`, 4 us by default: one cut per period): no cut of its own
    is expected, it is not ignored;
  - else it takes the first cut not yet taken that comes after it, within `judge_ns`: several
    CNPs before one visible cut give the cut to the first (unless the cut lies nearer the next
    CNP's typical reaction: cc_match._plan). Reaction = the cut's time - the CNP's;
    rate before and after, depth, recovery from the cut;
  - no cut within judge_ns: ignored when the sender had an envelope before the CNP (it was at
    its limiter's rate, not below it) and kept sending in messages over the window (>= MIN_AFTER
    samples, the last after 90 % of it); otherwise not judged (blank): it stopped, or its rate
    said nothing about its limiter.
CNP spacing: the time from the previous CNP to the same QP; closer than
`min_time_between_cnps_ns` (mlx5 roce_np `min_time_between_cnps`, 4 us) is excess.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import cc_rate as rate_mod
from roceview.analysis.cc_ce import CeAnswers
from roceview.analysis.cc_match import CnpRows, first_in_segments, groups, judge_all, pairs
from roceview.analysis.flows import address_words, new_registry
from roceview.analysis.opcode_classes import FIRST_OR_MIDDLE, OPCLASS, OPCODE_CNP, READ_RESPONSE, REQUEST
from roceview.analysis.segments import group_bounds
from roceview.packets.batch import PROTO_CODE

MAX_ROWS = 100_000          # CNP rows judged and listed; later ones are counted only
MIN_TIME_BETWEEN_CNPS_NS = 4_000
RATE_REDUCE_PERIOD_NS = 4_000
JUDGE_NS = 100_000          # a cut later than this after its CNP is not attributed to it
MAX_CANDIDATES = 64         # data flows followed per CNP (QPs between one pair of hosts)
_CARRY = 2 * rate_mod.K + 2  # samples kept per flow between chunks

_IS_DATA = np.zeros(256, dtype=bool)     # the sender's data: requests and READ responses
_IS_DATA[(OPCLASS == REQUEST) | (OPCLASS == READ_RESPONSE)] = True
_CONTINUES = np.zeros(256, dtype=bool)   # MIDDLE / LAST: the gap before it is inside a message
for _base in (0x00, 0x20, 0x40, 0xA0):
    for _low in (0x01, 0x02, 0x03, 0x07, 0x08, 0x09, 0x0E, 0x0F):
        _CONTINUES[_base | _low] = _IS_DATA[_base | _low]
_ROCE = np.zeros(256, dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True
_KEEP = _IS_DATA.copy()                  # the rows this collector reads: data and CNPs
_KEEP[OPCODE_CNP] = True
_IN_MESSAGE = _CONTINUES | FIRST_OR_MIDDLE   # opcodes of multi-packet messages
_SAMPLE_COLS = ("flow", "seq", "ts_prev", "ts", "frame_prev", "rate", "ts_prev2", "frame_prev2", "rate_b", "decided",
                "frame", "ts_prev3")
_PACKET = ("ts", "bits", "frame", "op")   # per flow: its last data packet ("p" + : the one before)


class CnpReactions:
    def __init__(self, min_time_between_cnps_ns: int = MIN_TIME_BETWEEN_CNPS_NS,
                 rate_reduce_period_ns: int = RATE_REDUCE_PERIOD_NS, judge_ns: int = JUDGE_NS,
                 max_rows: int = MAX_ROWS, registry=None):
        """registry: the Analyzer's flow registry, when `feed` is given its flow ids (then the
        flows are named as qps.csv names them and no second index is kept); else an own one."""
        self.min_cnp_ns, self.period_ns, self.judge_ns = min_time_between_cnps_ns, rate_reduce_period_ns, judge_ns
        self.shared = registry is not None
        self.registry = registry if registry is not None else new_registry()
        self.flow_state = {k: np.zeros(0, dtype=np.int64) for k in _PACKET + tuple("p" + k for k in _PACKET) + ("seq", "ppts")}
        self.last_env = np.zeros(0)                  # envelope at each flow's newest sample (NaN: none)
        self.endpoints: list[tuple] = []             # per flow: (src words, dst words)
        self.has_endpoints = np.zeros(0, dtype=bool)
        self.senders: dict[tuple, list[int]] = {}    # (src, dst) -> data flows from src to dst
        self.first_data = np.zeros(0, dtype=np.int64)   # per sender: the capture row of its first data
        self.seen = self._base = 0                   # rows fed, before this batch: capture rows
        self.carry = {k: np.zeros(0, dtype=np.float64 if k.startswith("rate") else bool if k == "decided"
                                   else np.int64) for k in _SAMPLE_COLS}
        self.cuts: list[tuple] = []                  # per chunk: flow, seq, ts, frame, before, after, lowest
        self.recovery: dict[int, float] = {}         # cut number -> recovery ns
        self.open_cut: dict = {}                     # flow -> its newest cut: (number, seq, ts, target)
        self.cnp = CnpRows(max_rows)
        self.ce = CeAnswers(min_time_between_cnps_ns)    # CE received without a CNP, per data flow
        self.pair_data = self.pair_cnp = np.zeros(0, dtype=np.int64)   # per flow: host pair numbers
        self.cnp_last = np.zeros(0, dtype=np.int64)  # per CNP flow: its previous CNP's ts (-1: none)
        self.n_cuts = 0
        self._fresh: dict = {}                       # this chunk's new samples: flow -> their ts
        empty = np.zeros(0, dtype=np.int64)
        self._slices = (empty, empty, empty, empty, np.zeros(0))   # this chunk's samples by flow

    # ---- input -------------------------------------------------------------------------------
    def feed(self, batch, flows: np.ndarray | None = None) -> None:
        """One batch of the capture, in order. flows: the Analyzer's flow id of each RoCE row
        with an opcode and a dest QP (Analyzer.flow_ids; -1: a second capture of a frame, left
        out), required with a shared registry; without, this class looks the flows up itself."""
        self._base, self.seen = self.seen, self.seen + batch.n
        if batch.n == 0 or "dest_qp" not in batch.cols:
            return
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        if name not in batch.cols:
            return
        if self.shared and flows is None:
            raise ValueError("CnpReactions.feed: a shared registry needs the Analyzer's flow ids")
        roce = _ROCE.take(batch.cols["_proto"])     # take: far cheaper than indexing by uint8
        for valid in (batch.valid.get(name), batch.valid.get("dest_qp")):
            if valid is not None:
                roce &= valid
        keep = roce & _KEEP.take(batch.cols[name])
        if flows is not None:                       # the Analyzer's ids are per RoCE row
            flows = flows if len(flows) == batch.n and keep.all() else flows[keep[roce]]
            known = flows >= 0
            if not known.all():                     # a mirror's second copies: left out
                keep[keep] = known
                flows = flows[known]
        rows = None if keep.all() else np.flatnonzero(keep)
        if rows is not None and not len(rows):
            return
        opcode = batch.cols[name] if rows is None else batch.cols[name].take(rows)
        fid = self._flow_ids(batch, rows) if flows is None else self._known(batch, rows, flows)
        data = _IS_DATA.take(opcode)
        self._ce_answers(batch, rows, fid, data)
        if data.all():
            self._data(batch, rows, fid, opcode)
            return
        at = np.flatnonzero(data) if rows is None else rows[data]
        if len(at):
            self._data(batch, at, fid[data], opcode[data])
        cnp = ~data
        self._cnps(batch, np.flatnonzero(cnp) if rows is None else rows[cnp], fid[cnp])

    def _ce_answers(self, batch, rows, fid, data) -> None:
        """CE-marked data packets and CNPs of the chunk to CeAnswers (cc_ce.py)."""
        ecn = batch.cols.get("ecn")
        ce = data & ((ecn if rows is None else ecn.take(rows)) == 3) if ecn is not None else np.zeros(len(fid), dtype=bool)
        if ecn is not None and "ecn" in batch.valid:
            ce &= batch.valid["ecn"] if rows is None else batch.valid["ecn"].take(rows)
        cnp = ~data
        if not (ce.any() or cnp.any() or len(self.ce.pending[0])):
            return                                  # the timestamps only when something needs them
        ts = batch.cols["ts_ns"] if rows is None else batch.cols["ts_ns"].take(rows)
        self.ce.grow(len(self.last_env))
        self.ce.feed(fid[ce], self.pair_data[fid[ce]], ts[ce].astype(np.int64), self.pair_cnp[fid[cnp]],
                     ts[cnp].astype(np.int64), int(ts.max()))

    def _known(self, batch, rows, fid: np.ndarray) -> np.ndarray:
        """The Analyzer's flow ids: grow the per-flow state, note the endpoints of new flows."""
        n = int(fid.max()) + 1 if len(fid) else 0
        if n > len(self.last_env):
            self._grow(n)
        if not self.has_endpoints[fid].all():
            self._endpoints(batch, rows, fid)
        return fid

    def _endpoints(self, batch, rows, fid) -> None:
        """Each new flow's (source, destination) address words, from its first row."""
        new = np.flatnonzero(~self.has_endpoints[fid])
        first = new[np.unique(fid[new], return_index=True)[1]]
        at = first if rows is None else rows[first]
        src, dst = address_words(batch, at, "src"), address_words(batch, at, "dst")
        for f, s, d in zip(fid[first].tolist(), src.tolist(), dst.tolist()):
            self.endpoints[f] = (tuple(s), tuple(d))
        self.has_endpoints[fid[first]] = True
        for f in fid[first].tolist():                  # host pairs, both ways (CE out, CNP back)
            src, dst = self.endpoints[f]
            self.pair_data[f], self.pair_cnp[f] = self.ce.pair(src, dst), self.ce.pair(dst, src)

    def _flow_ids(self, batch, rows) -> np.ndarray:
        src, dst = address_words(batch, rows, "src"), address_words(batch, rows, "dst")
        qp = batch.cols["dest_qp"]
        qp = (qp if rows is None else qp.take(rows)).astype(np.uint32, copy=False)
        fid, before = self.registry.lookup(src, dst, qp)
        if self.registry.n > len(self.last_env):
            self._grow(self.registry.n)
            self._endpoints(batch, rows, fid)
        return fid

    def _grow(self, n: int) -> None:
        add = n - len(self.last_env)
        for k, v in self.flow_state.items():
            self.flow_state[k] = np.concatenate([v, np.full(add, -1 if k != "seq" else 0, dtype=np.int64)])
        self.last_env = np.concatenate([self.last_env, np.full(add, np.nan)])
        self.cnp_last = np.concatenate([self.cnp_last, np.full(add, -1, dtype=np.int64)])
        self.endpoints += [None] * add
        self.has_endpoints = np.concatenate([self.has_endpoints, np.zeros(add, dtype=bool)])
        self.first_data = np.concatenate([self.first_data, np.full(add, -1, dtype=np.int64)])
        self.pair_data = np.concatenate([self.pair_data, np.zeros(add, dtype=np.int64)])
        self.pair_cnp = np.concatenate([self.pair_cnp, np.zeros(add, dtype=np.int64)])

    # ---- the senders' rate -------------------------------------------------------------------
    def _data(self, batch, rows, fid, opcode) -> None:
        def col(name):
            v = batch.cols[name]
            return (v if rows is None else v.take(rows)).astype(np.int64, copy=False)

        cur = {"ts": col("ts_ns"), "bits": (col("wire_len") + rate_mod.WIRE_OVERHEAD) * 8, "frame": col("frame"),
               "op": opcode.astype(np.int64)}
        self._new_senders(fid, rows)
        if not _IN_MESSAGE.take(opcode).any():       # single-packet messages only: no sample, state only
            self._state_only(fid, cur)
            return
        order = np.argsort(fid.astype(np.int32) if len(self.last_env) < 1 << 31 else fid, kind="stable")
        cur = {k: v.take(order) for k, v in cur.items()}
        fid = cur["fid"] = fid.take(order)
        starts, _, _ = group_bounds(fid)
        st = self.flow_state
        prev = {k: _previous(cur[k], starts, st[k][fid[starts]]) for k in _PACKET}
        prev2 = {k: _previous(prev[k], starts, st["p" + k][fid[starts]]) for k in ("ts", "bits", "frame")}
        prev3_ts = _previous(prev2["ts"], starts, st["ppts"][fid[starts]])
        ends = np.append(starts[1:], len(fid)) - 1
        st["ppts"][fid[ends]] = prev2["ts"][ends]
        for k in _PACKET:
            st["p" + k][fid[ends]] = prev[k][ends]
            st[k][fid[ends]] = cur[k][ends]
        take = _CONTINUES.take(cur["op"]) & (prev["ts"] >= 0) & (cur["ts"] > prev["ts"])
        if take.any():
            gap = cur["ts"][take] - prev["ts"][take]
            # the gap before the previous packet, when it began a message: a cut may land there
            boundary = ~_CONTINUES.take(prev["op"][take]) & (prev2["ts"][take] >= 0)
            b_gap = np.where(boundary, prev["ts"][take] - prev2["ts"][take], 0)
            b_rate = np.where(boundary & (b_gap > 0), prev2["bits"][take] / np.maximum(b_gap, 1), np.nan)
            self._samples({"flow": fid[take], "ts_prev": prev["ts"][take], "ts": cur["ts"][take],
                           "frame_prev": prev["frame"][take], "rate": prev["bits"][take] / gap,
                           "ts_prev2": prev2["ts"][take], "frame_prev2": prev2["frame"][take], "rate_b": b_rate,
                           "frame": cur["frame"][take], "ts_prev3": prev3_ts[take]})

    def _new_senders(self, fid: np.ndarray, rows) -> None:
        """Flows sending their first data packet are senders: listed by (source, destination),
        with the capture row of that packet (a CNP before it cannot be for it)."""
        new = self.flow_state["ts"].take(fid) < 0
        if new.any():
            flows, first = np.unique(fid[new], return_index=True)
            at = np.flatnonzero(new)[first]
            self.first_data[flows] = self._base + (at if rows is None else rows[at])
            for f in flows.tolist():
                self.senders.setdefault(self.endpoints[f], []).append(f)

    def _state_only(self, fid: np.ndarray, cur: dict) -> None:
        """Each flow's last data packet and the one before it (and that one's ts), from a chunk without samples."""
        n = len(self.last_env)
        last = np.full(n, -1, dtype=np.int64)
        np.maximum.at(last, fid, np.arange(len(fid)))
        flows = np.flatnonzero(last >= 0)
        rest = np.ones(len(fid), dtype=bool)
        rest[last[flows]] = False
        before = np.full(n, -1, dtype=np.int64)
        np.maximum.at(before, fid[rest], np.flatnonzero(rest))
        st, p = self.flow_state, before[flows]
        rest[p[p >= 0]] = False
        third = np.full(n, -1, dtype=np.int64)
        np.maximum.at(third, fid[rest], np.flatnonzero(rest))
        t3 = third[flows]
        st["ppts"][flows] = np.where(p < 0, st["pts"][flows],
                                     np.where(t3 >= 0, cur["ts"][np.maximum(t3, 0)], st["ts"][flows]))
        for k in _PACKET:
            st["p" + k][flows] = np.where(p >= 0, cur[k][np.maximum(p, 0)], st[k][flows])
            st[k][flows] = cur[k][last[flows]]

    def _samples(self, new: dict) -> None:
        """New samples (grouped by flow, capture order within) after the carried ones."""
        new["seq"] = _running_count(new["flow"], self.flow_state["seq"])
        new["decided"] = np.zeros(len(new["flow"]), dtype=bool)
        old = self.carry["flow"]
        # both are grouped by flow: merge, each flow's carried samples first (they are older)
        pos = np.searchsorted(old, new["flow"], side="right") + np.arange(len(new["flow"]))
        fresh = np.zeros(len(old) + len(pos), dtype=bool)
        fresh[pos] = True
        s = {}
        for k in _SAMPLE_COLS:
            merged = np.empty(len(fresh), dtype=np.result_type(self.carry[k], new[k]))
            merged[pos], merged[~fresh] = new[k], self.carry[k]
            s[k] = merged
        self._decide(s, final=False)
        self._fresh = _by_flow(new["flow"], new["ts"])
        self.cnp.count(self._fresh, self.judge_ns)
        self.cnp.close(int(new["ts"].max()), self.judge_ns)

    def _decide(self, s: dict, final: bool) -> None:
        """Envelopes and cuts of the samples whose forward window is complete (all at the end)."""
        if not len(s["flow"]):
            return
        same = np.zeros(len(s["flow"]), dtype=bool)
        same[1:] = s["flow"][1:] == s["flow"][:-1]
        back, fwd, full = rate_mod.envelopes(s["rate"], same, final)
        ready = (full | final) & ~s["decided"]
        first, before, after = rate_mod.cut_marks(s["rate"], same, back, fwd)
        at = np.flatnonzero(first & ready)
        # which packet times the cut and which is the last the old rate paced (cc_rate.cut_kinds)
        early, stall, late = rate_mod.cut_kinds(s["rate"], same, s["rate_b"], before, after, at)
        cut_ts = np.select([early, late], [s["ts_prev2"][at], s["ts"][at]], s["ts_prev"][at])
        frame = np.select([early, late], [s["frame_prev2"][at], s["frame"][at]], s["frame_prev"][at])
        lowest = np.select([early, late & ~stall], [s["ts_prev3"][at], s["ts_prev"][at]], s["ts_prev2"][at])
        starts, lengths, _ = group_bounds(s["flow"])
        self._recover(s, before, back, ready, at, cut_ts, starts, starts + lengths)
        if len(at):
            self.cuts.append((s["flow"][at], s["seq"][at], cut_ts, frame, before[at],
                              np.where(early, np.fmin(s["rate_b"][at], after[at]), after[at]), lowest))
            self.n_cuts += len(at)
        s["decided"] = s["decided"] | ready
        self.last_env[s["flow"][starts + lengths - 1]] = back[starts + lengths - 1]
        self._slices = (s["flow"][starts], starts, starts + lengths, s["ts"], back)
        keep = np.arange(len(s["flow"])) >= np.repeat(starts + lengths - _CARRY, lengths)
        self.carry = {k: v[keep] for k, v in s.items()}

    def _recover(self, s, before, back, ready, at, cut_ts, starts, ends) -> None:
        """Recovery of each cut: the first envelope made only of samples after it at RECOVERED
        of the rate before it, before the flow's next cut (which leaves it blank). Each open cut
        looks at one segment of the samples (a carried cut: its flow's up to the first new cut; a
        new one: up to its flow's next), all segments at once."""
        heads, cut_flows = s["flow"][starts], s["flow"][at]
        old = np.fromiter(self.open_cut, dtype=np.int64, count=len(self.open_cut))
        old = old[np.isin(old, heads)]                      # carried cuts of the flows sampled now
        g, k = np.searchsorted(heads, old), np.minimum(np.searchsorted(cut_flows, old), max(len(at) - 1, 0))
        o_hi = np.where(cut_flows[k] == old, at[k], ends[g]) if len(at) else ends[g]
        nxt = np.append(cut_flows[1:] == cut_flows[:-1], False) if len(at) else np.zeros(0, dtype=bool)
        n_hi = np.where(nxt, np.append(at[1:], 0), ends[np.searchsorted(heads, cut_flows)])
        carried = list(zip(*[self.open_cut[f] for f in old.tolist()])) or [()] * 4   # ts: int64, never float
        number, seq, t0, target = (np.concatenate([np.array(c, dtype=x.dtype), x]) for c, x in zip(carried, (
            self.n_cuts + np.arange(len(at)), s["seq"][at], cut_ts.astype(np.int64),
            rate_mod.RECOVERED * before[at].astype(np.float64))))
        j = first_in_segments(np.concatenate([starts[g], at]), np.concatenate([o_hi, n_hi]),
                               lambda idx, seg: ready[idx] & (s["seq"][idx] >= seq[seg] + rate_mod.K - 1)
                               & (back[idx] >= target[seg]))
        done = j >= 0
        self.recovery.update(zip(number[done].tolist(), (s["ts"][j[done]] - t0[done]).astype(np.float64).tolist()))
        for f in old[done[: len(old)]].tolist():
            del self.open_cut[f]
        for i in np.flatnonzero(~nxt).tolist():          # a flow's newest cut stays open until it recovers
            self.open_cut.pop(int(cut_flows[i]), None)
            if not done[len(old) + i]:
                c = len(old) + i
                self.open_cut[int(cut_flows[i])] = (int(number[c]), int(seq[c]), int(t0[c]), float(target[c]))

    # ---- CNPs --------------------------------------------------------------------------------
    def _cnps(self, batch, rows, fid) -> None:
        """This chunk's CNPs: each one's spacing from the previous CNP to its QP, and per data
        flow that may be its sender's the envelope before it (numpy per flow, not per CNP)."""
        ts = batch.cols["ts_ns"].take(rows).astype(np.int64)
        frame = batch.cols["frame"].take(rows).astype(np.int64)
        order = np.argsort(fid, kind="stable")
        starts, lengths, _ = group_bounds(fid[order])
        last = np.empty_like(ts)
        last[order] = _previous(ts[order], starts, self.cnp_last[fid[order][starts]])
        self.cnp_last[fid[order][starts + lengths - 1]] = ts[order][starts + lengths - 1]
        flows, inv = np.unique(fid, return_inverse=True)
        cands = [self.senders.get(self.endpoints[f][::-1], [])[:MAX_CANDIDATES] for f in flows.tolist()]
        row, cand = pairs(inv, cands)
        sent = self.first_data[cand] < self._base + rows[row]    # senders of this chunk: before the CNP only
        row, cand = row[sent], cand[sent]
        self.cnp.add_many(fid, ts, frame, np.where(last >= 0, ts - last, -1), (last >= 0) & (ts - last < self.min_cnp_ns),
                          row, cand, self._envs_at(cand, ts[row]), self._fresh, self.judge_ns)

    def _envs_at(self, cand: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Per (data flow, time): the envelope of the flow at its newest sample before the time in
        this chunk's samples (NaN: none), else the flow's newest envelope (NaN: none yet)."""
        out = self.last_env[cand].astype(np.float64)
        flows, lo, hi, ts, back = self._slices
        for d, at in groups(cand):
            g = int(np.searchsorted(flows, d))
            if g < len(flows) and flows[g] == d:
                k = np.searchsorted(ts[lo[g]:hi[g]], t[at], side="right")
                out[at] = np.where(k > 0, back[lo[g] + np.maximum(k, 1) - 1], np.nan)
        return out

    def finish(self) -> None:
        """Decide the samples still waiting for their forward window (call once, at the end)."""
        self._decide(dict(self.carry), final=True)
        if len(self.ce.pending[0]):
            empty = np.zeros(0, dtype=np.int64)
            self.ce.feed(empty, empty, empty, empty, empty, 0, final=True)
        self._fresh = {}
        self.carry = {k: v[:0] for k, v in self.carry.items()}

    # ---- output ------------------------------------------------------------------------------
    def table(self, peers: dict | None = None):
        """cc.csv: one row per CNP received (the first max_rows). peers: CNP flow name -> the
        name of its paired data flow (the pairing's answer); without it, the only data flow from
        the CNP's destination to its source."""
        return judge_all(self, peers)


def _running_count(f: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Per row (grouped by flow), the flow's sample number, continuing `counter` (updated)."""
    starts, lengths, gid = group_bounds(f)
    out = counter[f] + (np.arange(len(f)) - starts[gid])
    counter[f[starts]] += lengths
    return out


def _previous(values: np.ndarray, starts: np.ndarray, carried: np.ndarray) -> np.ndarray:
    """Row i: row i-1's value in its flow (rows grouped by flow), `carried` at each group start."""
    out = np.roll(values, 1)
    out[starts] = carried
    return out


def _by_flow(flow: np.ndarray, ts: np.ndarray) -> dict:
    """flow -> its ts (rows grouped by flow, in order)."""
    starts, lengths, _ = group_bounds(flow)
    return {int(flow[a]): ts[a: a + n] for a, n in zip(starts.tolist(), lengths.tolist())}
