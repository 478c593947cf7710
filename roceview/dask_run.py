"""`analyze --engine dask` with the analysis on the workers, partitioned by connection.

    decode (per file) -> timestamps -> Plan (driver: frames, chunks) -> split (per file)
        -> gates (driver: the cross-flow decision per chunk) -> analyse (per partition)
        -> merge (driver: partition_merge) -> the diagnoser, once (api.py)

Only timestamps, per-file flow summaries and the partitions' result tables travel to the
driver; the packets go from the worker that decoded them to the worker analysing their
partition. When a partitioned run cannot promise the local engine's result (partition_merge.
exact), `analyze` returns None and the caller runs the exact driver-side path (dask_engine).
"""
from __future__ import annotations

from roceview.dask_engine import RETRIES, connect, result_of


def _info(split_result: dict) -> dict:
    return {k: v for k, v in split_result.items() if k != "parts"}


def _part(split_result: dict, p: int):
    return split_result["parts"][p]


def partitioned(files: list[str], scheduler, warn, **options):
    """The AnalysisResult (with result.facts) of the partitioned run, its warnings told; or
    None, with the cluster connection kept in `connection` for the exact driver-side run."""
    from roceview.parquet_dataset import is_dataset

    if "-" in files or (len(files) == 1 and is_dataset(files[0])):
        return None, None
    connection = connect(scheduler)
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
    client, cluster = connection
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    except Exception:  # noqa: BLE001 - shutting down a broken connection: nothing left to do
        pass


def analyze(files: list[str], *, client, roce_ports=(), chunk_packets: int, pmtu, link_speed: float,
            bucket_ms: float, facts: bool):
    """(AnalysisResult with result.facts, the warnings to tell), or (None, why) when the
    partitions cannot give the local result."""
    from roceview.dask_partition import analyse, decode, split, timestamps
    from roceview.dask_plan import Plan, gates
    from roceview.packets import _time_ordered
    from roceview.partition_merge import exact, merge, merge_facts

    submit, gather = client.submit, _gather
    order, starts = _time_ordered(files) if len(files) > 1 else (files, [None])
    workers = sorted(client.scheduler_info().get("workers", {})) or [None]
    decoded = [submit(decode, path, tuple(roce_ports), chunk_packets, "analysis", pure=False, retries=RETRIES)
               for path in order]
    meta = gather([submit(timestamps, d, pure=False, retries=RETRIES) for d in decoded], order)
    told: list[str] = []
    plan = Plan(order, starts, [m["ts"] for m in meta], [m["warnings"] for m in meta], chunk_packets, told.append)
    del meta
    n_part = len(workers)
    splits = [submit(split, d, k, plan.gidx[k], plan.chunk_starts, plan.span_rows[k] if len(order) > 1 else None,
                     len(order), n_part, pure=False, retries=RETRIES) for k, d in enumerate(decoded)]
    del decoded
    infos = gather([submit(_info, s, pure=False) for s in splits], order)
    gate, names = gates([i["flows"] for i in infos], plan.n_chunks)
    results = []
    for p in range(n_part + 1):
        parts = [submit(_part, s, p, pure=False) for s in splits]
        where = [workers[p % len(workers)]] if workers[0] is not None else None
        results.append(submit(analyse, parts, plan.chunk_starts, gate, pmtu, link_speed, bucket_ms, facts, pure=False,
                              retries=RETRIES, workers=where, allow_other_workers=True))
    del splits
    parts = gather(results, order)
    why, bucket_ns = exact(parts, max(1, int(round(bucket_ms * 1_000_000))), plan.n_chunks)
    if why is not None:
        return None, why
    told += _disagreements(order, [i["spans"] for i in infos]) if len(order) > 1 else []
    stats = [i["stats"] for i in infos]
    result = merge(parts, names, stats, {"pmtu": pmtu, "link_speed": link_speed, "bucket_ms": bucket_ms},
                   files, told, bucket_ns)
    if facts:
        result.facts = merge_facts(parts, stats, plan.ts_backwards)
    return result, told


def _disagreements(order: list[str], spans: list) -> list[str]:
    """merge.FileSpans' warnings from the files' spans, observed on the workers."""
    from roceview.merge import FileSpans

    fs = FileSpans(len(order))
    for k, (first, last, folded) in enumerate(spans):
        fs.first[k], fs.last[k] = first, last
        if folded is not None:
            fs.parts.append(folded)
    return fs.disagreements(order)


def _gather(futures: list, order: list[str]) -> list:
    return [result_of(f, order[min(i, len(order) - 1)]) for i, f in enumerate(futures)]
