"""cm_reject, cm_retry, cm_slow_setup: what the RDMA CM handshakes of the capture say went wrong,
read from the connections table (connections.csv: analysis/connections.py, one row per CM
connection; a mirror's second copy of a MAD is not counted as a resend there).

* cm_reject: a connection the server (or the client) ended with a REJ (IBTA 12.6.7), by server,
  service and reason: critical when no connection to that server and service was established
  in the capture (nobody got in), else a warning (the service works; these were refused).
* cm_retry: a REQ or REP sent again (no answer within the response timeout: 12.9.2), a REQ
  never answered although resent, or an MRA (the receiver asked for more time: 12.6.6), by
  client, server, service and what happened. An MRA alone is info: the handshake went on. A
  capture that starts after the REQ or ends before the answer shows no resend and says nothing.
* cm_slow_setup: established connections whose first REQ to RTU took longer than config
  `cm_setup_ms`, by server and service, naming the slower leg (REQ to REP: the server; REP to
  RTU: the client).

Each lists its CM frames (`frames_given`: the REQs, REJs, resent REQs / REPs, MRAs, REPs, RTUs);
`frames_by_finding` gives every frame of each finding for `roceview.finding` (evidence_frames.py).
The flows are the two QP1 flows of the handshake: `-Y` on a finding selects its MADs.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.units import duration, plural

CM_KINDS = ("cm_reject", "cm_retry", "cm_slow_setup")
GSI_QP = 1
SHOWN = 10                     # frames listed between a finding's first and last (evidence_frames.TELLING)
_COUNTERS = "/sys/class/infiniband/<dev>/ports/<port>"   # Linux ib_cm's per-port CM counters (core/cm.c)
_REASON_ADVICE = {
    28: ("The server application refused the connection: on RDMA CM it called rdma_reject(), which sends a REJ "
         "with reason 28 and the application's private data (`roceview dissect -V` the REJ frame shows it); e.g. "
         "an NVMe-oF target refusing a host NQN it does not allow, or a queue it has no room for. Read the server "
         "application's log for why."),
    8: ("Nothing listens on that service ID on the server: Linux ib_cm answers a REQ whose service ID no listener "
        "registered with REJ reason 8 (cm_match_req), and rdma_connect() fails with RDMA_CM_EVENT_REJECTED, status "
        "8. Check that the server application runs and listens (rdma_listen) on that port and on the address the "
        "client resolved (`rdma resource show cm_id` on the server lists its CM ids, the listening ones in state LISTEN); for "
        "NVMe-oF the target port's addr_trsvcid in /sys/kernel/config/nvmet/ports/*/. The REJs are counted in "
        f"{_COUNTERS}/cm_tx_msgs/rej on the server and cm_rx_msgs/rej on the client."),
    10: ("The server still holds a connection of this client's QP (Linux ib_cm keeps it in timewait after a "
         "disconnect) and rejects a new one as stale (cm_match_req): the client reused a QP number too soon or an "
         "earlier connection was not torn down. Retry after the timewait, or disconnect cleanly first."),
    4: ("The other side's CM waited for an answer (a REP or an RTU) past its CM response timeout and gave up "
        "with REJ Timeout; the REJ's ARI holds the CA GUID of the side that timed out. See cm_retry for the "
        "MADs resent or lost."),
    27: ("The server cannot take as many RDMA READs at once as the client asked (responder resources): lower "
         "rdma_conn_param initiator_depth / responder_resources to what both devices allow (`ibv_devinfo -v`: "
         "max_qp_rd_atom, max_qp_init_rd_atom); the REJ's ARI holds the number available."),
    26: "The path MTU the REQ asked for is not one the server accepts: the REJ's ARI holds an acceptable one.",
}
_RESOURCES = ("The server's CM had no QP, EE context or other resources for the connection: it is out of QPs, CQs "
              "or memory. `rdma resource show` counts QPs and CM ids per device (compare with `ibv_devinfo -v` "
              "max_qp); close stale connections or raise the limits.")
_OTHER = ("IBTA 12.6.7 Table 103 defines the reason; where it has one, the REJ's ARI (additional reject "
          "information) carries the acceptable value (`roceview dissect -V` the REJ frame).")


def cm_findings(ctx, result) -> list[dict]:
    """The three kinds' findings over the result's connections table, with their frames."""
    return given_frames(_records(result, ctx.config), SHOWN)


def frames_by_finding(result, config) -> dict[tuple, list[int]]:
    """Every CM frame of each CM finding, by its (kind, flows, evidence): what the findings
    table keeps of it."""
    return frames_by_key(_records(result, config))


def _records(result, config) -> list[tuple[dict, list[int]]]:
    rows = _rows(getattr(result, "connections_table", None))
    if not rows:
        return []
    return _rejects(rows) + _retries(rows) + _slow(rows, config.cm_setup_ms * 1e6)


def _rows(table) -> list[dict]:
    need = ("state", "req_retries", "rep_retries", "mra_count", "retry_frames", "setup_us")
    if table is None or not len(table) or any(c not in table.data for c in need):
        return []
    d = table.data
    return [{c: d[c][i] for c in d} for i in range(len(table))]


def _group(rows: list[dict], key) -> dict:
    out: dict = {}
    for r in rows:
        k = key(r)
        if k is not None:
            out.setdefault(k, []).append(r)
    return out


def _frames(rows: list[dict], columns) -> list[int]:
    """The rows' frames in these columns (the `;`-joined retry_frames included), ascending."""
    out = set()
    for r in rows:
        for c in columns:
            v = r[c]
            out |= {int(x) for x in v.split(";") if x} if isinstance(v, str) else ({int(v)} if int(v) > 0 else set())
    return sorted(out)


def _flows(rows: list[dict]) -> list[str]:
    """The handshake's QP1 flows, both ways."""
    return sorted({f"{a}>{b}:0x{GSI_QP:06x}" for r in rows for a, b in ((r["client_ip"], r["server_ip"]),
                                                                    (r["server_ip"], r["client_ip"]))})


def _span(rows: list[dict]) -> tuple[int, int]:
    ts = [int(r[c]) for r in rows for c in ("req_ts", "rep_ts", "rtu_ts", "disconnect_ts") if int(r[c]) > 0]
    return (min(ts), max(ts)) if ts else (0, 0)


def _service(r: dict) -> str:
    return r["service"] or (f"service ID {r['service_id']}" if r["service_id"] else "an unknown service")


def _clients(rows: list[dict]) -> str:
    names = sorted({r["client_ip"] for r in rows})
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


# ---- cm_reject -----------------------------------------------------------------------------------
def _rejects(rows: list[dict]) -> list[tuple[dict, list[int]]]:
    served = {(r["server_ip"], r["service_id"]) for r in rows if int(r["rtu_ts"]) > 0}
    out = []
    groups = _group(rows, lambda r: (r["server_ip"], r["service_id"], r["reject_reason"])
                    if r["state"] == "rejected" else None)
    for (server, sid, reason), mine in sorted(groups.items()):
        nobody = (server, sid) not in served
        summary = (f"{server} rejected {plural(len(mine), 'connection')} to {_service(mine[0])} from "
                   f"{_clients(mine)}: {reason}" + (", and no connection to it was established." if nobody else "."))
        evidence = [f"REJ reason {reason} in frame{'s' if len(mine) > 1 else ''} "
                    f"{', '.join(str(int(r['reject_frame'])) for r in mine[:5])}, answering the REQ "
                    f"in frame{'s' if len(mine) > 1 else ''} {', '.join(str(int(r['req_frame'])) for r in mine[:5])}",
                    f"service ID {sid}" + (f" ({mine[0]['service']})" if mine[0]["service"] else ""),
                    "no connection to that server and service established in the capture" if nobody else
                    "other connections to that server and service were established"]
        start, end = _span(mine)
        out.append((finding("critical" if nobody else "warning", "cm_reject", summary, _flows(mine), start, end,
                            evidence, _reject_advice(reason)), _frames(mine, ("req_frame", "reject_frame"))))
    return out


def _reject_advice(reason: str) -> str:
    code = reason.rpartition("(")[2].rstrip(")")
    code = int(code) if code.isdigit() else -1
    return _REASON_ADVICE.get(code) or (_RESOURCES if code in (1, 2, 3) else _OTHER)


# ---- cm_retry ------------------------------------------------------------------------------------
_WHAT = {
    "unanswered": ("{client} sent its REQ to {server} ({service}) {n} times and got no answer.",
                   "warning",
                   "No REP, REJ or MRA came for any copy of the REQ: the server did not get them (down, its RDMA port "
                   "inactive: `rdma link`; a wrong address resolved; CM MADs are UD on QP1, nothing resends them but "
                   "the CM, so a lossy priority or an ACL on UDP 4791 drops them for good), or its answers did not "
                   "reach the client. After its max CM retries (rdma_cm: 15, CMA_MAX_CM_RETRIES) rdma_connect() "
                   "fails with RDMA_CM_EVENT_UNREACHABLE. On the server, "
                   f"{_COUNTERS}/cm_rx_msgs/req says whether any REQ arrived."),
    "req": ("{client} sent its REQ to {server} ({service}) again: no answer came within the REQ's CM response "
            "timeout.", "warning",
            "The REQ or its answer was lost, or the server answered too late: CM MADs are UD on QP1, only the CM "
            "resends them, after the REQ's remote CM response timeout (4.096 us x 2^t; rdma_cm: t = 20, 4.3 s, "
            "CMA_CM_RESPONSE_TIMEOUT), so each loss costs the application that long. Compare "
            f"{_COUNTERS}/cm_tx_retries/req on the client with cm_rx_duplicates/req on the server (the server "
            "saw the REQ twice: its answer was lost, not the REQ) and cm_rx_msgs/req (it never saw it); check "
            "the priority the MADs use is lossless or clean (`ethtool -S <if>` discards)."),
    "rep": ("{server} sent its REP to {client} ({service}) again: the RTU did not come within the REQ's local CM "
            "response timeout.", "warning",
            "The REP or the RTU was lost, or the client was slow to answer: compare "
            f"{_COUNTERS}/cm_tx_retries/rep on the server with cm_rx_duplicates/rep on the client."),
    "mra": ("{server} answered the REQ of {client} ({service}) with an MRA: it asked for more time before its "
            "REP.", "info",
            "An MRA tells the REQ's sender to wait its service timeout longer (IBTA 12.6.6): the server's "
            "application was slow to accept (rdma_accept), e.g. busy or setting up memory first. Harmless when the "
            "REP follows; if set-up time matters, look at the server's accept path "
            f"({_COUNTERS}/cm_tx_msgs/mra counts the MRAs it sent)."),
    "mra_rep": ("{client} answered the REP of {server} ({service}) with an MRA: it asked for more time before "
                "its RTU.", "info",
                "An MRA of the REP tells the server to wait longer for the RTU (IBTA 12.6.6): the client's side was "
                "slow to take the REP in (its CM consumer busy, its QP's move to RTR/RTS late). Harmless when the "
                f"RTU follows; if set-up time matters, look at the client's connect path ({_COUNTERS}/cm_tx_msgs/mra "
                "on the client counts the MRAs it sent)."),
}


def _retry_kind(r: dict) -> str | None:
    answered = int(r["rep_ts"]) > 0 or int(r["rtu_ts"]) > 0 or r["reject_reason"] or int(r["mra_count"]) > 0 \
        or r["state"] in ("established", "disconnected")        # a REP the capture missed still answered
    if int(r["req_retries"]) > 0 and not answered:
        return "unanswered"
    if int(r["req_retries"]) > 0:
        return "req"
    if int(r["rep_retries"]) > 0:
        return "rep"
    if int(r["mra_count"]) == 0:
        return None
    # MsgMRAed says whose: the client MRAs the REP, the server the REQ (IBTA 12.6.6)
    return "mra_rep" if int(r.get("client_mra_count", 0)) == int(r["mra_count"]) else "mra"


def _retry_key(r: dict) -> tuple | None:
    what = _retry_kind(r)
    return (r["client_ip"], r["server_ip"], r["service_id"], what) if what else None


def _retries(rows: list[dict]) -> list[tuple[dict, list[int]]]:
    out = []
    groups = _group(rows, _retry_key)
    for (client, server, _, what), mine in sorted(groups.items()):
        text, severity, advice = _WHAT[what]
        reqs = sum(int(r["req_retries"]) for r in mine)
        sent = {int(r["req_retries"]) + 1 for r in mine}
        summary = text.format(client=client, server=server, service=_service(mine[0]),
                              n=max(sent) if len(sent) == 1 else f"up to {max(sent)}")
        states = sorted({r["state"] for r in mine})
        evidence = [f"{plural(len(mine), 'connection')} ({', '.join(r['connection'] for r in mine[:3])})",
                    f"{plural(reqs, 'REQ')} resent, {plural(sum(int(r['rep_retries']) for r in mine), 'REP')} "
                    f"resent, {plural(sum(int(r['mra_count']) for r in mine), 'MRA')}",
                    f"state {', '.join(states)}", _waited(mine)]
        start, end = _span(mine)
        out.append((finding(severity, "cm_retry", summary, _flows(mine), start, end, [e for e in evidence if e],
                            advice), _frames(mine, ("req_frame", "rep_frame", "retry_frames"))))
    return out


def _waited(rows: list[dict]) -> str:
    """How long the first REQ waited for its REP, where one came."""
    waits = [int(r["rep_ts"]) - int(r["req_ts"]) for r in rows if int(r["rep_ts"]) > 0 and int(r["req_ts"]) > 0]
    return f"REQ to REP {duration(max(waits))}" if waits else ""


# ---- cm_slow_setup -------------------------------------------------------------------------------
def _slow(rows: list[dict], bound_ns: float) -> list[tuple[dict, list[int]]]:
    out = []
    groups = _group(rows, lambda r: (r["server_ip"], r["service_id"])
                    if r["setup_us"] == r["setup_us"] and r["setup_us"] * 1000 > bound_ns else None)
    for (server, _), mine in sorted(groups.items()):
        legs = np.array([[int(r["rep_ts"]) - int(r["req_ts"]), int(r["rtu_ts"]) - int(r["rep_ts"])] for r in mine])
        worst = max(mine, key=lambda r: r["setup_us"])
        server_leg = legs[:, 0].sum() >= legs[:, 1].sum()
        summary = (f"{plural(len(mine), 'connection')} to {server} ({_service(mine[0])}) took longer than "
                   f"{duration(bound_ns)} to set up (REQ to RTU), the slowest {duration(worst['setup_us'] * 1000)}.")
        evidence = [f"{worst['connection']}: REQ to RTU {duration(worst['setup_us'] * 1000)} (frames "
                    f"{int(worst['req_frame'])}, {int(worst['rep_frame'])}, {int(worst['rtu_frame'])})",
                    f"REQ to REP {duration(int(legs[:, 0].max()))} at most (the server), REP to RTU "
                    f"{duration(int(legs[:, 1].max()))} at most (the client): the "
                    f"{'server' if server_leg else 'client'} took the time"]
        advice = ("Address and route resolution (rdma_resolve_addr, rdma_resolve_route) happen before the REQ and "
                  "are not in this time. " + (
                      "REQ to REP is the server: its CM hands the REQ to the application, which creates its QP and "
                      "calls rdma_accept(); a busy or single-threaded accept loop, or memory registered before "
                      "accepting, delays every connection (an NVMe-oF host connects one per queue)."
                      if server_leg else
                      "REP to RTU is the client: it moves its QP to RTR and RTS and sends the RTU; a busy client "
                      "thread or a slow QP modify delays it.") +
                  " Healthy set-ups in real captures take 0.3 to 8 ms (IPoIB CM, rping, NVMe-oF over mlx5: "
                  "captures/README.md); raise cm_setup_ms if this is expected.")
        start, end = _span(mine)
        out.append((finding("warning", "cm_slow_setup", summary, _flows(mine), start, end, evidence, advice),
                    _frames(mine, ("req_frame", "rep_frame", "rtu_frame"))))
    return out
