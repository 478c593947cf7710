"""Turn the analyzer's final per-flow state into the result tables and the capture summary.

The `flow` id is `SRC>DST:0xQPN` (e.g. `10.0.0.1>10.0.0.2:0x0000d2`): source and destination
endpoint as in `src_ip`/`dst_ip` and the destination QP; it is unique per flow and stable across
runs and chunk sizes.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.cc_match import FLOW_CC_COLUMNS, flow_columns
from roceview.analysis.connections import flow_connections
from roceview.analysis.opcode_classes import TRANSPORT_NAMES
from roceview.analysis.ops_rows import table as ops_table
from roceview.analysis.priorities import priorities_table
from roceview.analysis.result import AnalysisResult
from roceview.analysis.tables import FLOW_COLUMNS, Table, format_ts
from roceview.packets.batch import PROTO_NAMES
from roceview.packets.names import flow_name, mac_text

_COPY = ("packets", "bytes", "data_packets", "payload_bytes", "acks", "naks_seq", "naks_rnr",
         "naks_other", "gap_events", "gap_psns", "retransmitted_packets", "retransmitted_bytes",
         "ecn_not_ect", "ecn_ce", "cnp_packets", "first_ts", "last_ts")


def flow_names(an) -> tuple[list[str], list[str], list[str]]:
    src, dst = an.registry.endpoint_names()
    qps = an.registry.qp.tolist()
    return [flow_name(s, d, q) for s, d, q in zip(src, dst, qps)], src, dst


def flows_table(an, names, src, dst) -> Table:
    n = an.registry.n
    st = an.flow
    data = {"flow": names, "src_ip": src, "dst_ip": dst,
            "dest_qp": an.registry.qp.astype(np.int64)}
    peer = an.pairing.peer[:n]
    data["peer_qp"] = np.where(peer >= 0, an.registry.qp[np.maximum(peer, 0)].astype(np.int64), -1)
    data["transport"] = [TRANSPORT_NAMES[t] if t >= 0 else "" for t in st.transport[:n].tolist()]
    for name in _COPY:
        data[name] = getattr(st, name)[:n].copy()
    data["unrecovered_psns"] = an.spaces.unrecovered_per_flow(n)
    p50, p99 = an.rtt.percentiles(n)
    data["rtt_p50_us"], data["rtt_p99_us"] = p50 / 1000.0, p99 / 1000.0
    duration = (st.last_ts[:n] - st.first_ts[:n]).astype(np.float64)
    unique_payload = (st.payload_bytes[:n] - st.retransmitted_payload[:n]) * 8.0
    with np.errstate(divide="ignore", invalid="ignore"):
        data["goodput_gbps"] = np.where(duration > 0, unique_payload / duration, np.nan)
    data["connection"] = [""] * n                      # build_result: from the CM connections
    for c in FLOW_CC_COLUMNS:                          # build_result: from the CNP reactions
        data[c] = np.full(n, np.nan) if c.endswith("_p50") else np.zeros(n, dtype=np.int64)
    return Table(FLOW_COLUMNS, data)


def cc_tables(an, names: list[str], flows: Table) -> Table:
    """cc.csv from the Analyzer's CnpReactions, each CNP given to the data flow the pairing
    pairs its flow with; its per-sender summary into `flows` (qps.csv's DCQCN columns; flows
    without CNPs or CE keep zero counts and blank medians)."""
    cc = an.cc
    peer = an.pairing.peer
    peers = {names[f]: names[peer[f]] for f in cc.cnp.received if f < len(peer) and peer[f] >= 0}
    table = cc.table(peers)
    per_flow = flow_columns(cc, table, peers)
    if per_flow:
        at = {name: i for i, name in enumerate(names)}
        for name, row in per_flow.items():
            for c in FLOW_CC_COLUMNS:
                flows.data[c][at[name]] = row[c]
    return table


def summary(an, files, warnings, flows: Table) -> dict:
    first, last = an.first_ts, an.last_ts
    counts = {name: int(c) for name, c in zip(PROTO_NAMES, an.proto_counts.tolist())}
    d = flows.data
    return {
        "files": [str(f) for f in files],
        "packets": int(an.rows_seen),
        "first_ts": format_ts(first) if first is not None else None,
        "last_ts": format_ts(last) if last is not None else None,
        "duration_ns": int(last - first) if first is not None else 0,
        "protocols": counts,
        "roce_packets": counts["roce_v1"] + counts["roce_v2"] + counts["ib"],
        "flows": len(flows),
        "decode_warnings": len(warnings),
        "warnings": [str(w) for w in warnings[:100]],
        "pmtu": int(an.pmtu_given or an.path_mtu.seen or 0) or None,
        "pmtu_contradiction": an.path_mtu.contradiction(),     # why the capture contradicts --pmtu
        "link_speed_gbps": an.link_speed_gbps,
        "bucket_ms": an.bucket_ms,
        "timeline_bucket_ms": an.timeline.bucket_ns / 1e6,   # longer than bucket_ms past MAX_ROWS
        "events_not_listed": {k: n for k, n in an.events.dropped.items() if n},   # past MAX_PER_KIND
        "operations": an.ops.summary(),                       # ops.csv: listed, past its budget, ...
        "connections_not_listed": an.connections.dropped,     # connections.csv: past MAX_CONNECTIONS
        "detected": {
            "gap_events": int(np.sum(d["gap_events"])), "gap_psns": int(np.sum(d["gap_psns"])),
            "unrecovered_psns": int(np.sum(d["unrecovered_psns"])),
            "retransmitted_packets": int(np.sum(d["retransmitted_packets"])),
            "timeout_retransmits": an.events.count("timeout_retransmit"),
            "duplicate_frames": an.events.count("duplicate"),
            "naks_seq": int(np.sum(d["naks_seq"])), "naks_rnr": int(np.sum(d["naks_rnr"])),
            "naks_other": int(np.sum(d["naks_other"])), "ecn_ce": int(np.sum(d["ecn_ce"])),
            "cnp_packets": int(np.sum(d["cnp_packets"])),
            "pause_frames": int(an.pfc.st.pause_frames.sum()),
            "resume_frames": int(an.pfc.st.resume_frames.sum()),
        },
    }


def build_result(an, files, warnings, packets, snapshot: bool = False) -> AnalysisResult:
    names, src, dst = flow_names(an)
    flows = flows_table(an, names, src, dst)
    connections = an.connections.table()
    flows.data["connection"] = flow_connections(flows, connections)
    cc = cc_tables(an, names, flows)
    macs = [mac_text(m) for m in an.pfc.mac_list]
    ops = an.ops
    pfc = an.pfc.table()
    counted = an.priorities.state() if an.priorities is not None else None
    return AnalysisResult(
        flows_table=flows, pfc_table=pfc, events_table=an.events.table(names, macs),
        timeline_table=an.timeline.table(names), summary=summary(an, files, warnings, flows),
        packets=packets, ops_table=ops_table(ops.rows(an, snapshot), names, src, dst, an.registry.qp),
        op_stats_table=ops.stats.table(names), read_depth_table=ops.stats.depth_table(names),
        connections_table=connections, priorities_table=priorities_table(counted, pfc, an.priority_table), cc_table=cc,
        paused_flows_table=an.pause_watch.table(an, names))
