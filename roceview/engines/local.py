"""The local engine: the files decoded on a reading thread of this process (packets.read), the
analysis fed here by the API."""
from __future__ import annotations

ANALYZES = False   # the API analyses its batches()


def inputs(paths) -> list[str]:
    from roceview.capture.source import expand_paths

    return expand_paths(paths)


def batches(files, scheduler, *, display_filter=None, connection=None, scheduler_timeout=None, **options):
    for value, flag in ((scheduler, "--scheduler"), (scheduler_timeout, "--scheduler-timeout")):
        if value is not None:
            from roceview.errors import BadInput

            raise BadInput(f"{flag} needs --engine dask")
    from roceview.packets.read import iter_batches

    return iter_batches(files, display_filter=display_filter, **options)
