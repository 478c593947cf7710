"""The CNP rows of cc.py and their judgement: which cut answers which CNP, which CNP was ignored.

While feeding, each CNP row follows every data flow that may be its sender's (the data flows from
its destination to its source): the sender's envelope just before the CNP and the samples it sent
in the judging window after it. At the end, the pairing picks one and the CNPs of each data flow
are judged in order against its cuts (cc.py's docstring gives the rules).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import Table
from roceview.packets.names import flow_name

CC_COLUMNS = ("flow", "cnp_frame", "cnp_ts", "rate_before_gbps", "rate_after_gbps", "cut_pct", "reaction_us",
              "recovery_us", "ignored", "spacing_us")
FLOW_CC_COLUMNS = ("cnps_received", "cnps_judged", "cnps_ignored", "cnps_excess", "cnp_reaction_us_p50",
                   "rate_cut_pct_p50", "recovery_us_p50", "ce_without_cnp")
MIN_AFTER = 8               # samples the sender must send in the window to be judged
SPAN_AFTER = 0.9            # ... the last of them this far into it
COVER_SLACK_NS = 0          # CNPs to one QP share a path: their spacing is the NIC's, jitter aside


class CnpRows:
    """The first `limit` CNPs: ts, frame, spacing, and per candidate data flow its envelope
    before the CNP and the samples after it (count, newest ts) in the judging window."""

    def __init__(self, limit: int):
        self.limit = limit
        self.rows: list[list] = []      # [cnp flow, ts, frame, spacing ns]
        self.probes: list[dict] = []    # per row: data flow -> [envelope before, count, newest ts]
        self.open: list[int] = []       # rows whose window may still take samples
        self.received: dict[int, int] = {}   # CNP flow -> CNPs (all, past the limit too)
        self.excess: dict[int, int] = {}     # CNP flow -> CNPs closer than the minimum spacing

    def add(self, flow, ts, frame, spacing, data, envs, excess) -> None:
        self.received[flow] = self.received.get(flow, 0) + 1
        if excess:
            self.excess[flow] = self.excess.get(flow, 0) + 1
        if len(self.rows) >= self.limit:
            return
        self.rows.append([flow, ts, frame, spacing])
        self.probes.append({d: [e, 0, -1] for d, e in zip(data, envs)})
        self.open.append(len(self.rows) - 1)

    def count(self, fresh, judge_ns: int, rows=None) -> None:
        """Add the fresh samples (flow -> sorted ts) to the windows of the open rows (or `rows`)."""
        for r in self.open if rows is None else rows:
            t = self.rows[r][1]
            for d, probe in self.probes[r].items():
                ts = fresh.get(d)
                if ts is None:
                    continue
                lo, hi = np.searchsorted(ts, [t, t + judge_ns], side="right")
                if hi > lo:
                    probe[1] += int(hi - lo)
                    probe[2] = max(probe[2], int(ts[hi - 1]))

    def close(self, now: int, judge_ns: int) -> None:
        """Rows whose window ended before `now` take no more samples."""
        self.open = [r for r in self.open if self.rows[r][1] + judge_ns >= now]


def judge_all(cc, peers: dict | None) -> Table:
    """cc.csv from the CNP rows (cc is the CnpReactions that gathered them)."""
    names = _names(cc.registry)
    cuts = _cut_arrays(cc)
    chosen = [_data_flow(cc.cnp.rows[r][0], cc.cnp.probes[r], names, peers) for r in range(len(cc.cnp.rows))]
    out = {c: [] for c in CC_COLUMNS}
    judged = [None] * len(chosen)
    by_flow: dict[int, list[int]] = {}          # one pass: rows x flows would be quadratic
    for r, c in enumerate(chosen):
        if c is not None:
            by_flow.setdefault(c, []).append(r)
    for d in sorted(by_flow):
        rows = by_flow[d]
        for r, verdict in zip(rows, _judge_flow(cc, d, rows, cuts)):
            judged[r] = verdict
    for r, (row, d) in enumerate(zip(cc.cnp.rows, chosen)):
        v = judged[r] or {}
        out["flow"].append(names[d] if d is not None else "")
        out["cnp_frame"].append(row[2])
        out["cnp_ts"].append(row[1])
        for c in ("rate_before_gbps", "rate_after_gbps", "cut_pct", "reaction_us", "recovery_us"):
            out[c].append(v.get(c, np.nan))
        out["ignored"].append(v.get("ignored", ""))
        out["spacing_us"].append(row[3] / 1000 if row[3] >= 0 else np.nan)
    data = {c: (out[c] if c in ("flow", "ignored") else np.asarray(out[c], dtype=np.int64 if c in ("cnp_frame", "cnp_ts")
                                                                  else np.float64)) for c in CC_COLUMNS}
    return Table(CC_COLUMNS, data)


def _names(registry) -> list[str]:
    src, dst = registry.endpoint_names()
    return [flow_name(s, d, q) for s, d, q in zip(src, dst, registry.qp.tolist())]


def _data_flow(cnp_flow: int, probes: dict, names, peers) -> int | None:
    if peers is not None:
        want = peers.get(names[cnp_flow])
        return next((d for d in probes if names[d] == want), None)
    return next(iter(probes)) if len(probes) == 1 else None


def _cut_arrays(cc) -> dict:
    cols = ("flow", "seq", "ts", "frame", "before", "after")
    if not cc.cuts:
        return {c: np.zeros(0) for c in cols} | {"number": np.zeros(0, dtype=np.int64)}
    out = {c: np.concatenate([part[i] for part in cc.cuts]) for i, c in enumerate(cols)}
    out["number"] = np.arange(len(out["flow"]))
    return out


def _judge_flow(cc, d: int, rows: list[int], cuts: dict) -> list[dict]:
    """The CNPs of data flow d (rows, in capture order) against its cuts, as cc.py says."""
    mine = np.flatnonzero(cuts["flow"] == d)
    cut_ts = cuts["ts"][mine]
    ptr, last_cutting, out = 0, None, []
    for r in rows:
        t = cc.cnp.rows[r][1]
        env, count, newest = cc.cnp.probes[r][d]
        if last_cutting is not None and t - last_cutting < cc.period_ns - COVER_SLACK_NS:
            out.append({"ignored": "false", "rate_before_gbps": env})
            continue
        while ptr < len(mine) and cut_ts[ptr] <= t:
            ptr += 1
        if ptr < len(mine) and cut_ts[ptr] <= t + cc.judge_ns:
            out.append(_reaction(cc, cuts, mine[ptr], t))
            ptr, last_cutting = ptr + 1, t
            continue
        sent = count >= MIN_AFTER and newest >= t + SPAN_AFTER * cc.judge_ns
        out.append({"ignored": "true" if sent and np.isfinite(env) else "", "rate_before_gbps": env,
                    "rate_after_gbps": env if sent and np.isfinite(env) else np.nan})
    return out


def _reaction(cc, cuts: dict, i: int, t: int) -> dict:
    before, after = float(cuts["before"][i]), float(cuts["after"][i])
    rec = cc.recovery.get(int(cuts["number"][i]))
    return {"ignored": "false", "rate_before_gbps": before, "rate_after_gbps": after,
            "cut_pct": 100 * (1 - after / before), "reaction_us": (int(cuts["ts"][i]) - t) / 1000,
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
    for r, row in enumerate(cc.cnp.rows):
        name = flows[r] if r < len(flows) else ""
        if name:
            out[name].setdefault("_cnp_flow", names[row[0]])
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
