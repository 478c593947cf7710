"""The flows table as numpy arrays for the rules that look at every flow: hosts as codes (in
sorted order, so a code order is the hosts' text order), per-flow data and CE counts, groups of
flows by host. A FlowRow read per flow and column cost ~1 us: 100 k queue pairs times the
columns a rule reads was most of the diagnoser's time.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from roceview.arrays import run_starts

NOT_DATA_TRANSPORTS = ("CNP", "UD")


class FlowArrays:
    def __init__(self, flow, facts):
        names = flow.names
        src, dst = list(flow.column("src_ip")), list(flow.column("dst_ip"))
        self.hosts: list[str] = sorted(set(src) | set(dst))
        code = {h: i for i, h in enumerate(self.hosts)}
        self.src, self.dst = (np.fromiter(map(code.__getitem__, c), np.int64, len(names)) for c in (src, dst))
        for column in ("data_packets", "packets", "ecn_ce", "ecn_not_ect", "cnp_packets", "first_ts", "last_ts",
                       "gap_events", "retransmitted_packets"):
            setattr(self, column, np.asarray(flow.column(column)))
        transport = flow.column("transport")
        self.data_flow = (self.data_packets != 0) & ~np.fromiter(
            (t in NOT_DATA_TRANSPORTS for t in transport), bool, len(names))
        # the flow's row of the facts (-1: none): data and CE from the packet classes when known
        self.fact = np.fromiter((facts.index.get(n, -1) for n in names), np.int64, len(names))
        known, at = self.fact >= 0, np.maximum(self.fact, 0)
        self.has_facts = known

        def pick(fact_column, table_column):
            return np.where(known, fact_column[at], table_column) if len(facts) else table_column

        self.data, self.ce = pick(facts.data, self.data_packets), pick(facts.data_ce, self.ecn_ce)
        self._facts, self._fact_columns = facts, {}

    @cached_property
    def cnps_back(self) -> np.ndarray:
        """Per flow, the CNPs its receiver sent its sender (any QP): ctx.cnps_from(dst, src)."""
        if not len(self.src):
            return np.zeros(0, np.int64)
        n = len(self.hosts)
        pairs, at = np.unique(self.src * n + self.dst, return_inverse=True)
        per_pair = sums(at.reshape(-1), self.cnp_packets, len(pairs))
        back = self.dst * n + self.src
        i = np.minimum(np.searchsorted(pairs, back), len(pairs) - 1)
        return np.where(pairs[i] == back, per_pair[i], 0)

    def fact_column(self, column: str) -> np.ndarray:
        """A FlowFactsTable column per flow (0 / False for flows without facts); made once."""
        out = self._fact_columns.get(column)
        if out is None:
            values = getattr(self._facts, column)
            out = self._fact_columns[column] = (
                np.where(self.has_facts, values[np.maximum(self.fact, 0)], values.dtype.type(0)) if len(values)
                else np.zeros(len(self.fact), values.dtype))
        return out

    def groups(self, codes: np.ndarray, rows: np.ndarray | None = None) -> dict[int, np.ndarray]:
        """code -> the rows (of `rows`, default all) with that code, in flow order; codes ascending."""
        return groups(codes, np.arange(len(codes)) if rows is None else rows)

    def by_pair(self) -> dict[tuple[int, int], np.ndarray]:
        """(src code, dst code) -> its flows, in flow order."""
        n = len(self.hosts)
        return {(int(k) // n, int(k) % n): rows for k, rows in self.groups(self.src * n + self.dst).items()}


def groups(codes: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """code -> the `rows` whose codes[row] is that code, rows kept in their order; codes ascending."""
    rows = np.asarray(rows, np.int64)
    order = rows[np.argsort(codes[rows], kind="stable")]
    keys = codes[order]
    starts = run_starts(keys)
    ends = np.append(starts[1:], len(keys))
    return {int(keys[s]): order[s:e] for s, e in zip(starts.tolist(), ends.tolist())}


def distinct_codes(values: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) for int64 values: the sorted distinct values and
    each value's index among them; by a table over the values' range when it has at most
    `limit` cells, else by sorting."""
    if not len(values):
        return values[:0], np.zeros(0, np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= limit:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1)
    offset = values - lo
    present = np.zeros(hi - lo + 1, bool)
    present[offset] = True
    return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[offset]


def any_of(values: np.ndarray, choices: tuple) -> np.ndarray:
    """np.isin for a few choices (np.isin costs ~40 us a call)."""
    out = np.zeros(len(values), bool)
    for c in choices:
        out |= values == c
    return out


def sums(codes: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Sum of `values` per code 0..size-1 (int64, exact)."""
    out = np.zeros(size, np.int64)
    np.add.at(out, codes, values)
    return out
