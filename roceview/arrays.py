"""numpy helpers shared by the capture readers and the diagnoser."""
from __future__ import annotations

import numpy as np


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """np.unique(values) without its options: the sorted distinct values. Plain np.unique checks
    np.ma.is_masked, which imports numpy.ma (~8 ms of an analyze run)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values
