"""Growable per-flow (or per-space) numpy state arrays carried between chunks."""
from __future__ import annotations

import numpy as np


class Columns:
    """Named numpy arrays of one common length that grows as flows are registered."""

    def __init__(self, spec: dict[str, tuple[str, object]]):
        self._spec = spec  # name -> (dtype, fill value)
        self.n = 0
        for name, (dtype, _) in spec.items():
            setattr(self, name, np.zeros(0, dtype=dtype))

    def grow(self, n: int) -> None:
        if n <= self.n:
            return
        for name, (dtype, fill) in self._spec.items():
            old = getattr(self, name)
            extra = np.full(n - self.n, fill, dtype=dtype)
            setattr(self, name, np.concatenate([old, extra]))
        self.n = n

    def add(self, name: str, index: np.ndarray, weights: np.ndarray | None = None) -> None:
        """counter[name][i] += sum of weights (or count) of rows with index i."""
        if len(index) == 0:
            return
        counts = np.bincount(index, weights, minlength=self.n)
        arr = getattr(self, name)
        arr += counts.astype(arr.dtype) if weights is not None else counts
