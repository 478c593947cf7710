"""Vectorised helpers over rows sorted by group (segmented scans, interval sets, 24-bit PSNs)."""
from __future__ import annotations

import numpy as np

PSN_MOD = 1 << 24
IDX_SHIFT = 1 << 40        # above any capture row index: (flow, idx) in one int64 key
PSN_HALF = 1 << 23


def group_bounds(keys_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, lengths, group index per row) of runs of equal keys in a sorted array."""
    n = len(keys_sorted)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(keys_sorted[1:], keys_sorted[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    lengths = np.diff(np.append(starts, n))
    gid = np.cumsum(new) - 1
    return starts, lengths, gid


def psn_delta(psn: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """Signed 24-bit serial difference psn - prev, in [-2^23, 2^23) (IBTA 9.7.5.1.1)."""
    return ((psn.astype(np.int64) - prev + PSN_HALF) & (PSN_MOD - 1)) - PSN_HALF


def seg_cumsum(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarting at each group start."""
    cs = np.cumsum(values)
    before = cs[starts] - values[starts]
    return cs - np.repeat(before, lengths)


def seg_running_max(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray, gid: np.ndarray,
                    init: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row the max of `init` of its group and the values before it in the group (exclusive),
    and per group the max of init and all its values (inclusive)."""
    if len(values) == 0:
        return values.copy(), init.copy()
    low = np.minimum(init, np.minimum.reduceat(values, starts))
    rel = values - low[gid]
    init_rel = init - low
    span = int(max(rel.max(), init_rel.max())) + 1
    if span * len(starts) >= (1 << 62):  # pathological PSN jumps: per-group loop
        return _seg_running_max_slow(values, starts, lengths, init)
    offset = np.arange(len(starts), dtype=np.int64) * span
    inclusive = np.maximum.accumulate(rel + offset[gid])
    exclusive = np.empty_like(inclusive)
    exclusive[1:] = inclusive[:-1]
    exclusive[starts] = 0
    floor = (init_rel + offset)[gid]
    exclusive = np.maximum(exclusive, floor) - offset[gid] + low[gid]
    last = inclusive[starts + lengths - 1] - offset + low
    return exclusive, np.maximum(last, init)


def seg_running_max_grouped(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                            init: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """seg_running_max without a group index. Packets in order (values never decrease inside a
    group, init at most the group's first value) need no scan: the max before a row is the
    previous row's value. Anything else takes the general path."""
    if len(values) == 0:
        return values.copy(), init.copy()
    rising = np.empty(len(values), dtype=bool)
    np.greater_equal(values[1:], values[:-1], out=rising[1:])
    rising[starts] = True                      # a group's first row follows no row of its own
    if rising.all() and (init <= values[starts]).all():
        exclusive = np.empty_like(values)
        exclusive[1:] = values[:-1]
        exclusive[starts] = init
        return exclusive, values[starts + lengths - 1]
    gid = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    return seg_running_max(values, starts, lengths, gid, init)


def group_of(starts: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Group index of rows at `pos` (groups given by their sorted start rows)."""
    return np.searchsorted(starts, pos, side="right") - 1


def _seg_running_max_slow(values, starts, lengths, init):
    exclusive = np.empty_like(values)
    last = np.empty_like(init)
    for g, (s, n) in enumerate(zip(starts, lengths)):
        run = np.maximum.accumulate(np.maximum(values[s:s + n], init[g]))
        exclusive[s] = init[g]
        exclusive[s + 1:s + n] = run[:-1]
        last[g] = run[-1]
    return exclusive, last


def merge_intervals(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of half-open intervals [lo, hi) as sorted disjoint intervals."""
    if len(lo) == 0:
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.empty(len(lo), dtype=bool)
    new[0] = True
    new[1:] = lo[1:] > reach[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(lo)) - 1
    return lo[starts], reach[ends]


def subtract_intervals(a_lo, a_hi, b_lo, b_hi) -> tuple[np.ndarray, np.ndarray]:
    """A minus B for half-open interval sets (A disjoint; B may overlap), as sorted intervals."""
    if len(a_lo) == 0 or len(b_lo) == 0:
        return a_lo, a_hi
    points = np.concatenate([a_lo, a_hi, b_lo, b_hi])
    na, nb = len(a_lo), len(b_lo)
    da = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * nb)])
    db = np.concatenate([np.zeros(2 * na), np.ones(nb), -np.ones(nb)])
    uniq, inv = np.unique(points, return_inverse=True)
    in_a = np.cumsum(np.bincount(inv, da, len(uniq))) > 0.5
    in_b = np.cumsum(np.bincount(inv, db, len(uniq))) > 0.5
    keep = (in_a & ~in_b)[:-1]  # segment [uniq[i], uniq[i+1])
    prev = np.concatenate([[False], keep[:-1]])
    nxt = np.concatenate([keep[1:], [False]])
    return uniq[:-1][keep & ~prev], uniq[1:][keep & ~nxt]


def last_before(key_flow, key_idx, carried, flow, idx):
    """Per (flow, idx): the position in the chunk's (key_flow, key_idx) rows of the flow's last
    one before idx, else -1 with carried[flow] the state before the chunk (-1: none)."""
    before = np.where(flow >= 0, carried[np.maximum(flow, 0)], -1)
    pos = np.full(len(flow), -1, dtype=np.int64)
    if len(key_flow) == 0 or len(flow) == 0:
        return pos, before
    order = np.lexsort((key_idx, key_flow))
    keys = key_flow[order] * IDX_SHIFT + key_idx[order]
    p = np.searchsorted(keys, flow * IDX_SHIFT + idx) - 1
    ok = (p >= 0) & (key_flow[order][np.maximum(p, 0)] == flow) & (flow >= 0)
    pos[ok] = order[p[ok]]
    return pos, before
