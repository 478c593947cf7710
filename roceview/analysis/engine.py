"""The streaming analyzer: feed Batches in capture order, get an AnalysisResult at the end.

Per chunk, RoCE rows are grouped by flow (flow id * 3 + PSN space, one stable radix sort) and every
step is a numpy operation over the chunk; only per-flow / per-space state crosses chunk
boundaries (see psn.py, rtt.py, pfc.py), so memory is bounded by flows, not packets, and the result
does not depend on the chunk size. Within a flow, packets are taken in capture order.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcodes as op
from roceview.analysis.events import EventLog
from roceview.analysis.flows import FlowRegistry, address_words
from roceview.analysis.pairing import CmPairs, Pairing
from roceview.analysis.pfc import ALL, PfcAccounting
from roceview.analysis.pmtu import PathMtu
from roceview.analysis.psn import PsnSpaces
from roceview.analysis.reuse import NONE_HI, NONE_LO, psn_reuse
from roceview.analysis.rtt import RttMatcher
from roceview.analysis.segments import PSN_MOD, group_bounds, psn_delta
from roceview.analysis.state import Columns
from roceview.analysis.timeline import Timeline
from roceview.analysis.build import build_result
from roceview.batch import Batch, PROTO_CODE, PROTO_NAMES

HOLD_LIMIT = 1 << 20  # rows held back while waiting for path-MTU evidence
# A flow still without a peer this many rows after its first packet is not expected to pair:
# its AckReq requests are no longer kept for RTT matching (bounds work and memory), and
# PSN-following evidence is gathered only while some flow is that young.
PAIRING_HORIZON = 1 << 16
_ROCE = np.zeros(len(PROTO_NAMES), dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True
_ACKED_TRANSPORT = np.array([True, False, True, False, False, True, False, False, False])  # RC, RD, XRC; -1 -> last


FLOW_STATE = {
    "packets": (np.int64, 0), "bytes": (np.int64, 0), "data_packets": (np.int64, 0),
    "payload_bytes": (np.int64, 0), "acks": (np.int64, 0), "naks_seq": (np.int64, 0),
    "naks_rnr": (np.int64, 0), "naks_other": (np.int64, 0), "gap_events": (np.int64, 0),
    "gap_psns": (np.int64, 0), "retransmitted_packets": (np.int64, 0),
    "retransmitted_bytes": (np.int64, 0), "retransmitted_payload": (np.int64, 0),
    "ecn_not_ect": (np.int64, 0), "ecn_ce": (np.int64, 0), "cnp_packets": (np.int64, 0),
    "first_ts": (np.int64, np.iinfo(np.int64).max), "last_ts": (np.int64, np.iinfo(np.int64).min),
    "transport": (np.int8, -1), "last_nak_idx": (np.int64, -1), "first_idx": (np.int64, -1)}
SPACE_STATE = {"last_retrans": (bool, False), "last_run_idx": (np.int64, -1),
               "read_lo": (np.int64, NONE_LO), "read_hi": (np.int64, NONE_HI)}


def _opcode_name(batch: Batch) -> str:
    return "opcode" if "opcode" in batch.cols else "_opcode"


def _col(batch: Batch, name: str, rows: np.ndarray, dtype=np.int64, fill=0) -> np.ndarray:
    """Column values of the selected rows, `fill` where absent or invalid."""
    if name not in batch.cols:
        return np.full(len(rows), fill, dtype=dtype)
    values = batch.cols[name][rows].astype(dtype)
    if name in batch.valid:
        values[~batch.valid[name][rows]] = fill
    return values


class Analyzer:
    def __init__(self, pmtu: int | None = None, link_speed_gbps: float = 100.0, bucket_ms: float = 1.0,
                 keep_packets: bool = False):
        self.pmtu_given = pmtu
        self.path_mtu = PathMtu(pmtu)
        self.link_speed_gbps = link_speed_gbps
        self.bucket_ms = bucket_ms
        self.registry = FlowRegistry()
        self.flow = Columns(FLOW_STATE)
        self.space = Columns(SPACE_STATE)
        self.spaces = PsnSpaces()
        self.pairing = Pairing()
        self.cm = CmPairs()
        self.rtt = RttMatcher()
        self.pfc = PfcAccounting(link_speed_gbps)
        self.timeline = Timeline(max(1, int(round(bucket_ms * 1_000_000))))
        self.events = EventLog()
        self.rows_seen = 0
        self.last_new_flow_idx = -PAIRING_HORIZON
        self.proto_counts = np.zeros(len(PROTO_NAMES), dtype=np.int64)
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self._held: list[Batch] = []
        self._kept: list[Batch] | None = [] if keep_packets else None

    # ---- input -------------------------------------------------------------------------------
    def feed(self, batch: Batch) -> None:
        if batch.n == 0:
            return
        if self._kept is not None:
            self._kept.append(batch)
        if self.path_mtu.hold(batch, _opcode_name(batch), _ROCE, bool(self._held)):
            self._held.append(batch)
            if sum(b.n for b in self._held) >= HOLD_LIMIT:
                self.path_mtu.pending.clear()          # no evidence in sight: FALLBACK_PMTU
            if not self.path_mtu.pending:
                self._release()
            return
        self._process(batch)

    def _release(self) -> None:
        held, self._held = self._held, []
        self._process(Batch.concat(held))

    def finish(self, files=(), warnings=()):
        if self._held:
            self._release()
        self.pfc.finish()
        self.rtt.forget(self.pairing.unconfirmed_lone(self.registry, self.flow.transport))
        self.cm.apply(self.registry, self.pairing)
        packets = None
        if self._kept is not None:                     # asked for: the packets table as well
            from roceview.table import to_dataframe

            packets = to_dataframe(Batch.concat(self._kept) if self._kept else None)
        return build_result(self, list(files), list(warnings), packets)

    # ---- one chunk ---------------------------------------------------------------------------
    def _process(self, batch: Batch) -> None:
        idx0 = self.rows_seen
        self.rows_seen += batch.n
        proto = batch.cols["_proto"]
        self.proto_counts += np.bincount(proto, minlength=len(PROTO_NAMES))[: len(PROTO_NAMES)]
        ts = batch.cols["ts_ns"]
        lo, hi = int(ts.min()), int(ts.max())
        self.first_ts = lo if self.first_ts is None else min(self.first_ts, lo)
        self.last_ts = hi if self.last_ts is None else max(self.last_ts, hi)
        self._pfc_rows(batch, proto, idx0)
        self.cm.feed(batch)
        name = _opcode_name(batch)
        if name in batch.cols:
            sel = _ROCE[proto] & batch.mask(name) & batch.mask("dest_qp")
            rows = np.flatnonzero(sel)
            if len(rows):
                ChunkAnalysis(self, batch, rows, idx0, name).run()

    def _pfc_rows(self, batch: Batch, proto: np.ndarray, idx0: int) -> None:
        parts = []
        if "pfc_enable" in batch.cols:
            rows = np.flatnonzero((proto == PROTO_CODE["pfc"]) & batch.mask("pfc_enable"))
            if len(rows):
                bits = (batch.cols["pfc_enable"][rows, None].astype(np.int64) >> np.arange(8)) & 1
                quanta = np.stack([batch.cols[f"pfc_quanta{p}"][rows] for p in range(8)], axis=1)
                r, p = np.nonzero(bits)  # quanta of disabled classes are ignored (802.1Qbb 36.1.3)
                parts.append((rows[r], p, quanta[r, p]))
        if "pause_quanta" in batch.cols:
            rows = np.flatnonzero((proto == PROTO_CODE["pause"]) & batch.mask("pause_quanta"))
            if len(rows):
                parts.append((rows, np.full(len(rows), ALL), batch.cols["pause_quanta"][rows]))
        if not parts:
            return
        rows, slot, quanta = (np.concatenate(c) for c in zip(*parts))
        order = np.argsort(rows, kind="stable")
        rows, slot, quanta = rows[order], slot[order].astype(np.int64), quanta[order].astype(np.int64)
        mac = self.pfc.mac_ids(batch.cols["_src_mac"][rows].astype(np.uint64))
        ts = batch.cols["ts_ns"][rows]
        self.pfc.feed(mac, slot, quanta, ts)
        pause = quanta > 0
        self.events.add("pfc_pause", ts[pause], rows[pause] + idx0, mac[pause], None, slot[pause], quanta[pause])
        self.events.add("pfc_resume", ts[~pause], rows[~pause] + idx0, mac[~pause], None, slot[~pause], quanta[~pause])

class ChunkAnalysis:
    """The RoCE rows of one chunk, sorted by (flow, PSN space); steps update the Analyzer state."""

    def __init__(self, an: Analyzer, batch: Batch, rows: np.ndarray, idx0: int, opcode_col: str):
        self.an = an
        opcode = batch.cols[opcode_col][rows].astype(np.uint8)
        payload = _col(batch, "payload_len", rows)
        src, dst = address_words(batch, rows, "src"), address_words(batch, rows, "dst")
        pmtu = an.path_mtu.per_row(src, dst, payload, opcode)
        qp = batch.cols["dest_qp"][rows].astype(np.uint32)
        fid, self.flows_before = an.registry.lookup(src, dst, qp)
        self.n_flows = an.registry.n
        for cols in (an.flow, an.spaces):
            cols.grow(self.n_flows)
        an.space.grow(2 * self.n_flows)
        an.pairing.grow(self.n_flows)
        psn_ok = batch.mask("psn")[rows] if "psn" in batch.cols else np.zeros(len(rows), dtype=bool)
        space = np.where(psn_ok, op.SPACE_OF_OPCODE[opcode], op.NO_SPACE)
        key = fid * 3 + space
        order = np.argsort(key.astype(np.uint16) if 3 * self.n_flows < (1 << 16) else key, kind="stable")
        dmalen = _col(batch, "reth_dmalen", rows)
        span = np.where(op.OPCLASS[opcode] == op.READ_REQUEST, np.maximum(1, -(-dmalen // pmtu)), 1)
        r = order
        self.fid, self.op, self.space = fid[r], opcode[r], space[r]
        self.cls = op.OPCLASS[self.op]
        self.ts = batch.cols["ts_ns"][rows][r].astype(np.int64)
        self.idx = rows[r].astype(np.int64) + idx0
        self.wire = _col(batch, "wire_len", rows)[r]
        self.payload = payload[r]
        self.psn = _col(batch, "psn", rows)[r] & (PSN_MOD - 1)
        self.span = span[r]
        self.ackreq = _col(batch, "ackreq", rows, bool, False)[r]
        self.syndrome = _col(batch, "aeth_syndrome", rows, np.int64, -1)[r]
        self.ecn = _col(batch, "ecn", rows, np.int64, -1)[r]
        self.data = op.IS_DATA[self.op]
        # A NAK's PSN is the request it refuses (IBTA 9.7.5.1.3): it acknowledges only the PSNs
        # before it, so it moves the highest-seen mark to PSN - 1 (a span of 0).
        nak = (self.cls == op.ACKNOWLEDGE) & (self.syndrome >= 0) & (((self.syndrome >> 5) & 3) != op.AETH_ACK)
        self.span = np.where(nak, 0, self.span)
        self.retrans = np.zeros(len(rows), dtype=bool)
        self.last_idx = int(rows[-1]) + idx0

    def run(self) -> None:
        self._transport()
        self._counters()
        self._spaces()
        self.an.cm.apply(self.an.registry, self.an.pairing)
        if self.last_idx - self.an.last_new_flow_idx < PAIRING_HORIZON:
            self.an.pairing.update(*self._pairing_evidence())
        self._timeouts()
        self._rtt()
        self._timeline()

    def _transport(self) -> None:
        """A flow's transport is that of its first non-CNP packet (CNP only: CNP)."""
        if self.n_flows > self.flows_before:
            new = self.fid >= self.flows_before
            flows, first = np.unique(self.fid[new], return_index=True)
            self.an.flow.first_idx[flows] = self.idx[new][first]
            self.an.last_new_flow_idx = int(self.idx[new][first].max())
        t = self.an.flow.transport
        code = op.transport_code(self.op)
        unknown = (t[self.fid] < 0) | (t[self.fid] == op.TRANSPORT_CNP)
        for want_cnp in (False, True):
            m = unknown & ((code == op.TRANSPORT_CNP) == want_cnp)
            if m.any():
                flows, first = np.unique(self.fid[m], return_index=True)
                upd = (t[flows] < 0) | ((t[flows] == op.TRANSPORT_CNP) & (not want_cnp))
                t[flows[upd]] = code[m][first[upd]]

    def _counters(self) -> None:
        st, f = self.an.flow, self.fid
        st.add("packets", f)
        st.add("bytes", f, self.wire)
        st.add("data_packets", f[self.data])
        st.add("payload_bytes", f[self.data], self.payload[self.data])
        ack = (self.cls == op.ACKNOWLEDGE) & (self.syndrome >= 0)
        kind, code = (self.syndrome >> 5) & 3, self.syndrome & 0x1F
        self.nak_seq = ack & (kind == op.AETH_NAK) & (code == op.NAK_PSN_SEQUENCE_ERROR)
        self.nak_rnr = ack & (kind == op.AETH_RNR_NAK)
        self.nak_other = ack & (((kind == op.AETH_NAK) & (code != 0)) | (kind == op.AETH_RESERVED))
        st.add("acks", f[ack & (kind == op.AETH_ACK)])
        for name in ("nak_seq", "nak_rnr", "nak_other"):
            m = getattr(self, name)
            st.add(f"naks_{name[4:]}", f[m])
            self.an.events.add(name, self.ts[m], self.idx[m], f[m], self.psn[m], self.syndrome[m])
        self.ce = self.ecn == 3
        st.add("ecn_not_ect", f[self.ecn == 0])
        st.add("ecn_ce", f[self.ce])
        self.cnp = self.cls == op.CNP
        st.add("cnp_packets", f[self.cnp])
        self.an.events.add("cnp", self.ts[self.cnp], self.idx[self.cnp], f[self.cnp])
        self.an.events.add("ecn_ce", self.ts[self.ce], self.idx[self.ce], f[self.ce],
                           np.where(self.space[self.ce] < 2, self.psn[self.ce], -1))
        starts, _, _ = group_bounds(f)
        flows = f[starts]
        st.first_ts[flows] = np.minimum(st.first_ts[flows], np.minimum.reduceat(self.ts, starts))
        st.last_ts[flows] = np.maximum(st.last_ts[flows], np.maximum.reduceat(self.ts, starts))

    def _spaces(self) -> None:
        m = self.space < 2
        self.m = m
        sid = self.fid[m] * 2 + self.space[m]
        # Responses skip PSNs legitimately (ACK coalescing, IBTA 9.7.5.1.2): in the response
        # space only a READ response MIDDLE/LAST must follow the previous response's PSN.
        gap_check = (self.space[m] == op.REQUEST_SPACE) | op.CONTINUES_RESPONSE[self.op[m]]
        res = self.an.spaces.process(sid, self.psn[m], self.span[m], self.data[m], gap_check)
        self.res, self.sid = res, sid
        self.retrans[m] = res.retransmitted
        f, st, rt, gap = self.fid[m], self.an.flow, res.retransmitted, res.gap
        st.add("retransmitted_packets", f[rt])
        st.add("retransmitted_bytes", f[rt], self.wire[m][rt])
        st.add("retransmitted_payload", f[rt], self.payload[m][rt])
        st.add("gap_events", f[gap])
        st.add("gap_psns", f[gap], res.gap_psns[gap])
        ts, idx, psn = self.ts[m], self.idx[m], self.psn[m]
        first_missing = (res.h_prev[gap] + 1) & (PSN_MOD - 1)
        self.an.events.add("gap", ts[gap], idx[gap], f[gap], psn[gap], res.gap_psns[gap], first_missing)
        self.an.events.add("retransmit", ts[rt], idx[rt], f[rt], psn[rt])
        is_read = op.OPCLASS[self.op[m]] == op.READ_REQUEST
        self.reuse = psn_reuse(self.an.space, sid, res.u, self.span[m], is_read, rt)
        ru = self.reuse
        self.an.events.add("psn_reuse", ts[ru], idx[ru], f[ru], psn[ru])

    def _pairing_evidence(self):
        peer = self.an.pairing.peer
        unpaired = self.m & (peer[self.fid] < 0)
        req = unpaired & (self.space == op.REQUEST_SPACE)
        resp = unpaired & (self.space == op.RESPONSE_SPACE)
        if not (req.any() and resp.any()):
            req = resp = np.zeros(len(self.fid), dtype=bool)
        return (self.an.registry, self.an.flow.transport, self.fid[req], self.psn[req],
                self.fid[resp], self.psn[resp])

    def _timeouts(self) -> None:
        """A retransmission run (in the request space) with no NAK (PSN sequence error or RNR)
        from the peer since the previous run is a timeout retransmission."""
        req = self.space[self.m] == op.REQUEST_SPACE
        sid, rt = self.sid[req], self.res.retransmitted[req] & ~self.reuse[req]
        idx, ts, f, psn = self.idx[self.m][req], self.ts[self.m][req], self.fid[self.m][req], self.psn[self.m][req]
        starts, lengths, gid = group_bounds(sid)
        if len(starts) == 0:
            self._note_naks()
            return
        sp = self.an.space
        prev = np.empty_like(rt)
        prev[1:] = rt[:-1]
        prev[starts] = sp.last_retrans[sid[starts]]
        sp.last_retrans[sid[starts]] = rt[starts + lengths - 1]
        run = np.flatnonzero(rt & ~prev)
        if len(run):
            prev_run = self._previous_run_idx(sid, idx, gid, run)
            last_nak = self._last_nak_before(self.an.pairing.peer[f[run]], idx[run])
            timeout = (self.an.pairing.peer[f[run]] >= 0) & (last_nak <= prev_run)
            t = run[timeout]
            self.an.events.add("timeout_retransmit", ts[t], idx[t], f[t], psn[t])
        self._note_naks()

    def _previous_run_idx(self, sid, idx, gid, run) -> np.ndarray:
        sp = self.an.space
        g = gid[run]
        prev_run = np.empty(len(run), dtype=np.int64)
        prev_run[1:] = idx[run[:-1]]
        first = np.ones(len(run), dtype=bool)
        first[1:] = g[1:] != g[:-1]
        prev_run[first] = sp.last_run_idx[sid[run[first]]]
        last = np.ones(len(run), dtype=bool)
        last[:-1] = g[1:] != g[:-1]
        sp.last_run_idx[sid[run[last]]] = idx[run[last]]
        return prev_run

    def _last_nak_before(self, flow: np.ndarray, idx: np.ndarray) -> np.ndarray:
        nak = self.nak_seq | self.nak_rnr
        n_flow, n_idx = self.fid[nak], self.idx[nak]
        carried = self.an.flow.last_nak_idx[np.maximum(flow, 0)]
        if len(n_flow) == 0:
            return carried
        order = np.lexsort((n_idx, n_flow))
        keys = n_flow[order] * (1 << 40) + n_idx[order]
        pos = np.searchsorted(keys, flow * (1 << 40) + idx) - 1
        ok = (pos >= 0) & (n_flow[order][np.maximum(pos, 0)] == flow)
        return np.where(ok, n_idx[order][np.maximum(pos, 0)], carried)

    def _note_naks(self) -> None:
        nak = self.nak_seq | self.nak_rnr
        if nak.any():
            np.maximum.at(self.an.flow.last_nak_idx, self.fid[nak], self.idx[nak])

    def _rtt(self) -> None:
        an, m, res = self.an, self.m, self.res
        if not (self.ackreq.any() or len(an.rtt.pending[0])):
            return
        f, u, ts, idx = self.fid[m], res.u, self.ts[m], self.idx[m]
        space = self.space[m]
        acked = _ACKED_TRANSPORT[an.flow.transport[f]]
        req = (space == op.REQUEST_SPACE) & self.data[m] & self.ackreq[m] & ~res.retransmitted & acked
        rt = (space == op.REQUEST_SPACE) & res.retransmitted
        peer = an.pairing.peer[f]
        req &= (peer >= 0) | (idx - an.flow.first_idx[f] < PAIRING_HORIZON)
        resp = (space == op.RESPONSE_SPACE) & (peer >= 0)
        peer_f = peer[resp]
        resp = np.flatnonzero(resp)[an.spaces.state.seen[2 * peer_f]]
        peer_f = peer[resp]
        high = an.spaces.request_high(peer_f)
        resp_u = high + psn_delta(self.psn[m][resp], high & (PSN_MOD - 1))
        an.rtt.feed((f[req], u[req], ts[req], idx[req]),
                    (peer_f, resp_u, ts[resp], idx[resp]),
                    (f[rt], u[rt], ts[rt], idx[rt]))

    def _timeline(self) -> None:
        values = {"bytes": self.wire, "ecn_ce": self.ce, "cnp_packets": self.cnp,
                  "retransmitted_packets": self.retrans}
        self.an.timeline.feed(self.ts, self.fid, values, self.n_flows)
