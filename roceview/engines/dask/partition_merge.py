"""Partitions' analysis results (partition_run.run_partition) merged into the result the
local engine gives on the whole capture, or None when a partitioned run cannot promise that.

Flows are disjoint across partitions, so per-flow rows are taken as they are and put in the
whole capture's order: qps.csv by first appearance, events by (time, frame, kind) as
EventLog.table sorts them, timeline rows by (bucket, flow) as Timeline.table. What couples all
flows is checked instead: an event budget or the timeline's row bound reached by the sum of
the partitions (the local engine would have dropped events; its timeline doubles its buckets
only once more than MAX_ROWS / 2 distinct (bucket, flow) rows exist), CNPs past cc.csv's row
budget (the local engine judges only the capture's first ones: a partition judges its own
first ones, and qps.csv's DCQCN columns count the judged), or a chunk held back for path-MTU
evidence (the local engine holds every flow's rows with it).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from roceview.analysis.connections import flow_connections
from roceview.analysis.events import KIND_CODE, MAX_PER_KIND
from roceview.analysis.tables import TIMELINE_COLUMNS, Coded, Table
from roceview.analysis.timeline import (FIELDS, MAX_ROWS, as_table, cell_rows, grid_cells, grid_places, placed,
                                       sorted_sums)


def exact(parts: list[dict], bucket_ns: int, n_chunks: int) -> tuple[str | None, int]:
    """(why the partitions' results may differ from the local engine's or None, the timeline's
    bucket length the local engine ends with)."""
    if any(p["held"] for p in parts):
        return "rows were held back for path-MTU evidence", bucket_ns
    for kind in parts[0]["event_counts"] if parts else ():
        if sum(p["event_counts"][kind] for p in parts) > MAX_PER_KIND:
            return f"the {kind} events reached their budget", bucket_ns
    from roceview.analysis.cc import MAX_ROWS as CC_ROWS

    if sum(p.get("cnps", 0) for p in parts) > CC_ROWS:      # (hand-made results in tests carry none)
        return "the CNPs reached cc.csv's row budget", bucket_ns
    level = _timeline_level(parts, n_chunks)
    if level is None or any(p["bucket_ns"] > bucket_ns << level for p in parts):
        return "the timeline's buckets cannot be told", bucket_ns
    return None, bucket_ns << level


def _timeline_level(parts: list[dict], n_chunks: int, max_rows: int = MAX_ROWS) -> int | None:
    """How often the local Timeline doubles its buckets (Timeline.feed/_bound replayed on the
    partitions' per-chunk row counts: a chunk's rows are the sum of its partitions')."""
    from roceview.engines.dask.partition_run import LEVELS

    counts = np.zeros((max(n_chunks, 1), 2, LEVELS), np.int64)
    for p in parts:
        for chunk, c in p["timeline_record"]:
            counts[chunk] += c
    # rows stamped out of time order within a flow: the new rows cannot be told, but they
    # are needed only once the rows added (told exactly, whatever the order) pass the bound
    if any(p["timeline_unsure"] for p in parts) and counts[:, 0, 0].sum() > max_rows:
        return None
    level, rows, distinct = 0, 0, np.zeros(LEVELS, np.int64)
    for added, new in counts.tolist():
        distinct += new
        rows += added[level]
        if rows > max_rows:
            merged = distinct[level]
            while merged > max_rows // 2:
                level += 1
                if level == LEVELS:
                    return None
                merged = distinct[level]
            rows = merged
    return level


def concat(tables: list[Table]) -> Table:
    columns = tables[0].columns
    data = {}
    for c in columns:
        values = [t.data[c] for t in tables]
        if all(isinstance(v, Coded) for v in values):       # the ops table's: codes, not a str a row
            data[c] = _coded(values)
        else:
            data[c] = np.concatenate(values) if isinstance(values[0], np.ndarray) else [x for v in values for x in v]
    return Table(columns, data)


def _coded(columns: list[Coded]) -> Coded:
    names: dict = {}
    codes = []
    for col in columns:
        remap = np.array([names.setdefault(n, len(names)) for n in col.names], np.int64)
        codes.append(remap[col.codes] if len(remap) else col.codes)
    return Coded(np.concatenate(codes) if codes else np.zeros(0, np.int64), list(names))


def merge(parts: list[dict], names: list[str], stats: list[dict], settings: dict, files, warnings,
          bucket_ns: int):
    """The AnalysisResult of the whole capture from its partitions' (the last one: PFC frames)."""
    from roceview.analysis.build import summary
    from roceview.analysis.pmtu import PathMtu
    from roceview.analysis.result import AnalysisResult

    from roceview.engines.dask.partition_run import from_wire

    tables = {k: [from_wire(p[k]) for p in parts] for k in ("flows", "events", "timeline", "pfc", "ops", "op_stats",
                                                             "read_depth", "cc", "paused_flows")}
    rank = {name: i for i, name in enumerate(names)}
    flows = concat(tables["flows"])
    flows = flows.take(np.argsort([rank[n] for n in flows.data["flow"]], kind="stable"))
    events = concat(tables["events"])
    code = np.array([KIND_CODE[k] for k in events.data["kind"]], np.int64)
    events = events.take(np.lexsort((code, events.data["frame"], events.data["ts"])))
    path_mtu = PathMtu(settings["pmtu"])
    path_mtu.seen = max(p["pmtu_seen"] for p in parts)
    path_mtu.largest_payload = max(p["largest_payload"] for p in parts)
    path_mtu.other_sizes = set().union(*(p["pmtu_other"] for p in parts))
    counts = {k: sum(p["event_counts"][k] for p in parts) for k in parts[0]["event_counts"]}
    firsts = [s["first_ts"] for s in stats if s["first_ts"] is not None]
    lasts = [s["last_ts"] for s in stats if s["last_ts"] is not None]
    protocols = np.sum([s["protocols"] for s in stats], axis=0)
    log = _connections(parts)
    connections = log.table()
    an = SimpleNamespace(
        first_ts=min(firsts) if firsts else None, last_ts=max(lasts) if lasts else None, proto_counts=protocols,
        rows_seen=int(protocols.sum()), pmtu_given=settings["pmtu"], path_mtu=path_mtu,
        link_speed_gbps=settings["link_speed"], bucket_ms=settings["bucket_ms"],
        timeline=SimpleNamespace(bucket_ns=bucket_ns),
        events=SimpleNamespace(dropped={k: 0 for k in counts}, count=counts.__getitem__),
        ops=SimpleNamespace(summary=lambda: _ops_summary(parts)), connections=log,
        pfc=SimpleNamespace(st=SimpleNamespace(pause_frames=np.array([sum(p["pause_frames"] for p in parts)]),
                                               resume_frames=np.array([sum(p["resume_frames"] for p in parts)]))))
    flows.data["connection"] = flow_connections(flows, connections)
    pfc = tables["pfc"][-1]
    return AnalysisResult(flows_table=flows, pfc_table=pfc, events_table=events,
                          timeline_table=_timeline(tables["timeline"], rank, names, bucket_ns),
                          summary=summary(an, list(files), list(warnings), flows),
                          ops_table=_ops(tables["ops"]), op_stats_table=_by_flow(tables["op_stats"], rank, "op"),
                          read_depth_table=_by_flow(tables["read_depth"], rank, "depth"),
                          connections_table=connections,
                          priorities_table=_priorities(stats, pfc, settings.get("priority_table")),
                          cc_table=_in_frame_order(tables["cc"], "cnp_frame"),
                          paused_flows_table=_paused_flows(tables["paused_flows"], pfc, rank))


def _paused_flows(tables: list[Table], pfc: Table, rank: dict) -> Table:
    """paused_flows: the partitions' rows (flows are disjoint) in pfc.csv's order of (MAC,
    priority), then the flows' order, as PauseWatch.table lists them."""
    rows = concat(tables)
    if not len(rows):
        return rows
    at = {key: i for i, key in enumerate(zip(pfc.data["src_mac"], pfc.data["priority"]))}
    pause = np.array([at[key] for key in zip(rows.data["src_mac"], rows.data["priority"])], np.int64)
    flow = np.array([rank[f] for f in rows.data["flow"]], np.int64)
    return rows.take(np.lexsort((flow, pause)))


def _priorities(stats: list[dict], pfc: Table, table) -> Table:
    """priorities.csv: the files' counters summed (each read counted every row of its file),
    each class's priority from `table` (the Analyzer's priority_table; None: the default)."""
    from roceview.analysis.priorities import merged, priorities_table

    return priorities_table(merged([s["priorities"] for s in stats]), pfc, table)


def _connections(parts: list[dict]):
    """connections.csv: each partition saw part of a handshake (the REQ and the REP are flows
    of their own), so their CM messages are read again together, in capture order."""
    from roceview.analysis.connections import ConnectionLog

    lasts = [p["cm_last_ts"] for p in parts if p["cm_last_ts"] is not None]
    messages = [m for p in parts for m in p["cm_messages"]]
    return ConnectionLog.replay(messages, max(lasts) if lasts else None)


def _ops(tables: list[Table]) -> Table:
    """The partitions' operations in first-frame order, the whole capture's first MAX_ROWS: each
    partition kept its own first MAX_ROWS, so every one of those is there (ops_rows.py)."""
    from roceview.analysis.ops_rows import MAX_ROWS

    return _in_frame_order(tables, "first_frame", MAX_ROWS)


def _in_frame_order(tables: list[Table], frame: str, limit: int | None = None) -> Table:
    """The partitions' rows in the order of their `frame` column (capture order, as the local
    engine lists them), the first `limit`: each partition kept its own first `limit`, so every
    one of the whole capture's first is there. cc.csv's own budget is checked by exact()."""
    rows = concat(tables)
    return rows.take(np.argsort(rows.data[frame], kind="stable")[:limit])


def _by_flow(tables: list[Table], rank: dict, then: str) -> Table:
    """Per-flow rows (op_stats, read_depth) in the flows' order, then by `then` (its order in
    each partition: the operation's code, the depth), as the local engine lists them."""
    merged = concat(tables)
    if not len(merged):
        return merged
    flow = np.array([rank[f] for f in merged.data["flow"]], np.int64)
    within = np.concatenate([np.arange(len(t)) for t in tables])       # each partition's own order
    return merged.take(np.lexsort((within, flow)))


def _ops_summary(parts: list[dict]) -> dict:
    from roceview.analysis.ops_rows import MAX_ROWS

    total = {k: sum(p["ops_summary"][k] for p in parts) for k in ("count", "late_packets", "unmatched_packets")}
    listed = min(total["count"], MAX_ROWS)
    return {"count": total["count"], "listed": listed, "not_listed": total["count"] - listed,
            "late_packets": total["late_packets"], "unmatched_packets": total["unmatched_packets"]}


def _timeline(timelines: list[Table], rank: dict, names: list[str], bucket_ns: int) -> Table:
    """The partitions' timelines in buckets of `bucket_ns` (theirs, or a power of two times):
    rows of the same (bucket, flow) summed, in (bucket, flow) order, as Timeline.table."""
    tables = [t for t in timelines if len(t)]
    if not tables:
        return Table.empty(TIMELINE_COLUMNS)          # as Timeline.table with no rows
    bucket = [t.data["bucket_start"] // bucket_ns for t in tables]
    flow = [np.array([rank[x] for x in t.data["flow"].names], np.int64)[t.data["flow"].codes] for t in tables]
    grid = grid_cells(bucket, flow, sum(len(t) for t in tables))
    if grid is None:
        return _sorted(tables, np.concatenate(bucket), np.concatenate(flow), names, bucket_ns)
    return _dense(tables, bucket, grid, names, bucket_ns)


def _dense(tables: list[Table], cells: list[np.ndarray], grid: tuple[int, int, int], names: list[str],
           bucket_ns: int) -> Table:
    """The rows placed by their cell of a (bucket, flow) grid (`cells`: each table's, `grid`:
    timeline.grid_cells), so no sort (the stable argsort of every row's key and a gather of
    every column were 0.07 s of the driver's 0.08 s merge, 2 partitions of 1 M rows). Whatever
    order the rows come in; rows sharing a cell are summed (a partition's buckets shorter than
    the whole's)."""
    at, places = grid_places(cells, grid[0])
    bucket, flow = cell_rows(at, grid)
    return as_table(bucket, flow, [placed(places, [t.data[c] for t in tables], len(at)) for c in FIELDS], names,
                  bucket_ns)


def _sorted(tables: list[Table], bucket: np.ndarray, flow: np.ndarray, names: list[str], bucket_ns: int) -> Table:
    """_dense's rows by sorting them, where its grid would be much larger than the rows (flows
    active at different times of a long capture)."""
    bucket, flow, *sums = sorted_sums(bucket, flow, [None, None] + [[t.data[c] for t in tables] for c in FIELDS])
    return as_table(bucket, flow, sums, names, bucket_ns)


def merge_facts(parts: list[dict], stats: list[dict], ts_backwards: tuple):
    """The FactCollector's CaptureFacts of the whole capture."""
    from roceview.diagnose.facts import CaptureFacts

    facts = [p["facts"] for p in parts]
    seen = [(s, i, j) for i, f in enumerate(facts) for j, s in enumerate(f["first_seen"])]
    classes = [facts[i]["classes"][j] for _, i, j in sorted(seen)]
    lldp: dict[int, int] = {}
    for _, mac, bits in sorted(x for s in stats for x in s["lldp"]):
        lldp[int(mac)] = int(bits)
    back, back_max, back_frames = ts_backwards
    return CaptureFacts(
        classes=classes, bad_icrc_frames=sorted(x for f in facts for x in f["bad_icrc_frames"])[:5],
        truncated_frames=sum(s["truncated"] for s in stats),
        truncated_first=sorted(x for s in stats for x in s["truncated_first"])[:5],
        ts_backwards=back, ts_backwards_max_ns=back_max, ts_backwards_frames=back_frames,
        lldp_pfc=lldp, read_breaks=[x for f in facts for x in f["read_breaks"]])
