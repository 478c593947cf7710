"""read_depth_limited: a requester that keeps as many RDMA READs (and atomics) in flight as its
initiator depth allows, most of the time it has any: more READs wait in its send queue.

A QP may have at most `initiator_depth` RDMA READ / atomic requests outstanding (IBTA 9.7.2.1,
the QP attribute max_rd_atomic; the responder accepts at most its responder resources,
max_dest_rd_atomic). RDMA CM negotiates both in the REQ / REP (IBTA 12.6.5: initiator depth,
responder resources). The analysis measures each requester's READ depth over time (ops_depth.py:
`read_depth`); this rule compares it with the negotiated depth, which only the CM handshake shows:
without it the limit is unknown (an application that posts that many READs at a time looks the
same on the wire) and the rule says nothing.

Rule: the requester's READ depth reached its initiator depth and averaged at least
READ_DEPTH_SHARE of it over the time it had a READ in flight, over at least
READ_DEPTH_MIN_READS READs and READ_DEPTH_MIN_NS of READ time. (At the capture point a held-back
READ leaves a moment after the completion that frees its place, the round trip between the
capture point and the requester: the depth seen dips below the limit after each completion,
more so the faster READs complete, so the rule asks for the average, not the time at the limit.)
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.units import count, duration, plural

READ_DEPTH_SHARE = 0.75
READ_DEPTH_MIN_READS = 32
READ_DEPTH_MIN_NS = 20_000
SHOWN = 10               # READs that waited listed as the finding's frames (with the first and last)


def read_depth_findings(ctx, result) -> list[dict]:
    """The findings, each listing the first frames of the READs that waited (`frames_given`)."""
    return given_frames(_records(ctx, result), SHOWN)


def frames_by_finding(ctx, result) -> dict[tuple, list[int]]:
    """Every frame of each finding, as `roceview.finding` selects them (evidence_frames.py)."""
    return frames_by_key(_records(ctx, result))


def _records(ctx, result) -> list[tuple[dict, list[int]]]:
    limits = negotiated_depth(result)
    depth = result.read_depth_table
    if not limits or not len(depth):
        return []
    d = depth.data
    flows = np.asarray(list(d["flow"]), dtype=object)
    out = []
    for name in sorted(set(flows.tolist()) & set(limits)):
        m = flows == name
        f = _one(name, limits[name], np.asarray(d["depth"])[m], np.asarray(d["time_ns"])[m],
                 np.asarray(d["reads"])[m], ctx, result)
        if f is not None:
            out.append(f)
    return out


def _one(name: str, limit: int, depth, time_ns, reads, ctx, result) -> tuple[dict, list[int]] | None:
    busy = depth >= 1
    active = int(time_ns[busy].sum())
    n_reads = int(reads.sum())
    if limit < 1 or n_reads < READ_DEPTH_MIN_READS or active < READ_DEPTH_MIN_NS:
        return None
    reached = int(depth[(time_ns > 0) | (reads > 0)].max(initial=0))
    mean = float((depth[busy] * time_ns[busy]).sum()) / active
    if reached < limit or mean < READ_DEPTH_SHARE * limit:
        return None
    near = int(np.ceil(READ_DEPTH_SHARE * limit))
    waited = int(reads[depth >= near].sum())
    row = ctx.flow[name] if name in ctx.flow else {}
    peer = ctx.peer(name)
    summary = (f"The requester of {name} kept its RDMA READs at its initiator depth of {limit}: {mean:.1f} in "
               f"flight on average while it had any, more READs waited in its send queue.")
    frames = _waiting(result, name, near)
    evidence = [f"READ depth reached {reached}, the initiator depth RDMA CM negotiated ({limit}), and averaged "
                f"{mean:.1f} over {duration(active)} with READs in flight",
                f"{plural(n_reads, 'READ')}, {count(waited)} of them started with {near} or more already in flight",
                _latency(result, name)]
    advice = ("Raise the depth both ends agree on: the initiator depth (rdma_cm conn_param.initiator_depth; "
              "ibv_modify_qp max_rd_atomic) and the peer's responder resources (responder_resources; "
              "max_dest_rd_atomic), within what the devices allow (`ibv_devinfo -v`: max_qp_init_rd_atom, "
              "max_qp_rd_atom). Else issue fewer, larger READs, or spread them over more QPs. "
              "Each READ waits a round trip for its responses: with the depth full, READ throughput is the "
              "depth times the READ size over the READ latency.")
    flows = [name] + ([peer] if peer else [])
    start, end = int(row.get("first_ts", 0) or 0), int(row.get("last_ts", 0) or 0)
    return finding("warning", "read_depth_limited", summary, flows, start, end, [e for e in evidence if e], advice), frames


def _waiting(result, name: str, near: int) -> list[int]:
    """The first frames of the READs that started with `near` or more in flight, ascending (the
    ops.csv rows: as far as its row budget lists them)."""
    d = result.ops_table.data
    if not len(result.ops_table):
        return []
    flow = np.asarray(list(d["flow"]), dtype=object)
    m = (flow == name) & (np.asarray(list(d["op"]), dtype=object) == "READ") & (np.asarray(d["outstanding"]) >= near)
    return sorted(int(f) for f in np.asarray(d["first_frame"])[m].tolist())


def _latency(result, name: str) -> str:
    st = result.op_stats_table.data
    for i, (flow, op) in enumerate(zip(st["flow"], st["op"])):
        if flow == name and op == "READ" and st["completed"][i]:
            return (f"READ latency p50 {duration(st['latency_p50_us'][i] * 1000)}, p99 "
                    f"{duration(st['latency_p99_us'][i] * 1000)}")
    return ""


def negotiated_depth(result) -> dict[str, int]:
    """Requester flow -> the READ depth RDMA CM negotiated for it: the client's requests (to the
    server's QP) the REQ's initiator depth, the server's (to the client's QP) the REQ's responder
    resources (what the client accepts as responder). From the connections table (connections.csv)
    when the analysis has one; {} otherwise."""
    table = getattr(result, "connections_table", None)
    need = ("client_ip", "server_ip", "client_qp", "server_qp", "initiator_depth", "responder_resources")
    if table is None or not len(table) or any(c not in table.data for c in need):
        return {}
    d = table.data
    out: dict[str, int] = {}
    for i in range(len(table)):
        client, server = d["client_ip"][i], d["server_ip"][i]
        for src, dst, qp, depth in ((client, server, d["server_qp"][i], d["initiator_depth"][i]),
                                    (server, client, d["client_qp"][i], d["responder_resources"][i])):
            if _known(qp) and _known(depth) and src and dst:
                out[f"{src}>{dst}:0x{int(qp):06x}"] = int(depth)
    return out


def _known(v) -> bool:
    try:
        return v is not None and v == v and int(v) >= 0
    except (TypeError, ValueError):
        return False
