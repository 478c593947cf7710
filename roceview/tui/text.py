"""Small text helpers shared by the screens (no Textual: unit-testable), and the one number
style of roceview/units.py in the TUI: the report's column names (render/report.py's QP and PFC
tables), counts with thousands separators, durations and Gb/s by magnitude, a blank for no value
(NaN, a missing peer), numbers right-aligned. qps.csv / pfc.csv keep their machine formats."""
from __future__ import annotations

import math

import numpy as np
from rich.text import Text

from roceview import units
from roceview.analysis.tables import KINDS, slow_text

SEVERITY_STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
BARS = " ▁▂▃▄▅▆▇█"


def severity_style(severity: str) -> str:
    return SEVERITY_STYLES.get(severity, "")


# the report's head of each flows / pfc table column it shows; the others keep their CSV names
HEADS = {"flow": "flow", "peer_qp": "peer", "transport": "tr", "packets": "pkts", "gap_events": "gaps",
         "gap_psns": "gap PSNs", "unrecovered_psns": "unrecov", "retransmitted_packets": "retx",
         "naks_seq": "NAK seq", "naks_rnr": "RNR", "naks_other": "NAK other", "ecn_ce": "CE", "cnp_packets": "CNP",
         "rtt_p50_us": "RTT p50", "rtt_p99_us": "RTT p99", "goodput_gbps": "Gb/s", "src_mac": "source MAC",
         "priority": "priority", "pause_frames": "pauses", "resume_frames": "resumes", "pause_quanta": "quanta",
         "paused_us": "paused", "longest_pause_us": "longest"}


def duration(seconds: float) -> str:
    """A duration given in seconds, as the report writes one ('150.018 ms', '1.829 us')."""
    return units.seconds(seconds)


def head(column: str) -> str:
    """The name a table column is shown under: the report's, else the CSV's."""
    return HEADS.get(column, column)


def is_number(column: str) -> bool:
    """A column of numbers (right-aligned), not of names, addresses, QPs or times."""
    return KINDS.get(column, "int") in ("int", "nint", "float")


def cell_text(column: str, value) -> str:
    """One value of a flows or pfc table column as the report writes it: '1,698', '1.829 us'
    (a *_us column), '17.7' (Gb/s); '' for no value (NaN, a negative 'nint', a missing QP)."""
    kind = KINDS.get(column, "int")
    if kind == "float":
        if column.endswith("_us"):
            return units.duration(None if value is None else float(value) * 1000.0)
        return units.gbps(value) if column.endswith("gbps") else _plain_float(value)
    if kind in ("int", "nint"):
        return "" if value is None or (kind == "nint" and value < 0) else units.count(value)
    return slow_text([value] if kind == "str" else np.asarray([value]), kind)[0]


def _plain_float(value) -> str:
    return "" if value is None or math.isnan(float(value)) else f"{float(value):,.3f}"


def right(text: str) -> Text:
    """A DataTable cell shown right-aligned (a number)."""
    return Text(text, justify="right")


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
