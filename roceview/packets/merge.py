"""Several capture files merged into one packets table in time order (as mergecap does).

A ring buffer's files follow each other: only one is open at a time and its batches pass
through as they are. Files that overlap in time (two mirror ports) are interleaved: a file is
opened once the open files have reached its first packet, and each open file hands on the rows
no other file can still precede (`_bounds`), so memory holds about one batch per open file
(read.merged reads a file opened beside n others in chunks of 1/(n+1) the size). A file's own
order is kept: rows are merged by the running maximum of their file's timestamps (a packet
stamped earlier than its predecessor stays behind it). Equal times keep the files' order
(first packet, then name). Frames are numbered in the merged order.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from roceview.packets.batch import Batch
from roceview.units import plural


class _Source:
    """One file's batches, read on demand, each with its merge key (the running maximum of the
    file's timestamps, so non-decreasing: what is handed on is always a prefix)."""

    def __init__(self, batches: Iterator[Batch]):
        self.batches, self.pending, self.high, self.done = batches, [], None, False
        self.pull()

    def pull(self) -> None:
        """Read the file's next batch with rows (or find the file's end)."""
        for batch in self.batches:
            if batch.n:
                key = np.maximum.accumulate(batch.cols["ts_ns"])
                if self.high is not None:
                    np.maximum(key, self.high, out=key)
                self.pending.append((batch, key))
                self.high = int(key[-1])
                return
        self.done = True

    def take_until(self, bound: int | None) -> list[tuple[Batch, np.ndarray]]:
        """The pending rows whose key is at most `bound` (all when None): a prefix."""
        if bound is None:
            out, self.pending = self.pending, []
            return out
        out = []
        while self.pending:
            batch, key = self.pending[0]
            cut = int(np.searchsorted(key, bound, side="right"))
            if cut == len(key):
                out.append(self.pending.pop(0))
                continue
            if cut:
                out.append((batch.select(slice(0, cut)), key[:cut]))          # views
                self.pending[0] = (batch.select(slice(cut, batch.n)), key[cut:])
            break
        return out


def merge_in_time(starts: list[int], open_file: Callable[[int, int], Iterator[Batch]],
                  chunk_rows: int) -> Iterator[Batch]:
    """Batches of files 0..n-1 (ordered by `starts`, each file's first timestamp) merged in
    time; open_file(k, n) gives file k's batches, opened while n files are being read (a
    reader can then read smaller chunks). Merged batches hold at most chunk_rows rows."""
    active: list[_Source] = []
    following, frame = 0, 1
    while True:
        live = [s for s in active if not s.done]
        reached = min((s.high for s in live), default=None)
        if following < len(starts) and (reached is None or starts[following] <= reached):
            active.append(_Source(open_file(following, len(live))))   # its first packet is due
            following += 1
            continue
        due = starts[following] if following < len(starts) else None
        parts = [s.take_until(b) for s, b in zip(active, _bounds(active, due))]
        for batch in _in_order(parts, chunk_rows):
            batch.cols["frame"] = np.arange(frame, frame + batch.n, dtype=np.int64)
            frame += batch.n
            yield batch
        if not live:
            return                                             # every file read: all handed on
        min(live, key=lambda s: s.high).pull()                 # the file holding the others back
        active = [s for s in active if s.pending or not s.done]


def _bounds(active: list[_Source], due: int | None) -> list[int | None]:
    """Per open file (in file order), the last key it may hand on now: no file still being
    read can bring a row that goes before it (at equal keys an earlier file's rows come first,
    a later file's after), nor can the next file to open (it comes after every open one).
    Prefix and suffix minima: one pass each way however many files are open."""
    inf = 1 << 63
    n = len(active)
    before, after = [inf] * (n + 1), [inf] * (n + 1)
    for i, s in enumerate(active):                       # earlier files: strictly below their high
        before[i + 1] = min(before[i], s.high - 1 if not s.done else inf)
    for i in range(n - 1, -1, -1):                       # later files: up to their high
        s = active[i]
        after[i] = min(after[i + 1], s.high if not s.done else inf)
    cap = inf if due is None else due
    out = []
    for i in range(n):
        b = min(cap, before[i], after[i + 1])
        out.append(None if b == inf else b)
    return out


def _in_order(parts: list[list[tuple[Batch, np.ndarray]]], chunk_rows: int) -> list[Batch]:
    """One file's rows as they are; several files' rows by key (a stable sort: equal keys in
    file order, then each file's own order), in batches of at most chunk_rows rows."""
    parts = [p for p in parts if p]
    if not parts:
        return []
    if len(parts) == 1:
        return [batch for batch, _ in parts[0]]
    joined = Batch.concat([batch for p in parts for batch, _ in p])
    order = np.argsort(np.concatenate([key for p in parts for _, key in p]), kind="stable")
    return [joined.select(order[k:k + chunk_rows]) for k in range(0, len(order), chunk_rows)]


SAMPLE_STEP = 8                          # every 8th PSN-carrying row: spans cheaply (~1 us a batch)
PSN_MOD, PSN_SLACK = 1 << 24, 1 << 16    # 24-bit PSNs (IBTA 9.7.1); copies of one flow stay this close
FAR_APART_NS = 365 * 86_400 * 10**9      # files a year apart are not one capture (a clock at 1970)


class FileSpans:
    """What each merged file shows, to tell files that belong together (a ring buffer, two
    mirror ports of the same minutes) from unrelated captures merged by mistake: the time span
    of every file and, per flow (source, destination, destination QP; requests and responses
    apart, they are two PSN spaces) in a sample of its rows, the span of time and of PSNs."""

    def __init__(self, n_files: int):
        self.first = np.full(n_files, np.iinfo(np.int64).max, np.int64)
        self.last = np.full(n_files, np.iinfo(np.int64).min, np.int64)
        self.parts: list[tuple] = []

    def observe(self, k: int, batch: Batch) -> None:
        if not batch.n:
            return
        ts = batch.cols["ts_ns"]
        self.first[k], self.last[k] = min(self.first[k], ts.min()), max(self.last[k], ts.max())
        if "psn" not in batch.cols or "_src_addr" not in batch.cols:
            return
        rows = np.flatnonzero(batch.mask("psn") & batch.mask("_src_addr"))[::SAMPLE_STEP]
        opcode = batch.cols["opcode"][rows].astype(np.int64)
        rows = rows[opcode != 0x81]                                   # CNPs carry no sequence
        if not len(rows):
            return
        key = _flow_key(batch, rows)
        psn, t = batch.cols["psn"][rows].astype(np.int64), ts[rows]
        order = np.lexsort((t, key))
        key, psn, t, rows = key[order], psn[order], t[order], rows[order]
        start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        self.parts.append((np.full(len(start), k, np.int64), key[start], np.minimum.reduceat(t, start),
                           np.maximum.reduceat(t, start), np.minimum.reduceat(psn, start),
                           np.maximum.reduceat(psn, start), batch.cols["_src_addr"][rows[start]],
                           batch.cols["_dst_addr"][rows[start]], batch.cols["dest_qp"][rows[start]]))
        if len(self.parts) > 64:
            self.parts = [self.folded()]

    def folded(self) -> tuple:
        """The parts as one: per (file, flow) the widest spans."""
        cols = [np.concatenate(c) for c in zip(*self.parts)]
        file, key = cols[0], cols[1]
        order = np.lexsort((key, file))
        cols = [c[order] for c in cols]
        start = np.flatnonzero(np.r_[True, (cols[0][1:] != cols[0][:-1]) | (cols[1][1:] != cols[1][:-1])])
        reduce = (None, None, np.minimum, np.maximum, np.minimum, np.maximum, None, None, None)
        return tuple(c[start] if f is None else f.reduceat(c, start) for c, f in zip(cols, reduce))

    def disagreements(self, files: list[str]) -> list[str]:
        """One sentence per pair of files that cannot be one capture, suggesting --each."""
        out = _given_twice(files)
        seen = np.flatnonzero(self.first <= self.last)
        order = seen[np.argsort(self.first[seen], kind="stable")]
        for a, b in zip(order[:-1], order[1:]):
            if self.first[b] - self.last[a] > FAR_APART_NS:
                years = (self.first[b] - self.last[a]) / (365.25 * 86_400 * 10**9)
                out.append(f"{files[a]} ends {plural(round(years), 'year')} before {files[b]} starts: merged in time they "
                           "make one capture spanning both; to analyze each file on its own use analyze --each")
        return out + self._psn_disagreements(files) if self.parts else out

    def _psn_disagreements(self, files: list[str]) -> list[str]:
        """Flows seen in two files over the same time with PSN spans too far apart to be one
        sequence (a span wider than half the PSN space may have wrapped: never counted)."""
        file, key, t0, t1, p0, p1, src, dst, qp = self.folded()
        order = np.lexsort((p0, key))
        i, j = order[:-1], order[1:]
        gap = np.minimum(p0[j] - p1[i], PSN_MOD - (np.maximum(p1[i], p1[j]) - p0[i]))
        bad = ((key[i] == key[j]) & (file[i] != file[j]) & (np.maximum(t0[i], t0[j]) <= np.minimum(t1[i], t1[j]))
               & (p1[i] - p0[i] < PSN_MOD // 2) & (p1[j] - p0[j] < PSN_MOD // 2) & (gap > PSN_SLACK))
        out, pairs = [], {}
        for x, y in zip(i[bad].tolist(), j[bad].tolist()):
            pairs.setdefault(tuple(sorted((int(file[x]), int(file[y])))), []).append((x, y))
        for (fa, fb), flows in pairs.items():
            x, y = flows[0] if file[flows[0][0]] == fa else flows[0][::-1]
            more = f" (and {plural(len(flows) - 1, 'more flow')})" if len(flows) > 1 else ""
            out.append(f"{files[fa]} and {files[fb]} overlap in time but disagree: flow {_flow_name(src[x], dst[x], qp[x])} "
                       f"has PSNs {p0[x]:,}-{p1[x]:,} in one and {p0[y]:,}-{p1[y]:,} in the other at the same time, "
                       f"which cannot be one sequence{more}; if they are separate captures use analyze --each")
        return out


def _given_twice(files: list[str]) -> list[str]:
    """A file given twice (or given and inside a directory given) merges with itself: every
    packet twice at the same time (the analysis counts a RoCE frame once, roceview.analysis.copies;
    the frame totals count both)."""
    import os

    out, first = [], {}
    for path in files:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue                                                 # '-' or gone: nothing to compare
        if (st.st_dev, st.st_ino) in first:
            seen = first[st.st_dev, st.st_ino]
            what = f"{path} is given twice" if seen == path else f"{path} and {seen} are the same file"
            out.append(f"{what}: merged, every frame is read twice (each RoCE frame's second capture is "
                       "recognised and counted once, the frame totals count both); give it once")
        first.setdefault((st.st_dev, st.st_ino), path)
    return out


def _flow_key(batch: Batch, rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of (source, destination, destination QP, response or request) per row."""
    src = np.ascontiguousarray(batch.cols["_src_addr"][rows]).view(np.uint64).reshape(len(rows), -1)
    dst = np.ascontiguousarray(batch.cols["_dst_addr"][rows]).view(np.uint64).reshape(len(rows), -1)
    response = np.isin(batch.cols["opcode"][rows] & 0x1F, (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12))  # IBTA 9.2.1
    parts = [*src.T, *dst.T, batch.cols["dest_qp"][rows].astype(np.uint64), response.astype(np.uint64)]
    key = np.zeros(len(rows), np.uint64)
    with np.errstate(over="ignore"):
        for n, part in enumerate(parts):
            key = (key ^ part) * np.uint64(0x9E3779B97F4A7C15 + 2 * n)
    return key.view(np.int64)


def _flow_name(src, dst, qp) -> str:
    from roceview.packets.names import address_text, flow_name

    return flow_name(address_text(bytes(src)), address_text(bytes(dst)), qp)
