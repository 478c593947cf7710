"""`analyze --engine dask`: the files decoded, and the analysis run partitioned by connection,
on a Dask cluster, with the local engine's results byte for byte (docs/dask.md).

    run            the partitioned run: read -> plan -> gates -> analyze -> merge
    plan           what the driver must know of the whole capture before parts are analyzed
    plan_stream    that plan made file by file, while later files are still read
    partition      the tasks the workers run (read, step, finished)
    partition_run  one partition's analysis: the local engine's Analyzer and FactCollector
    partition_merge  the partitions' results merged into the whole capture's
    client         connecting, errors, and the exact driver-side path (DaskBatches)

It uses only public names of `roceview.analysis` and `roceview.diagnose`.
"""
from __future__ import annotations

ANALYZES = True    # analyzed() runs the analysis on the workers


def inputs(paths) -> list[str]:
    from roceview.engines.dask.client import expand

    return expand(paths)


def analyzed(files, scheduler, warn, **options):
    """The partitioned run on the workers (run.partitioned)."""
    from roceview.engines.dask.run import partitioned

    return partitioned(files, scheduler, warn, **options)


def batches(files, scheduler, *, display_filter=None, connection=None, **options):
    """The files decoded on the cluster, merged here in time order (client.DaskBatches)."""
    from roceview.engines.dask.client import DaskBatches

    decoded = DaskBatches(files, scheduler, connection=connection, **options)
    return decoded if display_filter is None else _selected(decoded, display_filter)


def _selected(batches, display):
    try:
        for batch in batches:
            yield display.select(batch)
    finally:
        batches.close()
