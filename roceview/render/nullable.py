"""Text cells of the `nts` column kind (a timestamp that may be empty, tables.py), for the CSV
and JSON writers alike: the timestamp's text, no byte where the value is NONE_TS."""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import NONE_TS
from roceview.render.cells import column_parts


def nullable_ts_parts(values: np.ndarray) -> list:
    v = np.asarray(values, dtype=np.int64)
    shown = v != NONE_TS
    parts = column_parts(np.where(shown, v, 0), "ts")
    return [(mat, mask & shown[:, None]) for mat, mask in parts]
