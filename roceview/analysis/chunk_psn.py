"""Per-chunk steps over the PSN part (rows grouped by PSN space, chunk.py): READ spans, gaps and
retransmissions, PSN reuse, pairing evidence, timeout retransmissions, RTT requests/responses.

Conditions that are properties of a flow (its peer, its transport, whether its first packet is
recent) are evaluated once per group, not per row; rows are gathered only for the groups and kinds
that need them, so a chunk of in-order traffic costs a few passes over the PSN part.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.pmtu import MIN_PMTU, ONLY_OR_LAST, PathMtu
from roceview.analysis.sends import WINDOW as SEND_WINDOW
from roceview.analysis.reuse import psn_reuse
from roceview.analysis.segments import PSN_MOD, last_before, psn_delta, seg_running_max_grouped
from roceview.analysis.unsent import check as unsent_check


def last_per_flow(flow: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Positions of each flow's highest idx."""
    order = np.lexsort((idx, flow))
    last = np.ones(len(order), dtype=bool)
    last[:-1] = flow[order][1:] != flow[order][:-1]
    return order[last]

# A flow still without a peer this many rows after its first packet is not expected to pair:
# its AckReq requests are no longer kept for RTT matching (bounds work and memory), and
# PSN-following evidence is gathered only while some flow is that young.
PAIRING_HORIZON = 1 << 16
NO_NEW_FLOW = -PAIRING_HORIZON          # the newest flow's first row before any flow is seen


def pairing_window_open(last_row, newest_flow_row):
    """Whether a chunk whose last analyzed row is `last_row` may still pair QPs from traffic:
    a flow first appeared within PAIRING_HORIZON rows of it. Scalars for the Analyzer, arrays (a
    row per chunk) for the Dask engine's plan, so both engines take the one decision."""
    return last_row - newest_flow_row < PAIRING_HORIZON
# RC, RD, XRC get ACKs (transport code -1 indexes the last entry)
_ACKED_TRANSPORT = np.array([True, False, True, False, False, True, False, False, False])
_EMPTY = np.zeros(0, dtype=np.int64)
KEY_SPACE = 1 << 42        # space id * this + unwrapped PSN: sorted like the grouped rows' first sends


class PsnPart:
    """The PSN part of one chunk after PsnSpaces.process."""

    def __init__(self, ch, psn, flags, res, span, reuse):
        self.psn, self.flags, self.res, self.span, self.reuse = psn, flags, res, span, reuse
        self.is_request_group = (ch.sids & 1) == op.REQUEST_SPACE
        rt = np.flatnonzero(res.retransmitted)
        self.retrans = rt                                            # grouped positions
        self.retrans_r = ch.sorted_r(rt)                             # RoCE rows


def first_sends(ch, part, an=None) -> np.ndarray:
    """Grouped positions of request-space data rows ahead of their space's highest PSN (sends.py);
    with `an`, only those within WINDOW PSNs of the space's highest at the chunk's end: the
    others' ring slots are overwritten before any lookup could use them."""
    res = part.res
    fresh = res.u > res.h_prev
    fresh &= (part.flags & op.F_DATA) != 0
    if not part.is_request_group.all():
        fresh &= np.repeat(part.is_request_group, ch.lengths)
    if an is not None:
        fresh &= res.u > np.repeat(an.spaces.state.high[ch.sids] - SEND_WINDOW, ch.lengths)
    return np.flatnonzero(fresh)


def spans(an, ch, nak: np.ndarray):
    """(span, slack) per row of the PSN part: a READ request spans ceil(DMA length / path MTU)
    PSNs, or when its path MTU is unknown the fewest any MTU allows plus a slack (pmtu.py); a NAK
    0 (`nak`: RoCE rows); else 1. None for either when 1 (0) everywhere. Path-MTU evidence
    (FIRST/MIDDLE payloads, ONLY/LAST payload bounds) is taken from every chunk, READs or not."""
    cand = _mtu_rows(an, ch)
    read, read_span, read_slack = _EMPTY, _EMPTY, _EMPTY
    if len(cand):
        exact, lower = an.path_mtu.per_row(_flow_paths(an, ch)[ch.fid.take(cand)],
                                           ch.values_at("payload_len", cand), ch.opcode.take(cand))
        is_read = (ch.flags.take(cand) & op.F_READ_REQUEST) != 0
        read = cand[is_read]
        read_span, read_slack = an.path_mtu.read_spans(ch.values_at("reth_dmalen", read), exact[is_read], lower[is_read])
    keep = ch.in_psn[read] & ((read_span != 1) | (read_slack > 0))
    read, read_span, read_slack = read[keep], read_span[keep], read_slack[keep]
    nak = nak[ch.in_psn[nak]]
    span = slack = None
    if len(read) or len(nak):
        span = np.ones(ch.n_psn, dtype=np.int64)
        span[ch.sorted_of(read)] = read_span
        span[ch.sorted_of(nak)] = 0
    if read_slack.any():
        slack = np.zeros(ch.n_psn, dtype=np.int64)
        slack[ch.sorted_of(read)] = read_slack
    return span, slack


def _mtu_rows(an, ch) -> np.ndarray:
    """RoCE rows that show a path MTU or need one: READ requests, and FIRST/MIDDLE or ONLY/LAST
    packets whose payload exceeds what their path already shows and what their PSN space showed
    before them in the chunk (the others change nothing: after a flow's first packets, none)."""
    need = (ch.flags & op.F_READ_REQUEST) != 0
    if "payload_len" not in ch.batch.cols:
        return np.flatnonzero(need)
    exact_f, lower_f = an.path_mtu.flow_bounds(_flow_paths(an, ch))
    pay = ch.values("payload_len")
    fm = (ch.flags & op.F_FIRST_OR_MIDDLE) != 0
    ev = ONLY_OR_LAST.take(ch.opcode)
    if ev.any():                                  # (a payload of 256 or less bounds nothing)
        ev &= pay > np.maximum(lower_f, MIN_PMTU).take(ch.fid)
    if fm.any():
        ev |= fm & (pay > exact_f.take(ch.fid))
    if not ch.in_psn_all:
        ev &= ch.in_psn                         # as _new_maxima sees them, whatever the count
    if np.count_nonzero(ev) > _FEW_EVIDENCE_ROWS:
        need[_new_maxima(ch, ev, pay)] = True
    else:
        need |= ev
    return np.flatnonzero(need)


_FEW_EVIDENCE_ROWS = 4096


def _new_maxima(ch, ev: np.ndarray, pay: np.ndarray) -> np.ndarray:
    """RoCE rows among the evidence rows `ev` (a mask) whose payload exceeds every earlier one of
    their PSN space in the chunk, FIRST/MIDDLE and ONLY/LAST apart: a superset of the rows that
    raise a path's maximum (a path's maximum is at least its spaces' maxima)."""
    fm = ch.psn_part((ch.flags & op.F_FIRST_OR_MIDDLE) != 0)
    v = np.where(ch.psn_part(ev), ch.psn_part(pay).astype(np.int64), 0)
    new = np.zeros(ch.n_psn, dtype=bool)
    zero = np.zeros(len(ch.starts), dtype=np.int64)
    for part in (np.where(fm, v, 0), np.where(fm, 0, v)):
        before, _ = seg_running_max_grouped(part, ch.starts, ch.lengths, zero)
        new |= part > before
    return ch.sorted_r(np.flatnonzero(new))


def _flow_paths(an, ch) -> np.ndarray:
    """Path key of every flow (computed once per flow)."""
    if len(an.flow_paths) < ch.n_flows:
        an.flow_paths = PathMtu.flow_paths(an.registry)
    return an.flow_paths


def spaces(an, ch, spans) -> PsnPart:
    """Gaps, retransmissions and PSN reuse; their counters and events."""
    if ch.n_psn:
        b = ch.batch_rows(ch.sorted_r(slice(0, ch.n_psn)))
        psn = ch.batch.cols["psn"].take(b).astype(np.int64) & (PSN_MOD - 1)
    else:
        psn = _EMPTY
    flags = ch.psn_part(ch.flags)
    gap_check = (flags & (op.F_REQUEST_SPACE | op.F_CONTINUES_RESPONSE)) != 0
    # Responses skip PSNs legitimately (ACK coalescing, IBTA 9.7.5.1.2): in the response
    # space only a READ response MIDDLE/LAST must follow the previous response's PSN.
    st = an.spaces.state
    prev_seen, prev_high = st.seen[ch.sids], st.high[ch.sids]
    span, slack = spans
    res = an.spaces.process(ch.sids, ch.lengths, psn, span, (flags & op.F_DATA) != 0, gap_check, slack)
    is_read = (flags & op.F_READ_REQUEST) != 0
    reuse = psn_reuse(an.space, ch.sids, ch.lengths, res.u, span, is_read, res.retransmitted)
    part = PsnPart(ch, psn, flags, res, span, reuse)
    part.prev_seen, part.prev_high = prev_seen, prev_high     # each group's space before the chunk
    _retransmissions(an, ch, part)
    _gaps(an, ch, part)
    if reuse is not None and reuse.any():
        s = np.flatnonzero(reuse)
        r = ch.sorted_r(s)
        an.events.add("psn_reuse", ch.ts.take(r), ch.idx(r), ch.fid.take(r), psn[s])
    return part


def _retransmissions(an, ch, part: PsnPart) -> None:
    s, r = part.retrans, part.retrans_r
    if len(s) == 0:
        return
    f, st = ch.fid.take(r), an.flow
    st.add("retransmitted_packets", f)
    st.add("retransmitted_bytes", f, ch.values_at("wire_len", r))
    st.add("retransmitted_payload", f, ch.values_at("payload_len", r))


def _gaps(an, ch, part: PsnPart) -> None:
    res = part.res
    s = res.gap
    if len(s) == 0:
        return
    r = ch.sorted_r(s)
    f = ch.fid.take(r)
    an.flow.add("gap_events", f)
    an.flow.add("gap_psns", f, res.gap_psns)
    first_missing = (res.h_prev[s] + 1) & (PSN_MOD - 1)
    an.events.add("gap", ch.ts.take(r), ch.idx(r), f, part.psn[s], res.gap_psns, first_missing)


def pairing_evidence(an, ch, part: PsnPart):
    """Request and response PSNs of the flows still open to pairing evidence (pairing.py)."""
    unpaired = an.pairing.open()[ch.sids >> 1]
    req = np.repeat(unpaired & part.is_request_group, ch.lengths)
    resp = np.repeat(unpaired & ~part.is_request_group, ch.lengths)
    if not (req.any() and resp.any()):
        return an.registry, an.flow.transport, _EMPTY, _EMPTY, _EMPTY, _EMPTY
    sid = ch.sid_rows()
    req, resp = np.flatnonzero(req), np.flatnonzero(resp)
    st = an.spaces.state                                  # each flow's request PSNs sent so far
    sent = (st.seen[0::2], st.first_u[0::2], st.high[0::2])
    return (an.registry, an.flow.transport, sid[req] >> 1, part.psn[req], sid[resp] >> 1, part.psn[resp], sent)


def request_rows(ch, part: PsnPart, rows_s: np.ndarray):
    """(flow, u, ts, idx) of PSN-part rows."""
    r = ch.sorted_r(rows_s)
    return ch.fid.take(r), part.res.u[rows_s], ch.ts.take(r), ch.idx(r)


def rtt(an, ch, part: PsnPart, responses, gaps) -> None:
    """responses: from `responses` (flow, u, ts, idx of the requester's coordinate, positions);
    gaps: from related.request_gaps."""
    ackreq = ch.values("ackreq", False) if "ackreq" in ch.batch.cols else None
    has_ackreq = ackreq is not None and ackreq.any()
    if has_ackreq or len(an.rtt.pending[0]):
        requests = _rtt_requests(an, ch, part, ackreq) if has_ackreq else (_EMPTY,) * 4
        rt = part.retrans[part.is_request_group[ch.group_at(part.retrans)]]
        an.rtt.feed(requests, responses[:4], request_rows(ch, part, rt),
                    gaps[:2], an.flow.last_gap_idx)
    if len(gaps[0]):
        last = last_per_flow(gaps[0], gaps[1])
        an.flow.last_gap_idx[gaps[0][last]] = gaps[1][last]
        an.flow.last_gap_first[gaps[0][last]] = gaps[2][last]


def _rtt_requests(an, ch, part: PsnPart, ackreq: np.ndarray):
    """Data packets with AckReq, not retransmitted, of acknowledged transports; from a flow
    without a peer only within PAIRING_HORIZON rows of its first packet."""
    f = ch.sids >> 1
    peer, first_idx = an.pairing.peer, an.flow.first_idx
    young = ch.idx(ch.sorted_r(ch.starts)) - first_idx[f] < PAIRING_HORIZON    # at the group's first row
    ok = part.is_request_group & _ACKED_TRANSPORT[an.flow.transport[f]] & ((peer[f] >= 0) | young)
    if not ok.any():
        return (_EMPTY,) * 4
    cand = np.repeat(ok, ch.lengths) & ch.psn_part(ackreq.astype(bool, copy=False))
    cand &= (part.flags & op.F_DATA) != 0
    cand[part.retrans] = False
    s = np.flatnonzero(cand)
    flow, u, ts, idx = request_rows(ch, part, s)
    keep = (peer[flow] >= 0) | (idx - first_idx[flow] < PAIRING_HORIZON)
    return flow[keep], u[keep], ts[keep], idx[keep]


def responses(an, ch, part: PsnPart, nak_seq: np.ndarray):
    """Response-space rows of paired flows whose peer's request space has been seen, mapped to
    the peer's request PSN coordinate: the PSN a response acknowledges, i.e. its own PSN, but
    PSN - 1 for a NAK (PSN sequence error), which refuses its PSN (IBTA 9.7.5.1.3)."""
    peer = an.pairing.peer[ch.sids >> 1]
    ok = ~part.is_request_group & (peer >= 0)
    ok[ok] = an.spaces.state.seen[2 * peer[ok]]
    if not ok.any():
        return (_EMPTY,) * 5
    s = np.flatnonzero(np.repeat(ok, ch.lengths))
    peer_f = np.repeat(peer[ok], ch.lengths[ok])
    high = an.spaces.request_high(peer_f)
    u = high + psn_delta(part.psn[s], high & (PSN_MOD - 1))
    if len(nak_seq):
        u[np.isin(s, ch.sorted_of(nak_seq))] -= 1
    r = ch.sorted_r(s)
    return peer_f, u, ch.ts.take(r), ch.idx(r), s


def unsent(an, ch, part: PsnPart, responses) -> None:
    """Responses for PSNs the requester never sent (unsent.py), judged against the requester's
    request space as it was at each response."""
    req_flow, _, ts, idx, s = responses
    if len(s):
        unsent_check(an, ch, part, ch.fid.take(ch.sorted_r(s)), req_flow, ts, idx, part.psn[s])


def timeouts(an, ch, part: PsnPart, nak: np.ndarray) -> None:
    """(After related.retransmit_events, which reads the first sends before this chunk's.)
    A retransmission run (in the request space) with no NAK (PSN sequence error or RNR,
    `nak`: RoCE rows) from the peer since the previous run is a timeout retransmission."""
    rt = part.res.retransmitted
    s = part.retrans
    if part.reuse is not None:
        rt = rt & ~part.reuse
        s = np.flatnonzero(rt)
    if len(s) and part.is_request_group[ch.group_at(s)].any():
        _timeout_runs(an, ch, part, rt, nak)
    else:                                       # no retransmission run here: none carried on
        an.space.last_retrans[ch.sids[part.is_request_group]] = False
    if len(nak):
        np.maximum.at(an.flow.last_nak_idx, ch.fid.take(nak), ch.idx(nak))
    f = first_sends(ch, part, an)
    if len(f):
        r = ch.sorted_r(f)
        an.sends.record(ch.sid_rows()[f] >> 1, part.res.u[f], ch.ts.take(r), ch.idx(r))


def _timeout_runs(an, ch, part: PsnPart, rt: np.ndarray, nak: np.ndarray) -> None:
    q = part.is_request_group
    sids, lengths = ch.sids[q], ch.lengths[q]
    rows = np.flatnonzero(np.repeat(q, ch.lengths))          # PSN-part rows of request spaces
    rtq = rt[rows]
    starts = np.cumsum(lengths) - lengths
    sp = an.space
    prev = np.empty_like(rtq)
    prev[1:] = rtq[:-1]
    prev[starts] = sp.last_retrans[sids]
    sp.last_retrans[sids] = rtq[starts + lengths - 1]
    run = np.flatnonzero(rtq & ~prev)
    if len(run) == 0:
        return
    g = np.searchsorted(starts, run, side="right") - 1
    s = rows[run]
    r = ch.sorted_r(s)
    idx, f = ch.idx(r), ch.fid.take(r)
    prev_run = _previous_run_idx(sp, sids[g], idx, g)
    peer = an.pairing.peer[f]
    last_nak = _last_nak_before(an, ch, nak, peer, idx)
    # a lone pair is provisional (pairing.py): its peer may be another QP of the same two hosts
    # until evidence comes, so a NAK from any flow coming back between them counts
    lone = (peer >= 0) & an.pairing.lone[f]
    if lone.any():
        last_nak[lone] = np.maximum(last_nak[lone], _last_nak_coming_back(an, ch, nak, f[lone], idx[lone]))
    t = (peer >= 0) & (last_nak <= prev_run)
    s, r, f = s[t], r[t], f[t]
    ts = ch.ts.take(r)
    original, first = original_send(an, ch, part, s, f)
    delay = np.where(original >= 0, ts - original, -1)
    # PSNs the requester had sent beyond the resent packet's: 0 for a tail packet, which no PSN
    # sequence error NAK can answer (the responder NAKs a later PSN arriving first, IBTA 9.7.5.1.3)
    beyond = np.maximum(part.res.h_prev[s] - part.res.end[s], 0)
    an.events.add("timeout_retransmit", ts, idx[t], f, part.psn[s], delay, beyond, rel=first)


def original_send(an, ch, part: PsnPart, s: np.ndarray, f: np.ndarray):
    """(ts, row index) of the first send of the PSN resent at grouped positions `s` (-1: unknown)."""
    fs = first_sends(ch, part)
    key = lambda pos: ch.sid_rows()[pos] * KEY_SPACE + part.res.u[pos]   # noqa: E731
    u = part.res.u[s]
    fr = ch.sorted_r(fs)
    return an.sends.original(f, u, part.res.h_prev[s], key(fs) if len(fs) else _EMPTY,
                             ch.ts.take(fr), key(s), ch.idx(fr))


def _previous_run_idx(sp, sid, idx, g) -> np.ndarray:
    """Per run start (sid, idx, group g): the previous run's start in its space (carried)."""
    prev_run = np.empty(len(idx), dtype=np.int64)
    prev_run[1:] = idx[:-1]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    prev_run[first] = sp.last_run_idx[sid[first]]
    last = np.ones(len(idx), dtype=bool)
    last[:-1] = g[1:] != g[:-1]
    sp.last_run_idx[sid[last]] = idx[last]
    return prev_run


def _last_nak_coming_back(an, ch, nak: np.ndarray, flow: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per run start (its flow, its row index): the last NAK before it of any flow from the flow's
    destination to its source (timeout runs are few: a loop over them, not over packets)."""
    reg = an.registry
    src, dst = reg.src[: reg.n], reg.dst[: reg.n]
    n_idx, n_fid = (ch.idx(nak), ch.fid.take(nak)) if len(nak) else (np.zeros(0, np.int64),) * 2
    out = np.full(len(flow), -1, dtype=np.int64)
    for k, (f, i) in enumerate(zip(flow.tolist(), idx.tolist())):
        back = np.flatnonzero((src == dst[f]).all(axis=1) & (dst == src[f]).all(axis=1))
        here = n_idx[np.isin(n_fid, back) & (n_idx < i)]
        out[k] = max(int(an.flow.last_nak_idx[back].max(initial=-1)), int(here.max(initial=-1)))
    return out


def _last_nak_before(an, ch, nak: np.ndarray, flow: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Row index of the last NAK of `flow` before `idx` (this chunk, else carried)."""
    n_idx = ch.idx(nak)
    pos, carried = last_before(ch.fid.take(nak), n_idx, an.flow.last_nak_idx, flow, idx)
    return np.where(pos >= 0, n_idx[np.maximum(pos, 0)], carried) if len(n_idx) else carried
