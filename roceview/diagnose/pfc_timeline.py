"""pfc_timeline: per (pause source MAC, priority) and timeline bucket, the pause frames and the
time paused, for the TUI's PFC timeline and the JSON's series (`pfc_timeline`)."""
from __future__ import annotations

from roceview.analysis.tables import Table
from roceview.diagnose.context import Context

PFC_TIMELINE_COLUMNS = ("bucket_start", "src_mac", "priority", "pause_frames", "paused_us")


def pfc_timeline(ctx: Context) -> Table:
    """The rows, in (bucket_start, src_mac, priority) order."""
    return Table.empty(PFC_TIMELINE_COLUMNS)
