"""A PSN-vs-time ladder as text rows (no Textual): requests and responses of one queue pair,
with gaps, retransmissions, NAKs, CE marks and CNPs marked. Later marks win a cell, so the rare
ones (drawn last) stay visible among thousands of packets."""
from __future__ import annotations

import numpy as np

# (mark, meaning) in drawing order: the rarer the later
MARKS = (("·", "request"), ("∘", "response"), ("c", "CE"), ("P", "CNP"), ("R", "retransmission"),
         ("G", "gap"), ("N", "NAK"))
LADDER_MAX = 50_000              # packets decoded for one ladder (evenly sampled past it)


def unwrap_psn(psn: np.ndarray) -> np.ndarray:
    """PSNs are 24-bit (IBTA 9.7.1): unwrap so a ladder crossing 0xFFFFFF keeps climbing."""
    psn = np.asarray(psn, np.int64)
    if len(psn) < 2:
        return psn
    step = np.diff(psn)
    wraps = np.cumsum(np.where(step < -(1 << 23), 1 << 24, np.where(step > (1 << 23), -(1 << 24), 0)))
    return np.concatenate([psn[:1], psn[1:] + wraps])


def draw(layers: dict, width: int, height: int) -> list[str]:
    """layers: mark -> (ts ns, psn) arrays. Rows top = highest PSN; a left axis of PSNs."""
    pts = [(m, np.asarray(t, np.int64), np.asarray(p, np.int64)) for m, (t, p) in layers.items() if len(t)]
    if not pts or width < 12 or height < 2:
        return ["(no packets of this queue pair)"]
    ts = np.concatenate([t for _, t, _ in pts])
    psn = np.concatenate([p for _, _, p in pts])
    t0, t1, p0, p1 = int(ts.min()), int(ts.max()), int(psn.min()), int(psn.max())
    axis = max(len(str(p0)), len(str(p1))) + 1
    cols = width - axis
    grid = [[" "] * cols for _ in range(height)]
    order = {m: k for k, (m, _) in enumerate(MARKS)}
    for mark, t, p in sorted(pts, key=lambda item: order.get(item[0], 0)):
        x = ((t - t0) * (cols - 1)) // max(t1 - t0, 1)
        y = (height - 1) - ((p - p0) * (height - 1)) // max(p1 - p0, 1)
        for xi, yi in set(zip(x.tolist(), y.tolist())):
            grid[yi][xi] = mark
    labels = {0: str(p1), height - 1: str(p0)}
    return [f"{labels.get(r, ''):>{axis - 1}}│" + "".join(row) for r, row in enumerate(grid)]


def legend() -> str:
    return "  ".join(f"{m} {name}" for m, name in MARKS)
