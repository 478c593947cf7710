"""`analyze --engine dask`: the connection, errors, and the exact driver-side path.

The usual run analyses on the workers, partitioned by connection (run.py). This module
holds what both paths share (connect, result_of, decode_file) and `DaskBatches`, the path
taken when a partitioned run cannot promise the local result (partition_merge.exact: an event
budget reached, rows held back for path-MTU evidence, a timeline that cannot be told; and for
a Parquet dataset, packets=True or a display filter): workers decode whole files (the analysis
projection's columns, decode.decode_chunk) in parallel; this process merges the decoded chunks
in time order with the local engine's own merge (roceview.packets.merge, as packets.read.merged does: same
file order, interface numbers, chunk sizes, frame numbers) and feeds them to the unchanged
Analyzer and FactCollector; the diagnoser runs once. Needs `pip install 'roceview[dask]'`.
"""
from __future__ import annotations

import uuid
from typing import Callable, Iterator

import numpy as np

from roceview.packets.batch import Batch
from roceview.errors import BadInput

INSTALL = "--engine dask needs Dask: pip install 'roceview[dask]'"
RETRIES = 2                  # a task whose worker died is run again elsewhere this many times
CONNECT_TIMEOUT = "10s"     # to the scheduler, then to its first worker; connect(timeout=) overrides
WINDOW = 1 << 20             # frames of a Parquet dataset read per task


def decode_file(path: str, roce_ports: tuple, chunk_packets: int, projection: str | None) -> dict:
    """On a worker: one file's decoded chunks (interface numbers from 0; the driver adds the
    file's base) and the warnings its reading gave, in order. Plain dicts of numpy arrays:
    they travel as pickle-5 buffers, no per-packet objects. One decode thread, as the
    partitioned run's tasks (partition._one_decode_thread: a core per task), in a worker
    that keeps freed memory as theirs: on a worker started with Dask's defaults
    (MALLOC_TRIM_THRESHOLD_=65536) the same decode took about 3x as long (docs/performance.md)."""
    from roceview.capture.readers import read_records
    from roceview.packets.wire import pack
    from roceview.engines.dask.partition import _keep_freed_memory, _one_decode_thread
    from roceview.packets.decode import decode_chunk, port_table

    _keep_freed_memory()
    warnings: list[str] = []
    ports = port_table(roce_ports)
    with _one_decode_thread():
        chunks = [decode_chunk(chunk, ports, 1, projection)
                  for chunk in read_records(path, chunk_packets, warnings.append, release_lag=0)]
    return {"chunks": pack(chunks), "warnings": warnings}


def expand(paths) -> list[str]:
    """The capture files of `paths`, or one Parquet dataset directory (convert --partition-by)."""
    from roceview.capture.source import expand_paths
    from roceview.packets.parquet import is_dataset

    given = [str(p) for p in ([paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else paths)]
    datasets = [p for p in given if p != "-" and is_dataset(p)]
    if not datasets:
        return expand_paths(given)
    if len(given) > 1:
        raise BadInput("--engine dask reads one Parquet dataset or capture files, not both")
    return datasets


# Our own LocalCluster's housekeeping, off where nobody reads it: the workers' statistical
# profiler (a dashboard view) woke each worker's event loop every 10 ms to walk the task's
# stack, and the event-loop health tick every 20 ms; each wake-up takes the GIL from the
# task and, with a worker per core, a core from the other worker (strace: about twice the futex
# and epoll_wait calls with them, docs/performance.md). GIL polling (only where gilknocker is
# installed) polls every 1 ms.
QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.gil.enabled": False}


def local_cluster(n_workers: int | None = None):
    """A LocalCluster sized to this machine (or of n_workers): a worker process per core, one
    thread each, with QUIET housekeeping (its workers take the configuration they are made
    with, so it holds for this cluster only)."""
    try:
        import dask
        from dask.distributed import LocalCluster
    except ImportError:
        raise BadInput(INSTALL) from None
    import logging
    import os

    # stderr keeps roceview's one-line contract: a task's error (a file that is not a capture)
    # is told once by result_of; at ERROR the workers logged it too, a traceback per attempt
    environ = dict(os.environ)
    try:
        with dask.config.set({**QUIET, "distributed.nanny.pre-spawn-environ": _malloc_environ(dask)}):
            return LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1, dashboard_address=":0",
                                silence_logs=logging.CRITICAL)
    finally:        # the nannies set their workers' environment in ours and leave it there
        _restore(os.environ, environ)   # (a nanny restarting a lost worker sets it again;
        # a worker added by scale() would take Dask's defaults: roceview never scales its cluster)


def _restore(environ, was: dict) -> None:
    """Put back the variables changed since `was`, touching no other (threads run)."""
    for name in [k for k in environ if k not in was]:
        del environ[name]
    for name, value in was.items():
        if environ.get(name) != value:
            environ[name] = value


def _malloc_environ(dask) -> dict:
    """Dask's environment for a new worker process, with glibc told from its start what the
    CLI's process tells it (capture.memory): keep freed blocks (Dask's own default,
    MALLOC_TRIM_THRESHOLD_=65536, hands them back; keep_freed_memory undoes that at the first
    task) and one malloc arena. Without the one arena the task thread allocates from an arena
    of its own, whose 64 MB heaps glibc unmaps once empty, so a warm run faults those pages in
    again each run (docs/performance.md). glibc reads these at process start only, so only our
    own workers, spawned with them, get them."""
    from roceview.capture.memory import MMAP_THRESHOLD_MAX, TRIM_THRESHOLD

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environ.update({"MALLOC_ARENA_MAX": 1, "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD,
                    "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD_MAX})
    return environ


def close_quietly(*closing) -> None:
    """Close each client or cluster given (None: skipped); a failure to (a worker already gone,
    a broken connection) must not replace the run's own outcome or error."""
    for thing in closing:
        if thing is not None:
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - shutting down: nothing left to do
                pass


def connect(scheduler: str | None, timeout: float | None = None):
    """A Client of the scheduler at `scheduler`, or of a LocalCluster sized to this machine.
    timeout: seconds to wait for the scheduler to answer, and again for its first worker
    (default CONNECT_TIMEOUT). The service at `scheduler` is first asked whether it is a Dask
    scheduler (handshake.check: distributed's own connect crashes on a stranger's bytes, or
    waits forever on its silence); whatever distributed still raises is one line (BadInput)."""
    try:
        from dask.distributed import Client
        from dask.utils import parse_timedelta
    except ImportError:
        raise BadInput(INSTALL) from None
    from roceview.engines.dask.handshake import check, checked_timeout

    seconds = checked_timeout(parse_timedelta(CONNECT_TIMEOUT) if timeout is None else timeout)
    if scheduler is None:
        cluster = local_cluster()
        return Client(cluster), cluster
    if isinstance(scheduler, str):     # else an object Client takes itself (a cluster): nothing to ask
        check(scheduler, seconds)
    try:
        client = Client(scheduler, timeout=seconds)
    except Exception as exc:  # noqa: BLE001 - whatever connecting raises (the scheduler gone since the check)
        close_quietly(_half_made(exc, Client))
        raise _refused(scheduler, exc, seconds) from None
    try:
        client.wait_for_workers(1, timeout=seconds)   # else the tasks would wait forever
    except Exception as exc:  # noqa: BLE001 - a timeout, or the scheduler gone meanwhile
        close_quietly(client)
        raise BadInput(f"the Dask scheduler at {scheduler} has no workers ({_one_line(exc)})") from None
    return client, None


def _half_made(exc: BaseException, client_type):
    """The Client whose __init__ raised `exc` (None if none): closed here, in this thread,
    not by the collector in whichever thread it reaps it (in a Client's event-loop thread that
    deadlocked the next Client's start for 10 s or more)."""
    tb = exc.__traceback__
    while tb is not None:
        made = tb.tb_frame.f_locals.get("self")
        if isinstance(made, client_type):
            return made
        tb = tb.tb_next
    return None


def _refused(scheduler: str, exc: Exception, seconds: float) -> BadInput:
    """A Client that could not connect, as one line: an OSError says why itself, a timeout
    says how long; anything else means the peer did not answer as a scheduler does."""
    if isinstance(exc, TimeoutError) and not str(exc).strip():
        return BadInput(f"cannot reach the Dask scheduler at {scheduler}: it answered the check, then the "
                        f"connection did not complete in {seconds:g} s")
    if isinstance(exc, (OSError, TimeoutError, ValueError)):
        return BadInput(f"cannot reach the Dask scheduler at {scheduler}: {_one_line(exc)}")
    return BadInput(f"{scheduler} did not answer as a Dask scheduler does ({type(exc).__name__}: {_one_line(exc)}); "
                    "is it a worker's address, or a different distributed version?")


def result_of(future, path: str, doing: str | None = None):
    """A task's result; a lost worker or a closed connection as one line (BadInput) saying
    what the task did (`doing`; default: decoding `path`)."""
    try:
        return future.result()
    except BadInput:
        raise
    except Exception as exc:  # noqa: BLE001 - a lost worker, a closed connection: one line
        raise could_not(doing or "decoding " + path, exc) from None


def could_not(doing: str, exc: Exception) -> BadInput:
    """A Dask run that cannot complete, as one line saying what it was doing."""
    return BadInput(f"the Dask run could not complete ({doing}: {type(exc).__name__}: {_one_line(exc)}); "
                    "no result was written")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class DaskBatches:
    """The merged batches of `files`, decoded on the cluster; iterate once, then close().
    scheduler_timeout: as connect's timeout (seconds; None: CONNECT_TIMEOUT)."""

    def __init__(self, files: list[str], scheduler: str | None, roce_ports: tuple, chunk_packets: int,
                 warn: Callable[[str], None], projection: str | None = "analysis", connection=None,
                 scheduler_timeout: float | None = None):
        if "-" in files:
            raise BadInput("--engine dask reads files (on storage its workers share), not stdin")
        self.client, self.cluster = connection or connect(scheduler, scheduler_timeout)
        self.files, self.args = files, (tuple(roce_ports), chunk_packets, projection)
        self.chunk_packets, self.warn = chunk_packets, warn
        workers = len(self.client.nthreads()) or 1     # scheduler_info() listed only 5 in distributed 2025.x
        self.ahead = 2 * workers + 1             # files decoded ahead of the merge (memory bound)
        self.futures: dict[int, object] = {}
        self.run = uuid.uuid4().hex              # task keys of this run only
        self._iter: Iterator[Batch] | None = None

    def __iter__(self) -> Iterator[Batch]:
        from roceview.packets.read import coalesced, Prefetched

        self._iter = Prefetched(coalesced(self._batches(), self.chunk_packets))
        return self._iter

    def _batches(self) -> Iterator[Batch]:
        from roceview.packets.read import time_ordered
        from roceview.packets.parquet import is_dataset

        if len(self.files) == 1 and is_dataset(self.files[0]):
            yield from self._dataset(self.files[0])
            return
        if len(self.files) == 1:
            yield from self._single()
            return
        self.order, starts = time_ordered(self.files)
        yield from self._merged(starts)

    def _single(self) -> Iterator[Batch]:
        """One file: numbered as iter_chunks numbers it (no _file column)."""
        self.order = self.files
        frame = 1
        for batch in self._decoded(0):
            batch.cols["frame"] = np.arange(frame, frame + batch.n, dtype=np.int64)
            frame += batch.n
            yield batch

    def _dataset(self, path: str) -> Iterator[Batch]:
        """A Parquet dataset in frame order: windows of frames read on the workers (each reads
        the row groups of every partition its frames are in), handed on in order."""
        from roceview.packets.wire import unpack
        from roceview.packets.parquet import frame_range, read_frames

        lo, hi = self._result(self.client.submit(frame_range, path, pure=False), path)
        starts = list(range(lo, hi + 1, WINDOW))
        pending: dict[int, object] = {}
        for i, start in enumerate(starts):
            for j in range(i, min(i + self.ahead, len(starts))):
                if j not in pending:
                    pending[j] = self.client.submit(read_frames, path, starts[j], starts[j] + WINDOW, self.args[2],
                                                    pure=False, retries=RETRIES)
            batch = next(unpack(self._result(pending.pop(i), path)), Batch(0))
            for k in range(0, batch.n, self.chunk_packets):
                yield batch.select(slice(k, k + self.chunk_packets))

    def _merged(self, starts) -> Iterator[Batch]:
        from roceview.packets.merge import FileSpans, merge_in_time
        from roceview.packets.read import MIN_MERGE_CHUNK, allow_open_files, Interfaces

        interfaces, spans = Interfaces(), FileSpans(len(self.order))
        allow_open_files(len(self.files))

        def open_file(k: int, beside: int) -> Iterator[Batch]:
            """As packets.read.merged's open_file: the same interface numbers, chunk sizes and
            disagreement watch."""
            base = interfaces.open(k)
            rows = max(min(MIN_MERGE_CHUNK, self.chunk_packets), self.chunk_packets // (beside + 1))
            for batch in self._decoded(k):
                for lo in range(0, batch.n, rows):
                    part = batch if rows >= batch.n else batch.select(slice(lo, lo + rows))
                    iface = (part.cols["interface"] + base).astype(np.uint16)
                    part.cols["interface"] = interfaces.seen(k, iface)
                    part.cols["_file"] = np.full(part.n, k, np.uint16)
                    spans.observe(k, part)
                    yield part

        never = -(1 << 62)
        yield from merge_in_time([never if s is None else s for s in starts], open_file, self.chunk_packets)
        for message in spans.disagreements(self.order):   # as the local engine: after the merge
            self.warn(message)

    def _decoded(self, k: int) -> Iterator[Batch]:
        """File k's chunks (its decode and the next files' submitted first); its warnings once
        its last chunk is handed on, where the local reader gives them."""
        for j in range(k, min(k + self.ahead, len(self.order))):
            if j not in self.futures:
                self.futures[j] = self.client.submit(decode_file, self.order[j], *self.args, retries=RETRIES,
                                                     key=f"roceview-decode-{j}-{self.run}", pure=False)
        from roceview.packets.wire import unpack

        future = self.futures.pop(k)
        result = self._result(future, self.order[k])
        del future                               # the worker's copy is released
        yield from unpack(result["chunks"])
        for message in result["warnings"]:
            self.warn(message)

    _result = staticmethod(lambda future, path: result_of(future, path))

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()
        for future in self.futures.values():
            future.cancel()
        self.futures.clear()
        close_quietly(self.client, self.cluster)
