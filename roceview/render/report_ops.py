"""The report's operations section: per queue pair and operation, how many, the latency p50 /
p99 / max from the first packet to the completion the capture shows, the message sizes; the
READ depth of the requesters of RDMA READs (and the initiator depth RDMA CM negotiated).

Flows in the order of the queue-pair table (worst first), the same `max_qps` of them. Columns
are left out from the right (sizes, then max) when the table does not fit the width; `--wide`
keeps them all. op_stats in --json (and `result.op_stats`) has every flow.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.ops_stats import SIZE_COLUMNS, SIZE_LABELS
from roceview.render.screen import Screen, table_width
from roceview.units import count, duration, plural

_KEEP = 5            # flow, op, ops, p50, p99 stay; max and sizes go first


def print_operations(result, console: Screen, order: np.ndarray, max_qps: int, wide: bool) -> None:
    st = getattr(result, "op_stats_table", None)
    info = result.summary.get("operations") or {}
    if st is None or not len(st):
        return
    console.print("\n" + console.style("Operations", "bold") + f" ({plural(int(info.get('count', 0)), 'RDMA message')},"
                  " latency to the completion seen)")
    names = result.flows_table.data["flow"]
    shown = [names[i] for i in order.tolist()]
    flows = [f for f in dict.fromkeys(shown) if f in set(st.data["flow"])]
    hidden = len(flows) - max_qps if max_qps > 0 else 0
    flows = flows[:max_qps] if max_qps > 0 else flows
    heads, rows = _rows(st, flows, console.ellipsis)
    if not wide:
        while len(heads) > _KEEP and table_width(heads, rows, tight=True) > console.width:
            heads, rows = heads[:-1], [r[:-1] for r in rows]
    console.table(heads, rows, right={2, 3, 4, 5})
    if hidden > 0:
        console.para(f"{console.ellipsis} {count(hidden)} more queue pairs with operations: op_stats in --json")
    _depth(result, flows, console)
    if info.get("not_listed"):
        console.para(f"ops.csv lists the first {count(info['listed'])} operations; not listed: "
                     f"{count(info['not_listed'])} (counted above)")


def _rows(st, flows: list[str], ellipsis: str):
    d = st.data
    where: dict[str, list[int]] = {}
    for i, f in enumerate(d["flow"]):
        where.setdefault(f, []).append(i)
    heads = ["flow", "op", "ops", "p50", "p99", "max", "sizes (bytes)"]
    rows = []
    for f in flows:
        for k, i in enumerate(where[f]):
            sizes = ", ".join(f"{label} {count(int(d[c][i]))}" for label, c in zip(SIZE_LABELS, SIZE_COLUMNS)
                              if int(d[c][i]))
            rows.append((f if k == 0 else "", d["op"][i], count(int(d["operations"][i])),
                         _us(d["latency_p50_us"][i]), _us(d["latency_p99_us"][i]), _us(d["latency_max_us"][i]),
                         sizes))
    return heads, rows


def _us(value) -> str:
    return duration(float(value) * 1000.0)


def _depth(result, flows: list[str], console: Screen) -> None:
    """A line per requester of RDMA READs: the deepest it went, its average over its READ time,
    the initiator depth RDMA CM negotiated when the capture shows it."""
    d = result.read_depth_table.data
    if not len(result.read_depth_table):
        return
    from roceview.diagnose.read_depth import negotiated_depth

    limits = negotiated_depth(result)
    flow = np.asarray(list(d["flow"]), dtype=object)
    depth, time_ns = np.asarray(d["depth"]), np.asarray(d["time_ns"])
    for name in flows:
        m = flow == name
        if not m.any():
            continue
        busy = m & (depth >= 1)
        active = int(time_ns[busy].sum())
        top = int(depth[m & ((time_ns > 0) | (np.asarray(d["reads"]) > 0))].max(initial=0))
        mean = float((depth[busy] * time_ns[busy]).sum()) / active if active else 0.0
        limit = f", initiator depth {limits[name]}" if name in limits else ""
        console.para(f"READ depth {name}: up to {top}{limit}, {mean:.1f} on average over {duration(active)} "
                     "with READs in flight")
