"""What the partitioned Dask run needs to know of the whole capture before it analyses parts.

`Plan` replays the local engine's merge (packets._merged / iter_chunks, then _coalesced) on the
files' timestamps alone, with its own code (merge.merge_in_time), so every row gets the frame
number the local engine gives it and the chunk the local Analyzer sees it in. `gates` combines
the split's per-file flow summaries into the local Analyzer's one cross-flow decision per chunk
(engine.ChunkAnalysis: may this chunk still pair QPs?) and the flows' order in qps.csv.
"""
from __future__ import annotations

import numpy as np

from roceview.batch import Batch

_IDX_MASK = (1 << 40) - 1


class Plan:
    """files: in the local engine's order (packets._time_ordered) with their first timestamps;
    ts: each file's timestamps; warnings: each file's reading warnings, told (as the local
    engine tells them) once its last row is merged."""

    def __init__(self, files: list[str], starts: list, ts: list[np.ndarray], warnings: list[list[str]],
                 chunk_packets: int, warn):
        from roceview.packets import MIN_MERGE_CHUNK, _coalesced

        self.n = [len(t) for t in ts]
        self.span_rows: list[int | None] = [None] * len(files)
        sizes, files_in, rows_in, ts_in = [], [], [], []

        def open_file(k: int, beside: int):
            rows = max(min(MIN_MERGE_CHUNK, chunk_packets), chunk_packets // (beside + 1))
            self.span_rows[k] = rows
            yield from _parts(ts[k], k, rows)
            for message in warnings[k]:
                warn(message)

        if len(files) == 1:
            merged = _parts(ts[0], 0, chunk_packets)
        else:
            from roceview.merge import merge_in_time

            never = -(1 << 62)
            merged = merge_in_time([never if s is None else s for s in starts], open_file, chunk_packets)
        for batch in _coalesced(merged, chunk_packets):
            sizes.append(batch.n)
            files_in.append(batch.cols["_file"])
            rows_in.append(batch.cols["_row"])
            ts_in.append(batch.cols["ts_ns"])
        if len(files) == 1:
            for message in warnings[0]:
                warn(message)
        self.chunk_starts = np.cumsum([0] + sizes[:-1]).astype(np.int64) if sizes else np.zeros(1, np.int64)
        self.n_chunks = len(sizes)
        self.gidx = self._positions(files_in, rows_in)
        self.ts_backwards = _backwards(np.concatenate(ts_in) if ts_in else np.zeros(0, np.int64))

    def _positions(self, files_in, rows_in) -> list:
        """Per file the frame index (from 0) of each row, or of its first when they follow each
        other (a ring buffer's files)."""
        if not files_in:
            return [0] * len(self.n)
        f, r = np.concatenate(files_in), np.concatenate(rows_in)
        pos = np.arange(len(f), dtype=np.int64)
        out = []
        for k, n in enumerate(self.n):
            at = np.flatnonzero(f == k)
            g = np.empty(n, np.int64)
            g[r[at]] = pos[at]
            out.append(int(g[0]) if n and g[-1] - g[0] == n - 1 else g if n else 0)
        return out


def _parts(ts: np.ndarray, k: int, rows: int):
    """File k's timestamps in the reader's chunks of `rows` (with the file and row of each)."""
    for lo in range(0, len(ts), rows):
        part = ts[lo:lo + rows]
        yield Batch(len(part), {"ts_ns": part, "_file": np.full(len(part), k, np.uint16),
                                "_row": np.arange(lo, lo + len(part), dtype=np.int64)})


def _backwards(ts: np.ndarray) -> tuple[int, int, list]:
    """FactCollector._timestamps over the merged capture: rows stamped before the row before."""
    if len(ts) < 2:
        return 0, 0, []
    back = np.flatnonzero(ts[1:] < ts[:-1]) + 1
    if not len(back):
        return 0, 0, []
    return len(back), int((ts[back - 1] - ts[back]).max()), (back[:5] + 1).tolist()


def gates(flows: list[dict], n_chunks: int) -> tuple[np.ndarray, list[str]]:
    """(per chunk whether the local Analyzer pairs QPs in it, the flow names in qps.csv order)
    from the split's per-file flow summaries (dask_partition._flows)."""
    from roceview.analysis.chunk_psn import PAIRING_HORIZON

    flows = [f for f in flows if len(f["qp"])]
    last = np.full(max(n_chunks, 1), -(1 << 62), np.int64)
    if not flows:
        return np.zeros(max(n_chunks, 1), bool), []
    for f in flows:
        np.maximum.at(last, *f["chunk_last"])
    cat = {k: np.concatenate([f[k] for f in flows]) for k in ("first_frame", "first_chunk", "first_key", "qp")}
    src, dst = (np.concatenate([f[k] for f in flows]).astype(np.uint64) for k in ("src", "dst"))
    key = np.ascontiguousarray(np.column_stack([src, dst, cat["qp"].astype(np.uint64)]))
    _, first, inv = np.unique(key.view(np.dtype((np.void, 40))).ravel(), return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    m = len(first)
    first_frame = np.full(m, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_frame, inv, cat["first_frame"])
    first_chunk = np.full(m, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_chunk, inv, cat["first_chunk"])
    there = cat["first_chunk"] == first_chunk[inv]            # the file's rows in the flow's first chunk
    first_key = np.full(m, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_key, inv[there], cat["first_key"][there])
    newest = np.full(max(n_chunks, 1), -PAIRING_HORIZON, np.int64)    # Analyzer.last_new_flow_idx
    np.maximum.at(newest, first_chunk, first_key & _IDX_MASK)
    newest = np.maximum.accumulate(newest)
    order = np.argsort(first_frame, kind="stable")
    return last - newest < PAIRING_HORIZON, _names(key[first[order]])


def _names(keys: np.ndarray) -> list[str]:
    """build.flow_names for flows given as (src 2 words, dst 2 words, qp) rows."""
    from roceview.analysis.flows import format_address

    cache: dict = {}

    def name(words) -> str:
        t = tuple(words.tolist())
        if t not in cache:
            cache[t] = format_address(words)
        return cache[t]
    return [f"{name(k[0:2])}>{name(k[2:4])}:0x{int(k[4]):06x}" for k in keys]
