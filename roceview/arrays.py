"""numpy helpers shared by the capture readers, the analysis and the diagnoser."""
from __future__ import annotations

import numpy as np


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """np.unique(values) without its options: the sorted distinct values. Plain np.unique checks
    np.ma.is_masked, which imports numpy.ma (~8 ms of an analyze run)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where each run of equal rows of `keys` (equal-length columns) starts. (np.r_ costs ~12 us
    a call: for the small captures most of the diagnoser's time is such constant costs.)"""
    n = len(keys[0])
    if not n:
        return np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def runs(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the runs of equal rows of `keys`: rows grouped by a key (a chunk's
    rows by PSN space) as half-open ranges."""
    starts = run_starts(*keys)
    stops = np.empty(len(starts), np.int64)
    stops[:-1] = starts[1:]
    stops[-1:] = len(keys[0])
    return starts, stops
