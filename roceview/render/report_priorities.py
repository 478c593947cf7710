"""The report's priorities section (after the PFC table): per priority and direction, the
traffic, its RoCE and CE share and the pauses that held it, side by side. Rows with neither
RoCE nor pauses (LAN traffic beside the fabric's) are summed up in one line; priorities.csv
(--csv) and --json have every row and column."""
from __future__ import annotations

import numpy as np

from roceview.render.screen import Screen, table_width
from roceview.units import count, duration, plural

SHOWN = 20           # rows listed; a fabric of many MAC pairs lists the first and counts the rest
HEADS = ("prio", "direction", "PCP/DSCP", "packets", "RoCE", "CE", "pauses", "paused")
DROPPED = ("PCP/DSCP", "pauses")    # left out, in this order, where the lines would be cut (--wide: never)


def print_priorities(result, console: Screen) -> None:
    table = getattr(result, "priorities_table", None)
    if table is None or not len(table):
        return
    d = table.data
    telling = (np.asarray(d["roce_packets"]) > 0) | (np.asarray(d["pause_frames"]) + np.asarray(d["resume_frames"]) > 0)
    rows = np.flatnonzero(telling)
    console.print("\n" + console.style("Priorities", "bold") + " (priority: VLAN PCP, else DSCP >> 3)")
    if len(rows):
        cells = [priority_cells({c: d[c][i] for c in table.columns}) for i in rows[:SHOWN].tolist()]
        heads, cells = _fitting(list(HEADS), cells, console)
        console.table(heads, cells, right={i for i, h in enumerate(heads) if h not in ("prio", "direction", "PCP/DSCP")})
    if len(rows) > SHOWN:
        console.para(f"{console.ellipsis} {count(len(rows) - SHOWN)} more: priorities.csv (--csv) or --json")
    other = np.flatnonzero(~telling)
    if len(other):
        packets = int(np.asarray(d["packets"])[other].sum())
        console.para(f"{plural(len(other), 'other row')} without RoCE or pauses: {plural(packets, 'packet')}")
    elif not len(rows):
        console.print("  no RoCE traffic or pauses")


def priority_cells(r: dict) -> list[str]:
    """One row's cells: `3  0e:..:10>0e:..:11  3/26  1,234  100.0%  2.1%  895  149.992 ms`."""
    direction = f"{r['src_mac'] or '?'}>{r['dst_mac'] or '?'}" if int(r["packets"]) else f"to {r['dst_mac']}"
    marks = "/".join(str(int(v)) if int(v) >= 0 else "-" for v in (r["pcp"], r["dscp"]))
    paused = duration(float(r["paused_us"]) * 1000.0) if int(r["pause_frames"]) else ""
    return [r["priority"] or "-", direction, "" if marks == "-/-" else marks, count(r["packets"]),
            _percent(r["roce_share"]), _percent(r["ce_share"]), count(r["pause_frames"]), paused]


def _fitting(heads: list[str], cells: list[list[str]], console: Screen) -> tuple[list[str], list]:
    """The columns that fit the terminal without a cut line: DROPPED left out one by one."""
    for name in DROPPED:
        if not console.crop or table_width(heads, cells, tight=True) <= console.width:
            break
        at = heads.index(name)
        heads, cells = heads[:at] + heads[at + 1:], [row[:at] + row[at + 1:] for row in cells]
    return heads, cells


def _percent(share) -> str:
    share = float(share)
    return "" if share != share else f"{share * 100:.1f}%"
