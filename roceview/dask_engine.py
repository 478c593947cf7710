"""`analyze --engine dask`: capture files decoded on a Dask cluster, analysed exactly as locally.

Workers read and decode whole files (the analysis projection's columns, decode.decode_chunk)
in parallel; this process merges the decoded chunks in time order with the local engine's own
merge (roceview.merge, as packets._merged does: same file order, interface numbers, chunk
sizes, frame numbers) and feeds them to the unchanged Analyzer and FactCollector; the
diagnoser runs once. Path-MTU inference, the pairing horizon, flow ids, the event caps and the
frame numbers couple every flow of the capture, so the analysis itself is not partitioned:
the results are the local engine's byte for byte, and what scales is the decode (README,
"Running on a Dask cluster", has the measured split). Needs `pip install 'roceview[dask]'`.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from roceview.batch import Batch
from roceview.errors import BadInput

INSTALL = "--engine dask needs Dask: pip install 'roceview[dask]'"
RETRIES = 2                  # a task whose worker died is run again elsewhere this many times
CONNECT_TIMEOUT = "10s"


def decode_file(path: str, roce_ports: tuple, chunk_packets: int, projection: str | None) -> dict:
    """On a worker: one file's decoded chunks (interface numbers from 0; the driver adds the
    file's base) and the warnings its reading gave, in order. Plain dicts of numpy arrays:
    they travel as pickle-5 buffers, no per-packet objects."""
    from roceview.capture.readers import read_records
    from roceview.decode import decode_chunk, port_table

    warnings: list[str] = []
    ports = port_table(roce_ports)
    chunks = []
    for chunk in read_records(path, chunk_packets, warnings.append, release_lag=0):
        batch = decode_chunk(chunk, ports, 1, projection)
        chunks.append((batch.n, batch.cols, batch.valid))
    return {"chunks": chunks, "warnings": warnings}


def connect(scheduler: str | None):
    """A Client of the scheduler at `scheduler`, or of a LocalCluster sized to this machine."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise BadInput(INSTALL) from None
    if scheduler is None:
        cluster = LocalCluster(processes=True, threads_per_worker=1, dashboard_address=":0")
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise BadInput(f"cannot reach the Dask scheduler at {scheduler}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class DaskBatches:
    """The merged batches of `files`, decoded on the cluster; iterate once, then close()."""

    def __init__(self, files: list[str], scheduler: str | None, roce_ports: tuple, chunk_packets: int,
                 warn: Callable[[str], None], projection: str | None = "analysis"):
        if "-" in files:
            raise BadInput("--engine dask reads files (on storage its workers share), not stdin")
        self.client, self.cluster = connect(scheduler)
        self.files, self.args = files, (tuple(roce_ports), chunk_packets, projection)
        self.chunk_packets, self.warn = chunk_packets, warn
        workers = len(self.client.scheduler_info().get("workers", {})) or 1
        self.ahead = 2 * workers + 1             # files decoded ahead of the merge (memory bound)
        self.futures: dict[int, object] = {}
        self._iter: Iterator[Batch] | None = None

    def __iter__(self) -> Iterator[Batch]:
        from roceview.packets import _coalesced, _Prefetched

        self._iter = _Prefetched(_coalesced(self._batches(), self.chunk_packets))
        return self._iter

    def _batches(self) -> Iterator[Batch]:
        from roceview.packets import _time_ordered

        if len(self.files) == 1:
            yield from self._single()
            return
        self.order, starts = _time_ordered(self.files)
        yield from self._merged(starts)

    def _single(self) -> Iterator[Batch]:
        """One file: numbered as iter_chunks numbers it (no _file column)."""
        self.order = self.files
        frame = 1
        for batch in self._decoded(0):
            batch.cols["frame"] = np.arange(frame, frame + batch.n, dtype=np.int64)
            frame += batch.n
            yield batch

    def _merged(self, starts) -> Iterator[Batch]:
        from roceview.merge import merge_in_time
        from roceview.packets import MIN_MERGE_CHUNK, _allow_open_files, _Interfaces

        interfaces = _Interfaces()
        _allow_open_files(len(self.files))

        def open_file(k: int, beside: int) -> Iterator[Batch]:
            """As packets._merged's open_file: the same interface numbers and chunk sizes."""
            base = interfaces.open(k)
            rows = max(min(MIN_MERGE_CHUNK, self.chunk_packets), self.chunk_packets // (beside + 1))
            for batch in self._decoded(k):
                for lo in range(0, batch.n, rows):
                    part = batch if rows >= batch.n else batch.select(slice(lo, lo + rows))
                    iface = (part.cols["interface"] + base).astype(np.uint16)
                    part.cols["interface"] = interfaces.seen(k, iface)
                    part.cols["_file"] = np.full(part.n, k, np.uint16)
                    yield part

        never = -(1 << 62)
        return merge_in_time([never if s is None else s for s in starts], open_file, self.chunk_packets)

    def _decoded(self, k: int) -> Iterator[Batch]:
        """File k's chunks (its decode and the next files' submitted first); its warnings once
        its last chunk is handed on, where the local reader gives them."""
        for j in range(k, min(k + self.ahead, len(self.order))):
            if j not in self.futures:
                self.futures[j] = self.client.submit(decode_file, self.order[j], *self.args, retries=RETRIES,
                                                     key=f"roceview-decode-{j}-{id(self)}", pure=False)
        future = self.futures.pop(k)
        result = self._result(future, self.order[k])
        del future                               # the worker's copy is released
        for n, cols, valid in result["chunks"]:
            yield Batch(n, cols, valid)
        for message in result["warnings"]:
            self.warn(message)

    @staticmethod
    def _result(future, path: str) -> dict:
        try:
            return future.result()
        except BadInput:
            raise
        except Exception as exc:  # noqa: BLE001 - a lost worker, a closed connection: one line
            raise BadInput(f"the Dask run could not complete (decoding {path}: {type(exc).__name__}: "
                           f"{_one_line(exc)}); no result was written") from None

    def close(self) -> None:
        if self._iter is not None:
            self._iter.close()
        for future in self.futures.values():
            future.cancel()
        self.futures.clear()
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        except Exception:  # noqa: BLE001 - shutting down a broken connection: nothing left to do
            pass
