"""Wireshark display filters over the packets table, evaluated vectorised.

    f = roceview.filter.compile_filter('ip.src == 10.0.0.0/24 && infiniband.bth.opcode in {4, 0x11}')
    keep = f.mask(batch)          # numpy bool array, one entry per row of the Batch
    f.fields                      # the Batch columns the filter reads

The filter is parsed and compiled once (roceview/filter/parse.py, evaluate.py); `mask` runs a
handful of numpy operations per test over whole columns, never Python per packet. A filter
that cannot be compiled raises FilterError (a roceview.errors.BadInput: one line, exit 2 in
the CLI) naming the column where it went wrong. Field names: roceview/filter/fields.py and
the table in docs/columns.md.
"""
from __future__ import annotations

import numpy as np

from roceview.batch import Batch
from roceview.filter.parse import FilterError

__all__ = ["DisplayFilter", "FilterError", "compile_filter"]


class DisplayFilter:
    """A compiled display filter."""

    def __init__(self, text: str):
        from roceview.filter import evaluate
        from roceview.filter.parse import parse

        self.text = text
        used: dict = {}
        self._fn = evaluate.build(parse(text), used)
        self.field_defs = tuple(used.values())
        self.fields = frozenset().union(*(evaluate.columns_of(f) for f in self.field_defs))

    def mask(self, batch: Batch) -> np.ndarray:
        """One bool per row of `batch`: True where the packet matches."""
        from roceview.filter.evaluate import run

        return run(self._fn, batch)

    def select(self, batch: Batch) -> Batch:
        """The rows of `batch` that match (the batch itself when all do)."""
        keep = self.mask(batch)
        if keep.all():
            return batch
        rows = np.flatnonzero(keep)
        return Batch(len(rows), {k: _take(v, rows) for k, v in batch.cols.items()},
                     {k: _take(v, rows) for k, v in batch.valid.items()})

    def __repr__(self) -> str:
        return f"DisplayFilter({self.text!r})"


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows] by np.take, an (n, 16) address matrix as one 16-byte item per row: the whole
    selection of a 64 k-row Batch (83 arrays) takes ~1 ms this way, against ~1.6 ms indexing
    by rows and ~70 ms indexing by a bool mask (measured on the 1 M-packet benchmark file)."""
    if values.ndim == 2 and values.flags.c_contiguous:
        row = np.dtype((np.void, values.shape[1] * values.itemsize))
        return np.take(values.view(row).reshape(-1), rows).view(values.dtype).reshape(len(rows), -1)
    return np.take(values, rows, axis=0)


def compile_filter(text: str) -> DisplayFilter:
    """Compile Wireshark display-filter text; raises FilterError (one line) when it is wrong."""
    return DisplayFilter(text)
