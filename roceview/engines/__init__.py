"""Engines: where a capture's packets are decoded and, for Dask, analyzed. The API picks one by
name (`analyze(..., engine="dask")`, `roceview analyze --engine dask`), as pandas picks an I/O
engine; both give the same results byte for byte.

An engine is a module with a flag and two or three functions:

    ANALYZES: bool
        whether the engine runs the analysis itself (analyzed());
    inputs(paths) -> list[str]
        the files to read, from the paths, directories and '-' the user gave;
    analyzed(files, scheduler, warn, **options) -> (AnalysisResult | None, connection)
        where ANALYZES: the whole analysis, run by the engine (Dask: on the workers,
        partitioned by connection); (None, connection) where it cannot promise the local
        engine's result, and the API then analyses batches() here;
    batches(files, scheduler, *, display_filter=None, connection=None, **options)
        the merged packets table as Batches in capture order, only the rows display_filter
        matches; an iterator with close().

`options` may hold `scheduler_timeout` (seconds to wait for the scheduler and its first worker)
only where the user gave it: the local engine refuses it, as it refuses a scheduler.

`local` decodes on a reading thread of this process (roceview.packets.read); `dask` on a Dask
cluster (roceview.engines.dask). A new engine is a module here and a name in NAMES.
"""
from __future__ import annotations

from importlib import import_module

NAMES = ("local", "dask")


def get(name: str):
    """The engine module called `name`; BadInput for any other name."""
    if name not in NAMES:
        from roceview.errors import BadInput

        raise BadInput(f"--engine must be {' or '.join(NAMES)} (got {name!r})")
    return import_module(f"roceview.engines.{name}")
