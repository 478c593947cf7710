"""One row per CM connection (connections.csv): what the two sides agreed on in the REQ and the
REP (IBTA 12.6, 12.7), when each step of the handshake went by, and how it ended.

A connection is named by its client (the REQ's sender), its server and the client's local
communication id. Every CM message names it: the client sends its own id as the local one
(REQ, RTU, its DREQ/DREP/REJ/MRA), the server the client's as the remote one (REP, its
DREQ/DREP/REJ/MRA: IBTA 12.6.4). A REQ seen again on an open connection is a retry (the same
transaction id, 12.9.2), unless it is the same MAD captured again: a REQ, REP or MRA with the
transaction id of the one before it, sooner than 1 ms and than half the response timeout its
sender waits before a resend (IBTA 12.6.5: 4.096 us x 2^t; a mirror's copy comes microseconds
later) is a copy, counted once. The collector reads only the rows of CM MADs (the packets table's
`cm_*` columns, dissectors/cm.py); its memory grows with connections, up to MAX_CONNECTIONS
(later ones are counted in `dropped`), never with packets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dissectors import cm
from roceview.analysis.copies import COPY_WINDOW_NS
from roceview.analysis.tables import DECIMALS, KINDS, NONE_TS, Table
from roceview.packets.names import address_text

CONNECTION_COLUMNS = (
    "connection", "client_ip", "server_ip", "client_comm_id", "server_comm_id", "service_id", "service", "client_qp", "server_qp",
    "client_start_psn", "server_start_psn", "path_mtu", "local_ack_timeout_us", "client_local_ack_timeout_us",
    "retry_count", "rnr_retry_count", "client_rnr_retry_count", "responder_resources", "initiator_depth",
    "req_ts", "rep_ts", "rtu_ts", "setup_us", "req_retries", "rep_retries", "mra_count", "state", "reject_reason",
    "disconnect_ts", "req_frame", "rep_frame", "rtu_frame", "reject_frame", "disconnect_frame", "retry_frames",
    "target_ack_delay", "client_mra_count")
# the text form of each column (analysis/tables.py KINDS: the CSV, JSON and pandas forms)
CONNECTION_KINDS = {
    "connection": "str", "client_ip": "str", "server_ip": "str", "client_comm_id": "str", "server_comm_id": "str", "service_id": "str",
    "service": "str", "client_qp": "qp", "server_qp": "qp", "client_start_psn": "nint", "server_start_psn": "nint",
    "path_mtu": "nint", "local_ack_timeout_us": "float", "client_local_ack_timeout_us": "float",
    "retry_count": "nint", "rnr_retry_count": "nint", "client_rnr_retry_count": "nint",
    "responder_resources": "nint", "initiator_depth": "nint", "req_ts": "nts", "rep_ts": "nts", "rtu_ts": "nts",
    "setup_us": "float", "state": "str", "reject_reason": "str", "disconnect_ts": "nts", "req_frame": "nint",
    "rep_frame": "nint", "rtu_frame": "nint", "reject_frame": "nint", "disconnect_frame": "nint",
    "retry_frames": "str", "target_ack_delay": "nint", "client_mra_count": "int"}
CONNECTION_DECIMALS = {"local_ack_timeout_us": 3, "client_local_ack_timeout_us": 3, "setup_us": 3}
KINDS.update(CONNECTION_KINDS)       # where the tables' writers look a column's text form up
DECIMALS.update(CONNECTION_DECIMALS)
REJECTED_REQ = 0              # the REJ's "message REJected": 0 the REQ (IBTA 12.6.7)
MRAED_REP = 1                 # the MRA's "message MRAed": 1 the REP, sent by the client (IBTA 12.6.6)
MAX_MESSAGES = 1_000_000      # CM messages kept for replay(): a handshake is 3-5 of them
STATES = ("established", "rejected", "timed_out", "disconnected", "incomplete")
MAX_CONNECTIONS = 100_000      # a CM storm (a client retrying many servers) must not outgrow memory
NS_PER_US = 1000
MAX_RETRY_FRAMES = 64          # frames of resent REQs / REPs and MRAs listed per connection (IBTA: at most 15 resends)
_READ = ("mad_attr_id", "mad_tid", "cm_local_comm_id", "cm_remote_comm_id", "cm_local_qpn", "cm_start_psn",
         "cm_service_id", "cm_path_mtu", "cm_local_ack_timeout", "cm_target_ack_delay", "cm_retry_count",
         "cm_rnr_retry_count", "cm_responder_resources", "cm_initiator_depth", "cm_remote_cm_response_timeout",
         "cm_local_cm_response_timeout", "cm_reject_reason", "cm_rejected_message", "cm_mraed_message", "frame",
         "ts_ns")


@dataclass
class Connection:
    """What the CM messages of one connection said (None: not seen)."""
    client: bytes
    server: bytes
    comm: int
    req: dict | None = None        # the first REQ's fields (cm_* column name -> value), ts, frame
    rep: dict | None = None        # the first REP's
    rtu: dict | None = None
    rej: dict | None = None
    end: dict | None = None        # the first DREQ or DREP
    last_req_ts: int | None = None
    req_retries: int = 0
    rep_retries: int = 0
    mras: int = 0
    client_mras: int = 0          # of them, the client's MRAs of the REP (MsgMRAed 1, IBTA 12.6.6)
    first_ts: int = 0
    retry_frames: list = field(default_factory=list)    # the resent REQs / REPs and the MRAs
    last: dict = field(default_factory=dict)            # REQ / REP / MRA -> the last one's (tid, ts)

    @property
    def closed(self) -> bool:
        """Rejected or disconnected: a REQ with the same ids opens a new connection."""
        return self.rej is not None or self.end is not None


class ConnectionLog:
    """feed(batch) with every decoded batch, in capture order; table() at the end."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS):
        self.max_connections = max_connections
        self.rows: list[Connection] = []
        self._open: dict[tuple, Connection] = {}      # (client, server, client comm id) -> its connection
        self.dropped = 0                              # connections past the budget (not listed)
        self.last_ts: int | None = None
        # every CM message as read (few: a handshake is 3-5), for the Dask engine, whose
        # partitions see a connection's REQ and REP apart: replay() joins them
        self.messages: list[tuple] = []

    def feed(self, batch) -> None:
        if batch.n and "ts_ns" in batch.cols:
            top = int(batch.cols["ts_ns"].max())
            self.last_ts = top if self.last_ts is None else max(self.last_ts, top)
        valid = batch.valid.get("mad_class")
        if "mad_class" not in batch.cols or valid is None or not valid.any():
            return                                    # nearly every batch: no MAD in it
        rows = np.flatnonzero(valid & (batch.cols["mad_class"] == cm.MGMT_CLASS_CM) & batch.mask("mad_attr_id"))
        for r in rows.tolist():
            message = (_values(batch, r), bytes(batch.cols["_src_addr"][r]), bytes(batch.cols["_dst_addr"][r]))
            if len(self.messages) < MAX_MESSAGES:
                self.messages.append(message)
            self._message(*message)

    @classmethod
    def replay(cls, messages: list[tuple], last_ts: int | None) -> "ConnectionLog":
        """The log of these messages (several partitions' `messages`), read in capture order."""
        log = cls()
        for message in sorted(messages, key=lambda m: (m[0].get("ts_ns") or 0, m[0].get("frame") or 0)):
            log._message(*message)
        log.last_ts = last_ts
        return log

    def _message(self, v: dict, src: bytes, dst: bytes) -> None:
        message = cm.MESSAGES.get(v["mad_attr_id"])
        short = message.short if message else ""
        if short == "REQ":
            self._req(v, src, dst)
            return
        conn = self._find(src, dst, v)
        if conn is None:
            # the REQ went by before the capture: a REP, or a REJ of a REQ (the server's answer),
            # names the client's id as the remote one
            if v.get("cm_remote_comm_id") is not None and (
                    short == "REP" or short == "REJ" and v.get("cm_rejected_message") == REJECTED_REQ):
                conn = self._new(dst, src, v["cm_remote_comm_id"], v["ts_ns"])
            else:
                return
        if short == "REP" and not _copy(conn, "REP", v, _get(conn.req, "cm_local_cm_response_timeout")):
            conn.rep, conn.rep_retries = (v, conn.rep_retries) if conn.rep is None else (conn.rep, conn.rep_retries + 1)
            _retried(conn, v, conn.rep is not v)
        elif short == "RTU":
            conn.rtu = conn.rtu or v
        elif short == "REJ":
            conn.rej = conn.rej or v
        elif short == "MRA" and not _copy(conn, "MRA", v, _get(conn.req, "cm_remote_cm_response_timeout")):
            conn.mras += 1
            conn.client_mras += v.get("cm_mraed_message") == MRAED_REP
            _retried(conn, v, True)
        elif short in ("DREQ", "DREP"):
            conn.end = conn.end or v

    def _req(self, v: dict, src: bytes, dst: bytes) -> None:
        conn = self._open.get((src, dst, v["cm_local_comm_id"]))
        if conn is not None and not conn.closed:
            if not _copy(conn, "REQ", v, v["cm_remote_cm_response_timeout"]):
                conn.req_retries += 1                # resent: no answer in the REQ's response timeout
                conn.last_req_ts = v["ts_ns"]
                conn.req = conn.req or v
                _retried(conn, v, True)
            return
        conn = self._new(src, dst, v["cm_local_comm_id"], v["ts_ns"])
        if conn is not None:
            conn.req, conn.last_req_ts = v, v["ts_ns"]
            conn.last["REQ"] = (v["mad_tid"], v["ts_ns"])

    def _new(self, client: bytes, server: bytes, comm, ts: int) -> Connection | None:
        if comm is None:
            return None
        if len(self.rows) >= self.max_connections:
            self.dropped += 1
            return None
        conn = Connection(client, server, comm, first_ts=ts)
        self.rows.append(conn)
        self._open[(client, server, comm)] = conn
        return conn

    def _find(self, src: bytes, dst: bytes, v: dict) -> Connection | None:
        """The connection a message names: sent by its client (its local id) or by its server
        (the client's id as the remote one)."""
        mine = self._open.get((src, dst, v["cm_local_comm_id"]))
        return mine if mine is not None else self._open.get((dst, src, v["cm_remote_comm_id"]))

    # ---- the table ---------------------------------------------------------------------------
    def table(self) -> Table:
        """One row per connection, in the order of their first CM message."""
        rows = sorted(self.rows, key=lambda c: c.first_ts)
        records = [_row(c, self.last_ts) for c in rows]
        data = {}
        for name in CONNECTION_COLUMNS:
            kind = CONNECTION_KINDS.get(name, "int")
            values = [r[name] for r in records]
            data[name] = values if kind == "str" else np.array(values, np.float64 if kind == "float" else np.int64)
        return Table(CONNECTION_COLUMNS, data)


def flow_connections(flows, connections) -> list[str]:
    """The `connection` of each row of the flows table (qps.csv), "" where no CM connection names
    it: the client's flow goes to the server's QP, the server's to the client's (a QP of two
    connections, reused, is named by the later). By the tables' text, so that the Dask engine,
    whose partitions each see part of a handshake, names them as analyze does."""
    index = {}
    c = connections.data
    for i in range(len(connections)):
        for src, dst, qp in ((c["client_ip"][i], c["server_ip"][i], c["server_qp"][i]),
                             (c["server_ip"][i], c["client_ip"][i], c["client_qp"][i])):
            if int(qp) >= 0:
                index[(src, dst, int(qp))] = c["connection"][i]
    f = flows.data
    return [index.get((s, d, int(q)), "") for s, d, q in zip(f["src_ip"], f["dst_ip"], np.asarray(f["dest_qp"]).tolist())]


def _copy(conn: Connection, short: str, v: dict, exponent) -> bool:
    """Whether message `v` is the last `short` of the connection captured again (a mirror's copy,
    a second capture point): its transaction id, sooner than COPY_WINDOW_NS (1 ms, the analysis's
    window for a second capture point) and than half the response timeout (exponent t: 4.096 us
    x 2^t) after it. No CM sends a MAD again before that timeout ran out (Linux ib_cm: 3 ms at
    least); a copy follows within microseconds. Remembers v."""
    last = conn.last.get(short)
    conn.last[short] = (v["mad_tid"], v["ts_ns"])
    if last is None or last[0] != v["mad_tid"]:
        return False
    window = min(COPY_WINDOW_NS, cm.timeout_us(exponent) * NS_PER_US / 2) if exponent is not None else COPY_WINDOW_NS
    if v["ts_ns"] - last[1] < window:
        conn.last[short] = last                       # a resend is timed from the original
        return True
    return False


def _retried(conn: Connection, v: dict, listed: bool) -> None:
    """Keep the frame of a resent REQ / REP or an MRA (up to MAX_RETRY_FRAMES per connection)."""
    if listed and v["frame"] is not None and len(conn.retry_frames) < MAX_RETRY_FRAMES:
        conn.retry_frames.append(v["frame"])


def _values(batch, r: int) -> dict:
    """The CM columns of row r (None where not valid)."""
    out = {}
    for name in _READ:
        values, valid = batch.cols.get(name), batch.valid.get(name)
        out[name] = int(values[r]) if values is not None and (valid is None or valid[r]) else None
    return out


def _first(*values):
    return next((v for v in values if v is not None), None)


def _get(message: dict | None, name: str):
    return None if message is None else message.get(name)


def _ts(message: dict | None) -> int:
    return NONE_TS if message is None else message["ts_ns"]


def _n(value) -> int:
    return -1 if value is None else int(value)


def _state(c: Connection, last_ts: int | None) -> str:
    """rejected > disconnected > established > timed_out > incomplete: a REQ (or a REP) whose
    answer did not come within its CM response timeout (IBTA 12.6.5: 4.096 us x 2^t), the
    capture going on past it, timed out; one whose capture ended before that is incomplete."""
    if c.rej is not None:
        return "rejected"
    if c.end is not None:
        return "disconnected"
    if c.rtu is not None:
        return "established"
    wait_from, exponent = (c.last_req_ts, _get(c.req, "cm_remote_cm_response_timeout")) if c.rep is None \
        else (c.rep["ts_ns"], _get(c.req, "cm_local_cm_response_timeout"))   # the REP waits for the RTU
    if wait_from is not None and exponent is not None and last_ts is not None and \
            last_ts - wait_from > cm.timeout_us(exponent) * NS_PER_US:
        return "timed_out"
    return "incomplete"


def _us(ns_from, ns_to) -> float:
    return (ns_to - ns_from) / NS_PER_US if ns_from is not None and ns_to is not None else float("nan")


def _name(c: Connection) -> str:
    """A connection's name: client>server#the client's communication id."""
    return f"{address_text(c.client)}>{address_text(c.server)}#0x{c.comm:08x}"


def _row(c: Connection, last_ts: int | None) -> dict:
    req, rep = c.req or {}, c.rep or {}
    sid, t, tad = req.get("cm_service_id"), req.get("cm_local_ack_timeout"), rep.get("cm_target_ack_delay")
    reason = _get(c.rej, "cm_reject_reason")
    mtu = req.get("cm_path_mtu")
    return {
        "connection": _name(c), "client_ip": address_text(c.client), "server_ip": address_text(c.server),
        "client_comm_id": f"0x{c.comm:08x}",
        "server_comm_id": "" if rep.get("cm_local_comm_id") is None else f"0x{rep['cm_local_comm_id']:08x}",
        "service_id": "" if sid is None else f"0x{sid:016x}", "service": "" if sid is None else cm.service_text(sid),
        "client_qp": _n(req.get("cm_local_qpn")), "server_qp": _n(rep.get("cm_local_qpn")),
        "client_start_psn": _n(req.get("cm_start_psn")), "server_start_psn": _n(rep.get("cm_start_psn")),
        "path_mtu": 128 << mtu if mtu in cm.MTU_VALUES else -1,
        "local_ack_timeout_us": cm.timeout_us(t) if t else float("nan"),
        "client_local_ack_timeout_us": cm.timeout_us(cm.ack_timeout(tad, t - 1)) if t and tad is not None
        else float("nan"),
        "retry_count": _n(req.get("cm_retry_count")), "rnr_retry_count": _n(req.get("cm_rnr_retry_count")),
        "client_rnr_retry_count": _n(rep.get("cm_rnr_retry_count")),
        # the negotiated depths (IBTA 12.7.29, 12.7.30): the REP's answer to the REQ's ask, from
        # the client's side: READs it may have outstanding, READs it takes from the server
        "responder_resources": _n(_first(rep.get("cm_initiator_depth"), req.get("cm_responder_resources"))),
        "initiator_depth": _n(_first(rep.get("cm_responder_resources"), req.get("cm_initiator_depth"))),
        "req_ts": _ts(c.req), "rep_ts": _ts(c.rep), "rtu_ts": _ts(c.rtu),
        "setup_us": _us(_get(c.req, "ts_ns"), _get(c.rtu, "ts_ns")),
        "req_retries": c.req_retries, "rep_retries": c.rep_retries, "mra_count": c.mras,
        "state": _state(c, last_ts),
        "reject_reason": "" if reason is None else f"{cm.reject_text(reason)} ({reason})",
        "disconnect_ts": _ts(c.end), "req_frame": _n(_get(c.req, "frame")), "rep_frame": _n(_get(c.rep, "frame")),
        "rtu_frame": _n(_get(c.rtu, "frame")), "reject_frame": _n(_get(c.rej, "frame")),
        "disconnect_frame": _n(_get(c.end, "frame")),
        "retry_frames": ";".join(str(f) for f in sorted(c.retry_frames)),
        "target_ack_delay": _n(tad), "client_mra_count": c.client_mras,
    }


