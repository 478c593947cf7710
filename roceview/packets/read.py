"""The packets table: capture files -> Batches (numpy) -> pandas DataFrames."""
from __future__ import annotations

import sys
from typing import Callable, Iterable, Iterator

import numpy as np

from roceview.packets.batch import Batch
from roceview.capture.readers import read_records
from roceview.capture.source import expand_paths
from roceview.packets.decode import decode_chunk, port_table

DEFAULT_CHUNK = 1 << 16
MIN_MERGE_CHUNK = 4096      # files overlapping in time: each read in smaller chunks, not below this


def _stderr_warn(message: str) -> None:
    print(f"roceview: warning: {message}", file=sys.stderr)


def iter_chunks(paths, roce_ports: Iterable[int] = (), chunk_packets: int = DEFAULT_CHUNK,
                warn: Callable[[str], None] | None = None, walk_ahead: bool = False, projection: str | None = None):
    """Yield (RecordChunk, Batch) pairs; the chunk's raw bytes are valid until the next.
    projection: decode only the declared columns a consumer reads (decode.decode_chunk)."""
    warn = warn or _stderr_warn
    ports = port_table(roce_ports)
    frame = 1
    files, starts = time_ordered(expand_paths(paths))
    interfaces, latest = Interfaces(), None
    for index, path in enumerate(files):
        _warn_overlap(path, starts[index], latest, warn)
        records = read_records(path, chunk_packets, warn, iface_base=interfaces.open(index))
        for chunk in _walk_ahead(records) if walk_ahead else records:
            interfaces.seen(index, chunk.iface)     # file after file: nothing is ever moved
            if chunk.n:
                top = int(chunk.ts.max())
                latest = top if latest is None else max(latest, top)
            batch = decode_chunk(chunk, ports, frame, projection)
            if len(files) > 1:
                batch.cols["_file"] = np.full(batch.n, index, np.uint16)
            frame += chunk.n
            yield chunk, batch


def iter_batches(paths, roce_ports: Iterable[int] = (), chunk_packets: int = DEFAULT_CHUNK,
                 warn: Callable[[str], None] | None = None, prefetch: bool = True,
                 projection: str | None = None, display_filter=None) -> Iterator[Batch]:
    """The packets table in chunks of numpy columns (see roceview.packets.batch).

    With `prefetch`, reading starts at once on a worker thread (the caller can import or set
    up meanwhile) and the next chunk is read and decoded there while the caller works on the
    current one (the decode kernels release the GIL), so analysis and decoding use both cores.
    display_filter: a roceview.filter.DisplayFilter; only the rows it matches are yielded,
    selected on the worker thread too (the selection copies every column: done beside the
    caller's work, not before it). Its columns must be in `projection` (projection_for)."""
    batches = coalesced(_batches(paths, roce_ports, chunk_packets, warn, prefetch, projection), chunk_packets)
    if display_filter is not None:
        batches = map(display_filter.select, batches)
    return Prefetched(batches) if prefetch else batches


def _batches(paths, roce_ports, chunk_packets: int, warn, walk_ahead: bool, projection) -> Iterator[Batch]:
    """A generator, so the files are looked at (first packets) on the reading thread."""
    files, starts = time_ordered(expand_paths(paths))
    yield from (batch for _, batch in decoded(files, starts, roce_ports, chunk_packets, warn, walk_ahead=walk_ahead,
                                              projection=projection))


def decoded(files: list[str], starts: list, roce_ports: Iterable[int], chunk_packets: int, warn, *,
            walk_ahead: bool = False, projection: str | None = None, tag=None) -> Iterator[tuple]:
    """The read pipeline every reader of files shares (the local engine, the TUI): `files` in
    the order time_ordered gives, with their first timestamps, as (RecordChunk, Batch) pairs in
    capture order. Several files (stdin not among them) are merged in time, as mergecap does:
    their rows come from several chunks, so the pair's chunk is None and tag(chunk, batch), if
    given, notes on each file's batch where its rows' records are (merged). Otherwise the files
    are read one after the other, each batch with its chunk."""
    if len(files) > 1 and "-" not in files:
        yield from ((None, batch) for batch in merged(files, starts, port_table(roce_ports), chunk_packets,
                                                       warn or _stderr_warn, walk_ahead, projection, tag=tag))
    else:
        yield from iter_chunks(files, roce_ports, chunk_packets, warn, walk_ahead=walk_ahead, projection=projection)


def merged(files, starts, ports, chunk_packets: int, warn, walk_ahead: bool, projection,
            tag=None) -> Iterator[Batch]:
    """Several files merged in time order (roceview.packets.merge): a ring buffer's files one after the
    other, files that overlap in time interleaved. tag(chunk, batch), if given, adds columns of
    each file's batch from its records before the merge (the TUI: where each row's bytes are)."""
    from roceview.packets.merge import FileSpans, merge_in_time

    interfaces, spans = Interfaces(), FileSpans(len(files))
    allow_open_files(len(files))

    def open_file(k: int, beside: int) -> Iterator[Batch]:
        """A file opened beside others: smaller chunks, no reading ahead on a thread of its own,
        its mapped pages dropped right behind the walk (memory: about one chunk per open file)."""
        base = interfaces.open(k)
        rows = max(min(MIN_MERGE_CHUNK, chunk_packets), chunk_packets // (beside + 1))
        records = read_records(files[k], rows, warn, iface_base=base, release_lag=0 if beside else None)
        for chunk in _walk_ahead(records) if walk_ahead and not beside else records:
            batch = decode_chunk(chunk, ports, 1, projection)
            batch.cols["interface"] = interfaces.seen(k, batch.cols["interface"])
            batch.cols["_file"] = np.full(batch.n, k, np.uint16)
            if tag is not None:
                tag(chunk, batch)
            spans.observe(k, batch)
            yield batch

    never = -(1 << 62)                               # an empty or unreadable file: opened first
    yield from merge_in_time([never if s is None else s for s in starts], open_file, chunk_packets)
    for message in spans.disagreements(files):       # unrelated captures merged: say so, suggest --each
        warn(message)


class Interfaces:
    """Interface numbers of several files stay distinct, numbered as file after file: a file's
    start after the highest number the files opened before it have shown. A file that shows a
    new interface after a later file was opened (overlapping files, an interface block late in
    a pcapng) has it renumbered past every number given so far."""

    def __init__(self):
        self.next = 0
        self.ceiling: dict[int, int] = {}           # file -> the base of the file opened after it
        self.moved: dict[tuple[int, int], int] = {}
        self.last: int | None = None

    def open(self, k: int) -> int:
        self._seal()                                # the file opened before ends where this one starts
        base, self.next = self.next, self.next + 1
        self.last = k
        return base

    def _seal(self) -> None:
        """The last file opened keeps the numbers up to here; anything it shows later moves."""
        if self.last is not None and self.last not in self.ceiling:
            self.ceiling[self.last] = self.next

    def seen(self, k: int, iface: np.ndarray) -> np.ndarray:
        top = int(iface.max(initial=0))
        ceiling = self.ceiling.get(k)
        if ceiling is None or top < ceiling:
            self.next = max(self.next, top + 1)
            return iface
        iface = iface.copy()
        for value in np.unique(iface[iface >= ceiling]).tolist():
            if (k, value) not in self.moved:
                self._seal()                        # a moved number must not fall in the last file's range
                self.moved[(k, value)], self.next = self.next, self.next + 1
            iface[iface == value] = self.moved[(k, value)]
        return iface


def allow_open_files(files: int) -> None:
    """Files that overlap in time are open together (a file and its map each): raise the soft
    limit on open files toward the hard one when a directory holds many (best effort)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 2 * files + 64
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard),
                                                        hard))
    except (ImportError, OSError, ValueError):
        pass


def coalesced(batches: Iterator[Batch], target: int) -> Iterator[Batch]:
    """Small batches (the ends of files: a ring buffer of many small files) joined, in order,
    into batches of up to `target` rows. Each batch costs the analysis ~3 ms whatever its size
    (docs/performance.md).
    Only batches that follow each other in time are joined (not across a step back in time:
    files given with stdin are read one after the other, not merged), so results do not
    depend on the chunk size."""
    for group in coalesce(((batch, batch.n, *_time_range(batch)) for batch in batches), target):
        yield Batch.concat(group) if len(group) > 1 else group[0]


def _time_range(batch: Batch) -> tuple[int | None, int | None]:
    ts = batch.cols.get("ts_ns")
    return (int(ts.min()), int(ts.max())) if ts is not None and len(ts) else (None, None)


def coalesce(entries: Iterable[tuple], target: int) -> Iterator[list]:
    """coalesced's rule on summaries: entries (item, rows, first ts, last ts; None without
    timestamps) grouped as their batches are joined. The Dask plan (engines.dask.plan.Plan) applies
    it to the chunks' time ranges alone."""
    joining = Coalescer(target)
    for entry in entries:
        yield from joining.push(*entry)
    yield from joining.flush()


class Coalescer:
    """coalesce's rule entry by entry (push), for a plan made as the files' summaries come
    (engines.dask.plan_stream): the groups each entry closes, then (flush) the last."""

    def __init__(self, target: int):
        self.target, self.pending, self.total, self.last_ts = target, [], 0, None

    def push(self, item, n: int, first, last) -> list[list]:
        out = []
        if self.pending and (self.total + n > self.target or first is None or self.last_ts is None
                             or first < self.last_ts):
            out.append(self.pending)
            self.pending, self.total = [], 0
        if n >= self.target // 2 and not self.pending:
            out.append([item])
            return out
        self.pending.append(item)
        self.total += n
        self.last_ts = last if first is not None else None
        return out

    def flush(self) -> list[list]:
        out, self.pending, self.total = ([self.pending] if self.pending else []), [], 0
        return out


_DONE = object()


def _walk_ahead(records: Iterator) -> Iterator:
    """A reader's chunks stay valid after the next is read: walk (and for stdin and gzip read
    and inflate) the next chunk on another thread while this one is decoded (full 1 KB
    frames: the walk waits on memory for each record header; from a pipe 0.81 -> 0.65 s).
    The first chunk is read here, so a file that cannot be read fails before a thread starts."""
    first = next(records, None)
    if first is None:
        return
    yield first
    yield from Prefetched(records)


class Prefetched:
    """Items of `source` produced on a worker thread, up to `depth` ahead of the consumer; the
    worker starts at once. An exception in the worker is raised to the consumer; a consumer
    that stops early (or drops the iterator) stops the worker."""

    def __init__(self, source: Iterator, depth: int = 2):
        import queue
        import threading

        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._ended = False
        threading.Thread(target=self._produce, args=(source, self._queue, self._stop), name="roceview-read",
                         daemon=True).start()

    @staticmethod
    def _produce(source, q, stop) -> None:         # no reference to self: dropping it stops this
        import queue

        try:
            for item in source:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, re-raised there
            q.put(exc)

    def __iter__(self):
        return self

    def __next__(self):
        if self._ended:
            raise StopIteration
        item = self._queue.get()
        if item is _DONE or isinstance(item, BaseException):
            self.close()
            if item is _DONE:
                raise StopIteration
            raise item
        return item

    def close(self) -> None:
        self._ended = True
        self._stop.set()

    __del__ = close


def projection_for(base: str | None, columns) -> str | None:
    """The projection (consts.PROJECTIONS) to decode for a consumer of projection `base` that
    also reads `columns` (Batch names, e.g. a display filter's DisplayFilter.fields): `base`
    when it decodes them all, else every column. The kernels are compiled per projection
    (kernels/fieldgen.py), so a projection cannot grow by a column at run time; the columns not
    taken from a header field (frame, lengths, addresses, proto, ICRC verdict, ...) are in
    every projection."""
    if base is None:
        return None
    from roceview.kernels.consts import PROJECTIONS
    from roceview.kernels.fieldgen import column_layout

    declared = column_layout(None)
    wanted = {c[1:] if c in ("_src_mac", "_dst_mac") else c for c in columns}
    return base if {c for c in wanted if c in declared} <= set(PROJECTIONS[base]) else None


def _first_ts(path: str) -> int:
    try:
        for chunk in read_records(path, 1, lambda m: None):
            return int(chunk.ts[0])
    except Exception:  # noqa: BLE001 - a bad file reports its own error when read for real
        return -1
    return -1


def time_ordered(files: list[str]) -> tuple[list[str], list[int | None]]:
    """Several files (a ring buffer directory): read in order of their first packet; with
    their first timestamps (None where unknown: stdin, an empty or unreadable file)."""
    if len(files) < 2 or "-" in files:
        return files, [None] * len(files)
    starts = {f: _first_ts(f) for f in files}
    ordered = sorted(files, key=lambda f: (starts[f], f))
    return ordered, [starts[f] if starts[f] >= 0 else None for f in ordered]


def _utc(ns: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d} UTC"


def _warn_overlap(path: str, start: int | None, latest: int | None, warn) -> None:
    """iter_chunks (dissect -V) lists files one after the other: say so when one starts before
    the files listed before it end (two mirror ports' captures of the same minutes)."""
    if start is None or latest is None or start >= latest:
        return
    warn(f"{path} starts at {_utc(start)}, before the files listed before it end ({_utc(latest)}): "
         "dissect -V lists files one after the other, while analyze, convert and dissect without -V "
         "interleave them by time, so frame numbers here differ from theirs")
