"""Wireshark display filters over the packets table, evaluated vectorised.

    f = roceview.filter.compile_filter('ip.src == 10.0.0.0/24 && infiniband.bth.opcode in {4, 0x11}')
    keep = f.mask(batch)          # numpy bool array, one entry per row of the Batch
    f.fields                      # the Batch columns the filter reads

The filter is parsed and compiled once (roceview/filter/parse.py, evaluate.py); `mask` runs a
handful of numpy operations per test over whole columns, never Python per packet. A filter
that cannot be compiled raises FilterError (a roceview.errors.BadInput: one line, exit 2 in
the CLI) naming the column where it went wrong. Field names: roceview/filter/field_names.py and
the table in docs/columns.md.
"""
from __future__ import annotations

import numpy as np

from roceview.packets.batch import Batch
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
        take = _Taker(rows)
        return Batch(len(rows), {k: take(v) for k, v in batch.cols.items()},
                     {k: take(v) for k, v in batch.valid.items()})

    def __repr__(self) -> str:
        return f"DisplayFilter({self.text!r})"


class _Taker:
    """values[rows] for each column of a Batch, by np.take (an (n, 16) address matrix as one
    16-byte item per row). A column that is 0 (False) on every row, or a validity that is True
    on every row, is not copied: all such columns of one dtype share one read-only array (a
    RoCE capture's PFC, PAUSE, LLDP, CM and absent-header columns: about half of a Batch's
    83 arrays). Selecting by a bool mask, or by index, took longer (docs/performance.md)."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.shared: dict = {}

    def __call__(self, values: np.ndarray) -> np.ndarray:
        if values.ndim == 1:
            if not values.any():
                return self._constant(values.dtype, 0)
            if values.dtype == bool and values.all():
                return self._constant(values.dtype, 1)
            return np.take(values, self.rows)
        if values.flags.c_contiguous:
            row = np.dtype((np.void, values.shape[1] * values.itemsize))
            taken = np.take(values.view(row).reshape(-1), self.rows)
            return taken.view(values.dtype).reshape(len(self.rows), values.shape[1])   # (0, 16) when none
        return np.take(values, self.rows, axis=0)

    def _constant(self, dtype, value) -> np.ndarray:
        key = (dtype, value)
        if key not in self.shared:
            array = np.full(len(self.rows), value, dtype)
            array.flags.writeable = False
            self.shared[key] = array
        return self.shared[key]


def compile_filter(text: str) -> DisplayFilter:
    """Compile Wireshark display-filter text; raises FilterError (one line) when it is wrong."""
    return DisplayFilter(text)
