"""`analyze --engine dask` with the analysis on the workers, partitioned by connection.

    read (per file: decode, cut into partitions) -> Plan (driver, on timestamps: frames, chunks)
        -> gates (driver: the one cross-flow decision per chunk) -> analyze (per partition)
        -> merge (driver: partition_merge) -> the diagnoser, once (api.py)

Only timestamps, per-file summaries and the partitions' result tables travel to the driver;
the packets go, packed (packets.wire), from the worker that read them to the worker analyzing
their partition. When a partitioned run cannot promise the local engine's result
(partition_merge.exact), `partitioned` returns None and the caller runs the exact
driver-side path (client.DaskBatches) on the same cluster.
"""
from __future__ import annotations

from roceview.engines.dask.client import RETRIES, close_quietly, connect, could_not, result_of


def partitioned(files: list[str], scheduler, warn, scheduler_timeout: float | None = None, **options):
    """The AnalysisResult (with result.facts) of the partitioned run, its warnings told; or
    None, with the cluster connection kept in `connection` for the exact driver-side run.
    scheduler_timeout: as connect's timeout (seconds; None: client.CONNECT_TIMEOUT)."""
    from roceview.packets.parquet import is_dataset

    if "-" in files or (len(files) == 1 and is_dataset(files[0])):
        return None, None
    connection = connect(scheduler, scheduler_timeout)
    try:
        result, told = analyze(files, client=connection[0], **options)
    except BaseException:
        _close(connection)
        raise
    if result is None:
        return None, connection
    _close(connection)
    for message in told:
        warn(message)
    return result, None


def _close(connection) -> None:
    close_quietly(*connection)


def analyze(files: list[str], *, client, roce_ports=(), chunk_packets: int, pmtu, link_speed: float,
            bucket_ms: float, facts: bool, stream: bool = True, priority_table=None):
    """(AnalysisResult with result.facts, the warnings to tell), or (None, why) when the
    partitions cannot give the local result. stream: each file's part analyzed as it comes
    where the files follow each other in time (_streamed); should that fail once parts were
    fed and freed, the run starts again without. priority_table: the frames' priorities
    (api._priority_table: the settings' trust / dscp_to_priority; None: the default)."""
    from roceview.engines.dask.partition import (analyze_partition, analyzed_bits, arrived, meta, part, read, spans,
                                                 times)
    from roceview.engines.dask.plan import Plan, _walked, gates
    from roceview.packets.read import time_ordered
    from roceview.engines.dask.partition_merge import exact, merge

    submit = client.submit
    order, starts = time_ordered(files) if len(files) > 1 else (files, [None])
    workers = sorted(client.nthreads()) or [None]     # scheduler_info() listed only 5 in distributed 2025.x
    n_part = len(workers)
    metas, bits, held = [], [], [[] for _ in range(n_part + 1)]
    for path in order:           # in this order, so that a file's parts go as soon as it is read
        read_at = submit(read, path, tuple(roce_ports), chunk_packets, "analysis", n_part, pure=False,
                         retries=RETRIES)
        metas.append(submit(meta, read_at, pure=False))
        bits.append(submit(analyzed_bits, read_at, pure=False))     # a bit a row, fetched for a replayed plan
        for p in range(n_part + 1):
            held[p].append(submit(arrived, submit(part, read_at, p, pure=False), pure=False, retries=RETRIES,
                                  **_on(workers, p)))
    # no future of the reads themselves kept: a read's rows (every partition's) are freed on its
    # worker once they have arrived at their partitions' (kept, they were there twice until analyzed)
    read_at = None
    streamed = _streamed(client, order, starts, metas, held, workers, chunk_packets,
                         (pmtu, link_speed, bucket_ms, facts), priority_table) if stream else None

    def restart():                          # every file read again, every partition analyzed at once
        nonlocal metas, bits, held, streamed, results
        # the first attempt's futures dropped: its unfed parts (and reads still running) and its
        # runs were held on the workers through the whole second run
        metas = bits = held = streamed = results = None
        return analyze(files, client=client, roce_ports=roce_ports, chunk_packets=chunk_packets, pmtu=pmtu,
                       link_speed=link_speed, bucket_ms=bucket_ms, facts=facts, stream=False,
                       priority_table=priority_table)
    fed = any(h is None for h in held[0])   # parts fed to the runs and freed: at once needs them read again
    if streamed is None and fed:
        return restart()
    metas = _gather(metas, [f"decoding {f}" for f in order])
    told: list[str] = []
    plan = Plan(order, starts, metas, chunk_packets, told.append,
                lambda: _gather([submit(times, f, chunk_packets, m["n"], pure=False, retries=RETRIES)
                                  for f, m in zip(order, metas)],
                                [f"reading {f}" for f in order]),
                lengths=lambda k, rows: result_of(submit(_walked, order[k], rows, pure=False, retries=RETRIES), "",
                                                  f"reading {order[k]}"))
    again = [k for k in range(len(order)) if len(order) > 1 and plan.span_rows[k] != chunk_packets]
    respans = dict(zip(again, _gather([submit(spans, [held[p][k] for p in range(n_part)], plan.span_rows[k],
                                               plan.n[k], pure=False) for k in again],
                                       [f"decoding {order[k]}" for k in again])))
    gate, names = gates(plan, [m["flows"] for m in metas],
                        lambda: _gather(bits, [f"decoding {f}" for f in order]))
    if streamed is not None and not streamed[1].agrees(plan, gate):
        return restart()                      # cannot be: the stream's chunks are the plan's
    if streamed is not None:
        results = streamed[0]
    else:                                   # files overlapping in time: every partition once all are read
        gidx = _scattered(client, plan.gidx)
        results = [submit(analyze_partition, held[p], gidx, plan.chunk_starts, gate, pmtu, link_speed, bucket_ms, facts,
                          p == n_part, priority_table, pure=False, retries=RETRIES, **_on(workers, p))
                   for p in range(n_part + 1)]
    requested_ns = max(1, int(round(bucket_ms * 1_000_000)))          # as the local Timeline's
    _ready_for_merge(_timeline_rows(metas, len(names), sum(plan.n), requested_ns))
    doing = [f"analysing partition {p + 1} of {n_part + 1}" for p in range(n_part + 1)]
    done = _gather(results, doing) if streamed is None else _kept(client, results, workers[:n_part + 1], doing)
    if done is None:
        return restart()                      # a worker lost with its partitions' runs
    del bits, held, streamed
    why, bucket_ns = exact(done, requested_ns, plan.n_chunks)
    if why is not None:
        return None, why
    if len(order) > 1:
        told += _disagreements(order, [_spans(m["spans"], respans.get(k)) for k, m in enumerate(metas)])
    stats = [_in_frames(m["stats"], g) for m, g in zip(metas, plan.gidx)]
    result = merge(done, names, stats, {"pmtu": pmtu, "link_speed": link_speed, "bucket_ms": bucket_ms,
                                        "priority_table": priority_table},
                   files, told, bucket_ns)
    if facts:
        from roceview.engines.dask.partition_merge import merge_facts

        result.facts = merge_facts(done, stats, plan.ts_backwards)
    return result, told


def _streamed(client, order: list[str], starts: list, metas: list, held: list[list], workers: list,
              chunk_packets: int, options: tuple, priority_table=None):
    """(each partition's result future, the StreamPlan) with each file's part analyzed as soon
    as the file is read and its chunks are known (plan_stream), the partitions' runs kept on
    their workers between files; None once a file does not follow the one before in time (a
    Plan replayed on the timestamps is needed: run.analyze analyses every partition then)."""
    from roceview.engines.dask.partition import finished, step
    from roceview.engines.dask.plan_stream import StreamPlan

    if workers[0] is None:                  # no worker to keep a run on
        return None
    stream, runs = StreamPlan(starts, chunk_packets), [None] * len(held)
    for k, future in enumerate(metas):
        meta = result_of(future, "", f"decoding {order[k]}")
        if not stream.follows(k, meta):
            return None
        offset = stream.rows
        closed = stream.add(meta)
        # before the files still to read: a part analyzed as it comes is a part not held
        runs = [client.submit(step, runs[p], held[p][k], offset, *closed, *options, p == len(held) - 1,
                              priority_table, pure=False, priority=1, **_on(workers, p, pinned=True))
                for p in range(len(held))]
        for p in range(len(held)):          # freed once fed: a partition's worker holds a few files' rows
            held[p][k] = None
    last = stream.finish()[:2]
    return [client.submit(finished, run, *last, pure=False, priority=1, **_on(workers, p, pinned=True))
            for p, run in enumerate(runs)], stream


def _kept(client, futures: list, pinned: list, doing: list[str]) -> list | None:
    """The partitions' results; None as soon as a worker their runs are kept on has left, while
    they run or while their results are fetched (its runs are lost and, pinned, would wait for
    it for ever: a result lost after it was done is recomputed from the runs), or has stayed
    paused by Dask's memory monitor for PAUSED_PATIENCE seconds (its runs can neither move nor
    be spilled to disk, and may be what fills it: given up, they free it)."""
    out, wait, paused = [], 0.5, {}
    while len(out) < len(futures) and _usable(client, pinned, paused):
        future = futures[len(out)]
        try:
            future.exception(timeout=0.5)          # done, whether it failed or not
            if future.status not in ("error", "cancelled"):
                out.append(future.result(timeout=wait))
                continue
        except TimeoutError:                       # not done, lost, or a large result: look again
            wait = 2 * wait if future.done() else wait
            continue
        except Exception as exc:  # noqa: BLE001 - a closed connection: one line
            raise could_not(doing[len(out)], exc) from None
        result_of(future, "", doing[len(out)])     # failed: its one line
    return out if len(out) == len(futures) else None


PAUSED_PATIENCE = 30.0


def _usable(client, pinned: list, paused: dict) -> bool:
    """Whether every worker in `pinned` is still there, and running or paused (`paused`: since
    when, as first seen) for less than PAUSED_PATIENCE seconds."""
    import time

    status, now = _statuses(client), time.monotonic()
    for w in pinned:
        if w not in status:
            return False
        if status[w] != "paused":
            paused.pop(w, None)
        elif now - paused.setdefault(w, now) >= PAUSED_PATIENCE:
            return False
    return True


def _statuses(client) -> dict:
    """Each worker's status (running, paused, ...); the scheduler lost, one line (as result_of),
    not a traceback."""
    try:
        present = set(client.nthreads())           # raises once the scheduler is gone
        try:
            info = client.scheduler_info(n_workers=-1)      # distributed 2025.x lists 5 unless asked
        except TypeError:                                   # before: every worker, no such argument
            info = client.scheduler_info()
    except Exception as exc:  # noqa: BLE001 - a closed connection: one line
        raise could_not("analysing partitions", exc) from None
    # scheduler_info keeps what it last had when the scheduler cannot be asked: not for who is there
    return {w: str(info["workers"].get(w, {}).get("status", "running")) for w in present}


def _on(workers: list, p: int, pinned: bool = False) -> dict:
    """Partition p's worker, where its pieces gather as the files are read and it is analyzed
    (another, should that worker be lost); pinned: that worker and no other, for a partition's
    run that lives there between its files (the Analyzer's state does not pickle, and moving it
    would cost more than the work)."""
    return {} if workers[0] is None else {"workers": [workers[p % len(workers)]], "allow_other_workers": not pinned}


def _timeline_rows(metas: list[dict], flows: int, packets: int, bucket_ns: int) -> int:
    """At most how many rows the merged timeline has: a row per flow and bucket, at most one a
    packet, at most Timeline.MAX_ROWS."""
    from roceview.analysis.timeline import MAX_ROWS

    firsts = [m["stats"]["first_ts"] for m in metas if m["stats"]["first_ts"] is not None]
    lasts = [m["stats"]["last_ts"] for m in metas if m["stats"]["last_ts"] is not None]
    buckets = (max(lasts) - min(firsts)) // bucket_ns + 1 if firsts else 0
    return min(MAX_ROWS, packets, flows * buckets)


def _ready_for_merge(rows: int) -> None:
    """While the workers analyze, fault in the heap the merge of `rows` timeline rows will take
    (partition_merge: ~130 bytes a row), so that it is not faulted in after them, when nothing
    else runs (up to 40 % of a run's wall time, in the driver's first merge: docs/performance.md)."""
    from roceview.capture.memory import touch_heap

    touch_heap(rows * 128)


def _scattered(client, gidx: list) -> list:
    """Plan.gidx with its arrays (files overlapping in time: 8 bytes a row) sent to every worker
    once: every partition task reads all of them, and carried in the task graph they crossed
    the scheduler once per task (Dask warning on stderr of a large graph). Broadcast, so that
    losing a worker loses no copy that cannot be recomputed."""
    at = [k for k, g in enumerate(gidx) if not isinstance(g, int)]
    if not at:
        return gidx
    out = list(gidx)
    for k, future in zip(at, client.scatter([gidx[k] for k in at], broadcast=True, hash=False)):
        out[k] = future
    return out


def _in_frames(stats: dict, gidx) -> dict:
    """A file's stats with its row numbers as frame numbers."""
    from roceview.engines.dask.plan import frames

    out = dict(stats)
    out["truncated_first"] = (frames(gidx, stats["truncated_first"]) + 1).tolist()
    lldp = stats["lldp"]
    at = frames(gidx, [r for r, _, _ in lldp]) + 1
    out["lldp"] = [(int(f), mac, bits) for f, (_, mac, bits) in zip(at.tolist(), lldp)]
    return out


def _spans(whole: tuple, again) -> tuple:
    """A file's spans: its time span from every frame (as read whole), its PSN spans observed
    again in the chunks the local engine reads it in (`again`, from its RoCE rows) if it did."""
    return whole if again is None else (whole[0], whole[1], again[2])


def _disagreements(order: list[str], spans: list) -> list[str]:
    """merge.FileSpans' warnings from the files' spans, observed on the workers."""
    import numpy as np

    from roceview.packets.merge import FileSpans

    fs = FileSpans(len(order))
    for k, (first, last, folded) in enumerate(spans):
        fs.first[k], fs.last[k] = first, last
        if folded is not None:                   # observed as file 0 on the worker
            fs.parts.append((np.full(len(folded[0]), k, np.int64), *folded[1:]))
    return fs.disagreements(order)


def _gather(futures: list, doing: list[str]) -> list:
    return [result_of(f, "", what) for f, what in zip(futures, doing)]
