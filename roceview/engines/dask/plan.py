"""What the partitioned Dask run needs to know of the whole capture before it analyses parts.

`Plan` finds every row's frame number as the local engine gives it and the chunk the local
Analyzer sees it in: for files that follow each other in time (a ring buffer) from the sizes
and time ranges of the chunks they were read in; for files overlapping in time by replaying
the local engine's merge (packets.read.merged / iter_chunks, then coalesced) on their timestamps
alone, with its own code (merge.merge_in_time). `gates` combines
the split's per-file flow summaries into the local Analyzer's one cross-flow decision per chunk
(analyzer.ChunkAnalysis: may this chunk still pair QPs?) and the flows' order in qps.csv.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from roceview.packets.batch import Batch



NONE = -(1 << 62)           # no row: a chunk without an analyzed row


class Plan:
    """files: in the local engine's order (packets.read.time_ordered) with their first timestamps;
    metas: each file's summary (partition.read); times(): each file's timestamps, asked
    for only when the files overlap in time; warnings: each file's reading warnings, told (as
    the local engine tells them) once its last row is merged."""

    def __init__(self, files: list[str], starts: list, metas: list[dict], chunk_packets: int, warn,
                 times: Callable[[], list[np.ndarray]], replay: bool = False,
                 lengths: Callable[[int, int], list[int]] | None = None):
        self.n = [m["n"] for m in metas]
        if not replay and _one_after_another(starts, metas):
            self._in_sequence(metas, chunk_packets, warn)
        else:
            self._replayed(files, starts, times(), metas, chunk_packets, warn,
                           lengths or (lambda k, rows: _walked(files[k], rows)))

    def _in_sequence(self, metas: list[dict], chunk_packets: int, warn) -> None:
        """Files that follow each other in time (a ring buffer): the local engine reads each
        alone, its chunks passing through as read, joined by packets.read.coalesced; frames number
        the files' rows one file after another. Only the chunks' sizes and time ranges count."""
        from roceview.packets.read import coalesce

        self.span_rows = [chunk_packets] * len(metas) if len(metas) > 1 else [None]   # as _replayed
        offsets = np.cumsum([0] + self.n[:-1]).tolist()
        entries = (((n, o + at if at >= 0 else NONE), n, lo, hi)
                   for m, o in zip(metas, offsets) for n, lo, hi, at in m["chunks"] if n)
        groups = list(coalesce(entries, chunk_packets))
        sizes = [sum(n for n, _ in group) for group in groups]
        self.last_analyzed = np.array([max(at for _, at in group) for group in groups], np.int64)
        for m in metas:
            for message in m["warnings"]:
                warn(message)
        self._chunks(sizes)
        self.gidx = offsets
        back = [m["backwards"] for m in metas]
        examples = [o + r + 1 for o, (_, _, rows) in zip(offsets, back) for r in rows][:5]
        self.ts_backwards = (sum(b[0] for b in back), max((b[1] for b in back), default=0), examples)

    def _chunks(self, sizes: list[int]) -> None:
        """The chunks the local Analyzer is fed: their first frame indexes and their count."""
        self.chunk_starts = np.cumsum([0] + sizes[:-1]).astype(np.int64) if sizes else np.zeros(1, np.int64)
        self.n_chunks = len(sizes)

    def _replayed(self, files: list[str], starts: list, ts: list[np.ndarray], metas: list[dict],
                  chunk_packets: int, warn, lengths: Callable[[int, int], list[int]]) -> None:
        """Files overlapping in time: the local engine's merge replayed on their timestamps, each
        file cut as its reader cuts it: in chunks of `rows` records, but fewer where a chunk
        reaches the end of the reader's window (readers.MAP_WINDOW: 32 MB hold ~30 k frames of
        1 KB) or a pcapng block other than a packet; those cuts change which rows the merge hands
        on together. Read in chunk_packets the workers saw the cuts; in fewer, `lengths` finds them."""
        from roceview.packets.read import MIN_MERGE_CHUNK, coalesced

        self.last_analyzed = None                # found from the files' bits (last_analyzed)
        self.span_rows: list = [None] * len(files)
        sizes, files_in, rows_in, ts_in = [], [], [], []

        def open_file(k: int, beside: int):
            rows = max(min(MIN_MERGE_CHUNK, chunk_packets), chunk_packets // (beside + 1))
            cuts = [c[0] for c in metas[k]["chunks"]] if rows == chunk_packets else lengths(k, rows)
            cuts = _upto(cuts, len(ts[k]))                  # walked again: a file being written grew
            if sum(cuts) != len(ts[k]):                      # cannot be: the rows as they come
                cuts = [rows] * -(-len(ts[k]) // rows)
            # the rows the local engine observes the file's spans in (merge.FileSpans): as the
            # workers did when read alone, else by `rows` unless the reader cut chunks short
            self.span_rows[k] = rows if rows == chunk_packets or all(n == rows for n in cuts[:-1]) else cuts
            yield from _parts(ts[k], k, cuts)
            for message in metas[k]["warnings"]:
                warn(message)

        if len(files) == 1:
            merged = _parts(ts[0], 0, [c[0] for c in metas[0]["chunks"]])
        else:
            from roceview.packets.merge import merge_in_time

            never = -(1 << 62)
            merged = merge_in_time([never if s is None else s for s in starts], open_file, chunk_packets)
        for batch in coalesced(merged, chunk_packets):
            sizes.append(batch.n)
            files_in.append(batch.cols["_file"])
            rows_in.append(batch.cols["_row"])
            ts_in.append(batch.cols["ts_ns"])
        if len(files) == 1:
            for message in metas[0]["warnings"]:
                warn(message)
        self._chunks(sizes)
        self.gidx = self._positions(files_in, rows_in)
        self.ts_backwards = _backwards(np.concatenate(ts_in) if ts_in else np.zeros(0, np.int64))

    def _positions(self, files_in, rows_in) -> list:
        """Per file the frame index (from 0) of each row, or of its first when they follow each
        other (a ring buffer's files)."""
        if not files_in:
            return [0] * len(self.n)
        f, r = np.concatenate(files_in), np.concatenate(rows_in)
        # one stable sort by file (a radix sort of uint16), not a pass over every row per file:
        # 8,000 ring-buffer files of a TB would have been 8,000 passes over 7.8 G rows
        by_file = np.argsort(f, kind="stable")
        bounds = np.cumsum([0] + self.n)
        out = []
        for k, n in enumerate(self.n):
            at = by_file[bounds[k]:bounds[k + 1]]
            g = np.empty(n, np.int64)
            g[r[at]] = at
            out.append(int(g[0]) if n and g[-1] - g[0] == n - 1 else g if n else 0)
        return out


def _one_after_another(starts: list, metas: list[dict]) -> bool:
    """Whether each file's first packet comes after every packet of the file before it (as the
    workers read them: the first timestamps the driver ordered the files by are theirs): then
    the local engine opens each file once the one before is done, alone."""
    return bool(metas) and all(follows(starts, k, m) for k, m in enumerate(metas))


def follows(starts: list, k: int, meta: dict) -> bool:
    """_one_after_another for file k alone (plan_stream judges each file as it is read): read
    with rows, first at the time it was ordered by, every packet of it before the next file's
    first; a file alone is read as the local engine reads one file."""
    if meta["n"] == 0:
        return False
    if len(starts) == 1:
        return True
    if starts[k] is None or meta["first_ts"] != starts[k]:
        return False
    return k + 1 == len(starts) or (starts[k + 1] is not None and
                                    starts[k + 1] > max(hi for _, _, hi, _ in meta["chunks"]))


def _parts(ts: np.ndarray, k: int, cuts: list[int]):
    """File k's timestamps in the reader's chunks, of `cuts` rows (with the file and row of each)."""
    lo = 0
    for n in cuts:
        part = ts[lo:lo + n]
        yield Batch(len(part), {"ts_ns": part, "_file": np.full(len(part), k, np.uint16),
                                "_row": np.arange(lo, lo + len(part), dtype=np.int64)})
        lo += n


def _upto(cuts: list[int], n: int) -> list[int]:
    """The cuts of a file's first n rows: a capture still being written had n when read."""
    out, total = [], 0
    for c in cuts:
        if total >= n:
            break
        out.append(min(c, n - total))
        total += out[-1]
    return out


def _walked(path: str, rows: int) -> list[int]:
    """The lengths of the chunks the reader cuts `path` in, read in chunks of `rows` records:
    a walk over the records' headers (~5 ms for 77 MB), nothing decoded. Its warnings are the
    workers' to tell."""
    from roceview.capture.readers import read_records

    return [chunk.n for chunk in read_records(path, rows, lambda m: None, release_lag=0)]


def _backwards(ts: np.ndarray) -> tuple[int, int, list]:
    """FactCollector._timestamps over the merged capture: rows stamped before the row before."""
    from roceview.diagnose.facts import steps_back

    if len(ts) < 2:
        return 0, 0, []
    back, drop = steps_back(ts, None)
    return len(back), drop, (back[:5] + 1).tolist()


def frames(gidx, rows) -> np.ndarray:
    """Frame indexes (from 0) of a file's rows, given its Plan.gidx entry."""
    rows = np.asarray(rows, np.int64)
    return rows + gidx if np.isscalar(gidx) else np.asarray(gidx)[rows]


def last_analyzed(plan: "Plan", analyzed) -> np.ndarray:
    """Per chunk the frame index of its last analyzed row (NONE where none): a plan of files
    in sequence knows it from their chunks (each of its chunks is whole chunks read); else from
    each file's bit per row (RoCE with an opcode and a dest QP: Analyzer._roce_rows)."""
    if plan.last_analyzed is not None:
        return plan.last_analyzed
    analyzed = analyzed() if callable(analyzed) else analyzed     # fetched only here
    seen = np.zeros(sum(plan.n), bool)
    for k, bits in enumerate(analyzed):
        seen[frames(plan.gidx[k], np.flatnonzero(np.unpackbits(bits, count=plan.n[k])))] = True
    at = np.flatnonzero(seen)
    ends = np.r_[plan.chunk_starts[1:], len(seen)] if plan.n_chunks else np.zeros(0, np.int64)
    pos = np.searchsorted(at, ends) - 1
    last = np.where(pos >= 0, at[np.maximum(pos, 0)] if len(at) else 0, NONE)
    return np.where(last >= plan.chunk_starts[:len(last)], last, NONE)


def gates(plan: "Plan", flows: list[dict], analyzed) -> tuple[np.ndarray, list[str]]:
    """(per chunk whether the local Analyzer pairs QPs in it, the flow names in qps.csv order)
    from the files' flow summaries (partition._FlowFirsts); analyzed: each file's bit
    per row (partition.analyzed_bits), or a callable giving them when asked."""
    n_chunks = max(plan.n_chunks, 1)
    last = np.full(n_chunks, NONE, np.int64)
    last[:plan.n_chunks] = last_analyzed(plan, analyzed)
    key, best = fold_flows(plan.gidx, flows)
    if not len(key):
        return np.zeros(n_chunks, bool), []
    order = np.argsort(best[0], kind="stable")
    return pairing_open(plan.chunk_starts, last, best), _names(key[order])


def fold_flows(gidx: list, flows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The files' flows, one row each: (their (src 2 words, dst 2 words, qp) keys, sorted;
    their first frame index overall and in each PSN space, int64 max where none)."""
    have = [k for k, f in enumerate(flows) if len(f["qp"])]
    if not have:
        return np.zeros((0, 5), np.uint64), np.zeros((4, 0), np.int64)
    src, dst = (np.concatenate([flows[k][c] for k in have]).astype(np.uint64) for c in ("src", "dst"))
    qp = np.concatenate([flows[k]["qp"] for k in have]).astype(np.uint64)
    first = np.concatenate([np.where(flows[k]["first"] >= 0, frames(gidx[k], np.maximum(flows[k]["first"], 0)),
                                     np.iinfo(np.int64).max) for k in have], axis=1)
    key = np.ascontiguousarray(np.column_stack([src, dst, qp]))
    _, one, inv = np.unique(key.view(np.dtype((np.void, 40))).ravel(), return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    best = np.full((4, len(one)), np.iinfo(np.int64).max, np.int64)
    for k in range(4):
        np.minimum.at(best[k], inv, first[k])
    return key[one], best


def pairing_open(chunk_starts: np.ndarray, last: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Per chunk Analyzer.pairing_open: its last analyzed row (`last`) within PAIRING_HORIZON
    of the newest flow's first row so far (`best`: fold_flows')."""
    from roceview.analysis.chunk_psn import NO_NEW_FLOW, pairing_window_open

    chunk = np.searchsorted(chunk_starts, best, side="right") - 1
    # first_idx: the flow's first row in (PSN space, frame) order within its first chunk
    first_idx = np.full(best.shape[1], np.iinfo(np.int64).max, np.int64)
    for space in (3, 2, 1):
        in_first = (best[space] != np.iinfo(np.int64).max) & (chunk[space] == chunk[0])
        first_idx = np.where(in_first, best[space], first_idx)
    newest = np.full(len(last), NO_NEW_FLOW, np.int64)          # Analyzer.last_new_flow_idx
    np.maximum.at(newest, chunk[0], first_idx)
    newest = np.maximum.accumulate(newest)
    return pairing_window_open(last, newest)


def _names(keys: np.ndarray) -> list[str]:
    """build.flow_names for flows given as (src 2 words, dst 2 words, qp) rows."""
    from roceview.packets.names import flow_name, format_address

    cache: dict = {}

    def name(words) -> str:
        t = tuple(words.tolist())
        if t not in cache:
            cache[t] = format_address(words)
        return cache[t]
    return [flow_name(name(k[0:2]), name(k[2:4]), k[4]) for k in keys]
