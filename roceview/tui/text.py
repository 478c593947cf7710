"""Small text helpers shared by the screens (no Textual: unit-testable)."""
from __future__ import annotations

import numpy as np

SEVERITY_STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
BARS = " ▁▂▃▄▅▆▇█"


def severity_style(severity: str) -> str:
    return SEVERITY_STYLES.get(severity, "")


def duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} µs"


def hexdump(data: bytes, width: int = 8) -> str:
    """Offset, hex bytes and printable ASCII, `width` bytes a line (8 fits 80 columns beside the tree)."""
    lines = []
    for at in range(0, len(data), width):
        part = data[at: at + width]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in part)
        lines.append(f"{at:04x}  {part.hex(' '):<{3 * width - 1}}  {text}")
    return "\n".join(lines)


def bars(values, width: int) -> str:
    """One row of block characters: `values` summed into `width` columns, scaled to the highest."""
    values = np.asarray(values, dtype=np.float64)
    if width <= 0 or len(values) == 0:
        return ""
    cols = np.add.reduceat(values, np.linspace(0, len(values), min(width, len(values)), endpoint=False).astype(int))
    top = cols.max()
    if top <= 0:
        return " " * len(cols)
    levels = np.ceil(cols / top * (len(BARS) - 1)).astype(int)
    return "".join(BARS[k] for k in levels.tolist())


def binned(ts: np.ndarray, weights: np.ndarray, start: int, end: int, width: int) -> np.ndarray:
    """`weights` summed into `width` equal time bins over [start, end]."""
    span = max(end - start, 1)
    col = np.clip(((ts - start) * width) // span, 0, width - 1).astype(np.int64)
    return np.bincount(col, weights=weights, minlength=width)[:width]
