"""The CNP rows of cc.py and their judgement: which cut answers which CNP, which CNP was ignored.

While feeding, each CNP row follows every data flow that may be its sender's (the data flows from
its destination to its source): the sender's envelope just before the CNP and the samples it sent
in the judging window after it. At the end, the pairing picks one and the CNPs of each data flow
are judged in order against its cuts (cc.py's docstring gives the rules).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.segments import group_bounds
from roceview.analysis.tables import Table
from roceview.packets.names import flow_name

CC_COLUMNS = ("flow", "cnp_frame", "cnp_ts", "rate_before_gbps", "rate_after_gbps", "cut_pct", "reaction_us",
              "recovery_us", "ignored", "spacing_us", "reaction_us_min", "reaction_us_max")
FLOW_CC_COLUMNS = ("cnps_received", "cnps_judged", "cnps_ignored", "cnps_excess", "cnp_reaction_us_p50",
                   "rate_cut_pct_p50", "recovery_us_p50", "ce_without_cnp")
MIN_AFTER = 8               # samples the sender must send in the window to be judged
SPAN_AFTER = 0.9            # ... the last of them this far into it
COVER_SLACK_NS = 0          # CNPs to one QP share a path: their spacing is the NIC's, jitter aside


class CnpRows:
    """The first `limit` CNPs: ts, frame, spacing, and per candidate data flow (a probe) its
    envelope before the CNP and the samples after it (count, newest ts) in the judging window.
    Columns of numbers grown a chunk at a time: no Python object per CNP."""

    def __init__(self, limit: int):
        self.limit = limit
        self.rows = {c: _Column(np.int64) for c in ("flow", "ts", "frame", "spacing")}
        self.probes = {c: _Column(np.float64 if c == "env" else np.int64)
                       for c in ("row", "flow", "env", "count", "newest")}    # in row order
        empty = np.zeros(0, dtype=np.int64)
        self.open = (empty, empty, empty)    # probes whose window may still take samples: probe, flow, ts
        self.received: dict[int, int] = {}   # CNP flow -> CNPs (all, past the limit too)
        self.excess: dict[int, int] = {}     # CNP flow -> CNPs closer than the minimum spacing

    def __len__(self) -> int:
        return self.rows["flow"].n

    def add_many(self, flow, ts, frame, spacing, excess, row, cand, env, fresh, judge_ns: int) -> None:
        """A chunk's CNPs in order (arrays), their candidate data flows as (row, cand) pairs with
        the envelope before each, and the fresh samples (flow -> ts) already in their windows."""
        for counts, which in ((self.received, flow), (self.excess, flow[excess])):
            keys, first, n = np.unique(which, return_index=True, return_counts=True)
            for i in np.argsort(first).tolist():       # new flows in order of their first CNP
                counts[int(keys[i])] = counts.get(int(keys[i]), 0) + int(n[i])
        take = min(max(self.limit - len(self), 0), len(flow))
        keep = row < take
        row, cand, env = row[keep], cand[keep], env[keep]
        n, newest = _in_windows(cand, ts[row], fresh, judge_ns)
        first = self.probes["row"].n
        for c, v in zip(self.probes, (row + len(self), cand, env, n, newest)):
            self.probes[c].extend(v)
        for c, v in zip(self.rows, (flow, ts, frame, spacing)):
            self.rows[c].extend(v[:take])
        self.open = tuple(np.concatenate([o, x]) for o, x in zip(self.open, (first + np.arange(len(row)), cand, ts[row])))

    def count(self, fresh: dict, judge_ns: int) -> None:
        """Add the fresh samples (flow -> sorted ts) to the windows of the open rows."""
        probe, cand, t = self.open
        n, newest = _in_windows(cand, t, fresh, judge_ns)
        hit = n > 0
        self.probes["count"].view()[probe[hit]] += n[hit]
        seen = self.probes["newest"].view()
        seen[probe[hit]] = np.maximum(seen[probe[hit]], newest[hit])

    def close(self, now: int, judge_ns: int) -> None:
        """Rows whose window ended before `now` take no more samples."""
        keep = self.open[2] + judge_ns >= now
        self.open = tuple(o[keep] for o in self.open)


class _Column:
    """A growing column of numbers (capacity doubles: appending stays linear)."""

    def __init__(self, dtype):
        self.a, self.n = np.zeros(16, dtype=dtype), 0

    def extend(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.a):
            grown = np.zeros(max(need, 2 * len(self.a)), dtype=self.a.dtype)
            grown[: self.n] = self.a[: self.n]
            self.a = grown
        self.a[self.n: need] = values
        self.n = need

    def view(self) -> np.ndarray:
        """The values (a view: writes go to the column)."""
        return self.a[: self.n]


def groups(keys: np.ndarray):
    """(key, positions) per distinct key, positions in order (per flow, not per row)."""
    order = np.argsort(keys, kind="stable")
    starts, lengths, _ = group_bounds(keys[order])
    for a, n in zip(starts.tolist(), lengths.tolist()):
        yield int(keys[order[a]]), order[a: a + n]


def pairs(inv: np.ndarray, lists: list) -> tuple:
    """(row, item) for each item of lists[inv[row]], rows in order."""
    sizes = np.array([len(x) for x in lists], dtype=np.int64)
    flat = np.array([v for x in lists for v in x], dtype=np.int64)
    offset = np.cumsum(sizes) - sizes
    return np.repeat(np.arange(len(inv)), sizes[inv]), flat[ranges(offset[inv], sizes[inv])]


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The rows of the ranges [start, start + length), one range after another."""
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))


def first_in_segments(lo: np.ndarray, hi: np.ndarray, test) -> np.ndarray:
    """Per segment [lo, hi) (disjoint): the first row where test(rows, segment numbers) holds, -1: none."""
    lengths = np.maximum(hi - lo, 0)
    seg = np.repeat(np.arange(len(lo)), lengths)
    idx = ranges(lo, lengths)
    hit = np.flatnonzero(test(idx, seg))
    out = np.full(len(lo), -1, dtype=np.int64)
    first = np.unique(seg[hit], return_index=True)
    out[first[0]] = idx[hit[first[1]]]
    return out


def _in_windows(cand: np.ndarray, t: np.ndarray, fresh: dict, judge_ns: int) -> tuple:
    """Per (data flow, CNP time): the flow's fresh samples in (t, t + judge_ns] and the newest
    of their times (-1: none)."""
    n, newest = np.zeros(len(cand), dtype=np.int64), np.full(len(cand), -1, dtype=np.int64)
    for d, at in groups(cand):
        ts = fresh.get(d)
        if ts is None:
            continue
        lo = np.searchsorted(ts, t[at], side="right")
        hi = np.searchsorted(ts, t[at] + judge_ns, side="right")
        got = hi > lo
        n[at] = np.where(got, hi - lo, 0)
        newest[at] = np.where(got, ts[np.maximum(hi - 1, 0)], -1)
    return n, newest


def judge_all(cc, peers: dict | None) -> Table:
    """cc.csv from the CNP rows (cc is the CnpReactions that gathered them)."""
    names = _names(cc.registry)
    cuts = _cut_arrays(cc)
    rows = {c: v.view() for c, v in cc.cnp.rows.items()}
    probes = {c: v.view() for c, v in cc.cnp.probes.items()}
    chosen = _chosen(rows["flow"], probes, names, peers)
    n = len(chosen)
    out = {c: np.full(n, np.nan) for c in ("rate_before_gbps", "rate_after_gbps", "cut_pct", "reaction_us", "recovery_us",
                                           "reaction_us_min", "reaction_us_max")}
    out["ignored"] = [""] * n
    picked = np.flatnonzero(chosen >= 0)
    data_flow = probes["flow"][chosen[picked]]
    order = np.argsort(data_flow, kind="stable")         # rows by data flow, capture order within
    starts, lengths, _ = group_bounds(data_flow[order])
    cut_order = np.argsort(cuts["flow"], kind="stable")  # cuts by data flow: one pass, not rows x flows
    cut_flows = cuts["flow"][cut_order]
    for a, m in zip(starts.tolist(), lengths.tolist()):
        d = data_flow[order[a]]
        lo, hi = np.searchsorted(cut_flows, d, side="left"), np.searchsorted(cut_flows, d, side="right")
        _judge_flow(cc, picked[order[a: a + m]], chosen, rows["ts"], probes, cuts, cut_order[lo:hi], out)
    flow = [""] * n
    for r, d in zip(picked.tolist(), data_flow.tolist()):
        flow[r] = names[d]
    spacing = rows["spacing"]
    data = {"flow": flow, "cnp_frame": rows["frame"].copy(), "cnp_ts": rows["ts"].copy(),
            "spacing_us": np.where(spacing >= 0, spacing / 1000, np.nan)} | out
    return Table(CC_COLUMNS, {c: data[c] for c in CC_COLUMNS})


def _names(registry) -> list[str]:
    src, dst = registry.endpoint_names()
    return [flow_name(s, d, q) for s, d, q in zip(src, dst, registry.qp.tolist())]


def _chosen(cnp_flow: np.ndarray, probes: dict, names, peers) -> np.ndarray:
    """Per CNP row: its probe of the data flow the pairing pairs its flow with (peers: CNP flow
    name -> data flow name), without peers its only probe; -1: none."""
    n = len(cnp_flow)
    row = probes["row"]
    first = np.searchsorted(row, np.arange(n))
    if peers is None:
        return np.where(np.diff(np.append(first, len(row))) == 1, first, -1)
    key = cnp_flow[row] * (len(names) + 1) + probes["flow"]     # few distinct (CNP flow, data flow)
    pairs, inv = np.unique(key, return_inverse=True)
    match = np.array([names[int(k) % (len(names) + 1)] == peers.get(names[int(k) // (len(names) + 1)])
                      for k in pairs.tolist()], dtype=bool)[inv] if len(pairs) else np.zeros(0, dtype=bool)
    out = np.full(n, -1, dtype=np.int64)
    hit = np.flatnonzero(match)
    r, at = np.unique(row[hit], return_index=True)
    out[r] = hit[at]
    return out


def _cut_arrays(cc) -> dict:
    cols = ("flow", "seq", "ts", "frame", "before", "after", "lowest")
    if not cc.cuts:
        return {c: np.zeros(0, dtype=np.int64 if c == "flow" else np.float64) for c in cols} | {"number": np.zeros(0, dtype=np.int64)}
    out = {c: np.concatenate([part[i] for part in cc.cuts]) for i, c in enumerate(cols)}
    out["number"] = np.arange(len(out["flow"]))
    return out


def _judge_flow(cc, rows: np.ndarray, chosen, cnp_ts, probes, cuts: dict, mine: np.ndarray, out: dict) -> None:
    """The CNPs of one data flow (rows, in capture order) against its cuts (mine, in order), as
    cc.py says; the verdicts go to out's columns."""
    cut_ts = cuts["ts"][mine].tolist()
    ts = cnp_ts[rows].tolist()
    plan = _plan(cc, ts, cut_ts, _typical_delay(_plan(cc, ts, cut_ts, None), ts, cut_ts))
    at = chosen[rows]
    for r, t, got, env, count, newest in zip(rows.tolist(), ts, plan, probes["env"][at].tolist(),
                                             probes["count"][at].tolist(), probes["newest"][at].tolist()):
        if got == _COVERED:
            v = {"ignored": "false", "rate_before_gbps": env}
        elif got == _HIDDEN:
            v = {"ignored": "", "rate_before_gbps": env}
        elif got >= 0:
            v = _reaction(cc, cuts, mine[got], t)
        else:
            sent = count >= MIN_AFTER and newest >= t + SPAN_AFTER * cc.judge_ns
            v = {"ignored": "true" if sent and np.isfinite(env) else "", "rate_before_gbps": env,
                 "rate_after_gbps": env if sent and np.isfinite(env) else np.nan}
        out["ignored"][r] = v.pop("ignored")
        for c, x in v.items():
            out[c][r] = x


_NONE, _COVERED, _HIDDEN = -1, -2, -3


def _plan(cc, ts: list, cut_ts: list, typical) -> list[int]:
    """Per CNP (times `ts`, in order): the cut it got (an index of cut_ts), _COVERED (less than
    the rate-reduce period after a CNP that cut), _NONE, or _HIDDEN. Each CNP takes the first
    cut after it not yet taken, within judge_ns. With the sender's `typical` reaction delay
    known: a CNP whose first cut comes after the next CNP (at least a period later, so not
    covered by it), and lies nearer that CNP's typical reaction than its own, leaves the cut to
    it and is not judged (a cut the spacing could not show, as a sender at a few Gb/s climbing
    back within 4 packets: taking the next CNP's cut, every later CNP took the one after its own)."""
    out, ptr, last_cutting = [], 0, None
    for k, t in enumerate(ts):
        if last_cutting is not None and t - last_cutting < cc.period_ns - COVER_SLACK_NS:
            out.append(_COVERED)
            continue
        while ptr < len(cut_ts) and cut_ts[ptr] <= t:
            ptr += 1
        if ptr >= len(cut_ts) or cut_ts[ptr] > t + cc.judge_ns:
            out.append(_NONE)
            continue
        nxt = ts[k + 1] if k + 1 < len(ts) else None
        if typical is not None and nxt is not None and nxt - t >= cc.period_ns and nxt < cut_ts[ptr] \
                and abs(cut_ts[ptr] - nxt - typical) < abs(cut_ts[ptr] - t - typical):
            out.append(_HIDDEN)
            continue
        out.append(ptr)
        ptr, last_cutting = ptr + 1, t
    return out


def _typical_delay(plan: list[int], ts: list, cut_ts: list):
    """The median delay of the cuts that came before the next CNP (no other CNP could have
    caused them); None with fewer than 3."""
    clear = [cut_ts[g] - t for k, (g, t) in enumerate(zip(plan, ts))
             if g >= 0 and (k + 1 == len(ts) or cut_ts[g] < ts[k + 1])]
    return float(np.median(clear)) if len(clear) >= 3 else None


def _reaction(cc, cuts: dict, i: int, t: int) -> dict:
    """A CNP's cut: rates, depth, recovery, and its reaction, bracketed between the last packet
    the old rate paced (not before the CNP) and the packet whose next gap the new rate set; the
    reaction is the bracket's middle (either end is up to a packet gap off)."""
    before, after = float(cuts["before"][i]), float(cuts["after"][i])
    rec = cc.recovery.get(int(cuts["number"][i]))
    latest = (int(cuts["ts"][i]) - t) / 1000
    earliest = latest if cuts["lowest"][i] < 0 else min(max(int(cuts["lowest"][i]) - t, 0) / 1000, latest)
    return {"ignored": "false", "rate_before_gbps": before, "rate_after_gbps": after,
            "cut_pct": 100 * (1 - after / before), "reaction_us": (earliest + latest) / 2,
            "reaction_us_min": earliest, "reaction_us_max": latest,
            "recovery_us": np.nan if rec is None else rec / 1000}


def flow_columns(cc, table: Table, peers: dict | None = None) -> dict:
    """Per data flow name: the qps.csv columns (FLOW_CC_COLUMNS) from the CNP rows of `table`
    and the counts of every CNP (past the row limit too)."""
    names = _names(cc.registry)
    out: dict[str, dict] = {}
    flows = table.data["flow"]
    ignored = np.array(table.data["ignored"], dtype=object)
    rows_of: dict[str, list[int]] = {}               # one pass over the rows, not one per flow
    for r, f in enumerate(flows):
        rows_of.setdefault(f, []).append(r)
    for name in sorted(set(rows_of) - {""}):
        at = np.asarray(rows_of[name], dtype=np.int64)
        ign = ignored[at]
        row = {"cnps_judged": int(np.isin(ign, ("true", "false")).sum()), "cnps_ignored": int((ign == "true").sum())}
        for col, src in (("cnp_reaction_us_p50", "reaction_us"), ("rate_cut_pct_p50", "cut_pct"),
                         ("recovery_us_p50", "recovery_us")):
            v = table.data[src][at]
            v = np.sort(v[np.isfinite(v)])
            row[col] = float(v[max(int(np.ceil(len(v) * 0.5)) - 1, 0)]) if len(v) else np.nan
        out[name] = row
    for r, f in enumerate(cc.cnp.rows["flow"].view().tolist()):
        name = flows[r] if r < len(flows) else ""
        if name:
            out[name].setdefault("_cnp_flow", names[f])
    for f in np.flatnonzero(cc.ce.ce).tolist():        # CE-marked senders without CNP rows too
        row = out.setdefault(names[f], {"cnps_judged": 0, "cnps_ignored": 0, "cnp_reaction_us_p50": np.nan,
                                        "rate_cut_pct_p50": np.nan, "recovery_us_p50": np.nan})
        row["ce_without_cnp"] = int(cc.ce.missing[f])
    received_by_name: dict[str, list[int]] = {}
    for f in cc.cnp.received:
        received_by_name.setdefault(names[f], []).append(f)
    for name, row in out.items():
        row.setdefault("ce_without_cnp", 0)
        want = row.pop("_cnp_flow", None)
        cnp_flow = received_by_name.get(want, [])
        row["cnps_received"] = sum(cc.cnp.received[f] for f in cnp_flow)
        row["cnps_excess"] = sum(cc.cnp.excess.get(f, 0) for f in cnp_flow)
    return out
