"""The incast rule's busiest window per receiver, over the timeline's rows (flows x buckets: a
million rows for 1,024 QPs over one second). Window numbers and (receiver, window) keys span a
small range, so they are grouped by indexing arrays of that range rather than by sorting the rows
(np.unique sorts: 3 sorts of 1 M rows were 25 of the diagnoser's 35 ms on such a timeline); a
range too wide for that (sparse windows over a long capture) falls back to the sort.
"""
from __future__ import annotations

from itertools import repeat

import numpy as np

from roceview.analysis.tables import Coded
from roceview.arrays import sorted_distinct
from roceview.diagnose.flow_arrays import distinct_codes, run_starts


def busiest_windows(ctx, tl, width: int, senders_of: dict) -> list[tuple[str, int, set]]:
    """Per receiver (sorted), the window of `width` ns whose timeline rows with bytes come from
    the most distinct senders (the first such window): (receiver, window number, its flows).
    Vectorised over the timeline's rows; Python only per flow."""
    flows = Coded.of(tl["flow"])                                  # the timeline's flow names
    distinct, code = flows.names, flows.codes
    is_sender = np.fromiter(map(senders_of.__contains__, distinct), bool, len(distinct))
    dst_ip = _dst_ips(ctx, distinct, is_sender)
    dsts = sorted(set(dst_ip) - {None})
    dst_code = {h: i for i, h in enumerate(dsts)}
    sender_code = {h: i for i, h in enumerate(sorted(set(senders_of.values())))}
    dst_of = np.fromiter(map(dst_code.get, dst_ip, repeat(-1)), np.int64, len(distinct))
    sender_of = np.fromiter(map(sender_code.get, map(senders_of.get, distinct), repeat(-1)), np.int64, len(distinct))
    keep = (dst_of >= 0)[code] & (np.asarray(tl["bytes"]) != 0)
    start = np.asarray(tl["bucket_start"], np.int64)
    if not keep.all():                                            # else no copy of a million rows
        rows = np.flatnonzero(keep)
        code, start = code[rows], start[rows]
    if not len(code):
        return []
    flow, limit = code, max(4 * len(code), 1 << 16)               # cells of a dense index
    receiver, number, code_of, win, first, senders = _windows(dst_of[flow], start // width, sender_of[flow], len(dsts),
                                                     len(sender_code), limit)
    # per receiver, the window with the most senders, the first in row order among equals
    order = np.lexsort((first, -senders, receiver))
    picks = order[run_starts(receiver[order])]
    chosen = np.full(int(win.max()) + 1, -1, np.int64)
    chosen[code_of[picks]] = np.arange(len(picks))
    in_pick = chosen[win]                                         # each row's pick, or -1
    rows_of = np.flatnonzero(in_pick >= 0)
    by_pick = rows_of[np.argsort(in_pick[rows_of], kind="stable")]
    bounds = np.searchsorted(in_pick[by_pick], np.arange(len(picks) + 1))
    out = []
    for i, pick in enumerate(picks.tolist()):
        names = sorted_distinct(flow[by_pick[bounds[i]:bounds[i + 1]]]).tolist()
        out.append((dsts[receiver[pick]], int(number[pick]), {distinct[f] for f in names}))
    return out


def _windows(dst, window, sender, n_dst: int, n_senders: int, limit: int):
    """The (receiver, window number) pairs of the rows, sorted: their receivers, window numbers,
    codes; each row's pair code; per pair its first row and its number of distinct senders."""
    lo, hi = int(window.min()), int(window.max())
    span = hi - lo + 1
    if n_dst * span <= limit:            # pairs indexed by their own value: no sort, no recoding
        win = dst * span + (window - lo)
        first = first_rows(win, n_dst * span)
        senders = senders_per_key(win, sender, n_dst * span, n_senders, limit)
        pairs = np.flatnonzero(first < len(win))
        return pairs // span, pairs % span + lo, pairs, win, first[pairs], senders[pairs]
    numbers, window = distinct_codes(window, limit)
    keys, win = distinct_codes(dst * len(numbers) + window, limit)
    first = first_rows(win, len(keys))
    senders = senders_per_key(win, sender, len(keys), n_senders, limit)
    return keys // len(numbers), numbers[keys % len(numbers)], np.arange(len(keys)), win, first, senders


def _dst_ips(ctx, names: list, wanted: np.ndarray) -> list:
    """The receiver of each wanted flow (None for the others), from the flows table's column
    when it has one (no row view per flow)."""
    flow = ctx.flow
    if hasattr(flow, "rows"):
        column, rows = flow.column("dst_ip"), np.where(wanted, flow.rows(names), -1).tolist()
        return [column[r] if r >= 0 else None for r in rows]
    return [flow[n]["dst_ip"] if w else None for n, w in zip(names, wanted.tolist())]


def first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """Per code 0..n-1 the first row holding it (np.unique's return_index)."""
    first = np.full(n, len(codes), np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    return first


def senders_per_key(key: np.ndarray, sender: np.ndarray, n_keys: int, n_senders: int, limit: int) -> np.ndarray:
    """Per key 0..n_keys-1 the number of distinct senders among its rows."""
    pairs = key * n_senders + sender
    if n_keys * n_senders <= limit:
        seen = np.zeros(n_keys * n_senders, bool)
        seen[pairs] = True
        return np.count_nonzero(seen.reshape(n_keys, n_senders), axis=1)
    return np.bincount(sorted_distinct(pairs) // n_senders, minlength=n_keys)
