"""Per-chunk steps that need no PSN order: transport, per-flow counters, NAK/CNP/CE events,
first/last timestamps, the timeline.

They read the chunk's capture-order columns (chunk.py): counters are bincounts, which do not care
about order, and events are sorted when the table is built; only the rows dropped past an event
budget depend on order, so events carry `rank`, the (flow, space) order the analysis is defined in.
Rare kinds (NAKs, CNPs, CE marks) are found once as row lists and every step skips what is empty.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.timeline import Rows


def rank(ch, r: np.ndarray) -> np.ndarray:
    """Order key of rows `r`: flow * 3 + PSN space (2: none)."""
    space = np.where(ch.in_psn[r], (ch.flags[r] & op.F_RESPONSE_SPACE) != 0, 2)
    return ch.fid[r] * 3 + space


def transport(an, ch) -> None:
    """A flow's transport is that of its first non-CNP packet (CNP only: CNP); a new flow's
    first_idx is its first row in (flow, space) order."""
    if ch.n_flows > ch.flows_before:
        fid_s = ch.sorted_fid()
        new = np.flatnonzero(fid_s >= ch.flows_before)
        flows, first = np.unique(fid_s[new], return_index=True)
        first_idx = ch.idx(ch.sorted_r(new[first]))
        an.flow.first_idx[flows] = first_idx
        an.last_new_flow_idx = int(first_idx.max())
    t = an.flow.transport
    unknown_flow = (t < 0) | (t == op.TRANSPORT_CNP)
    if not unknown_flow[np.flatnonzero(ch.flow_rows)].any():
        return                                  # every flow here already has its transport
    fid_s = ch.sorted_fid()
    rows = np.flatnonzero(unknown_flow.take(fid_s))
    f, code = fid_s[rows], op.transport_code(ch.opcode.take(ch.sorted_r(rows)))
    for want_cnp in (False, True):
        m = (code == op.TRANSPORT_CNP) == want_cnp
        if m.any():
            flows, first = np.unique(f[m], return_index=True)
            upd = (t[flows] < 0) | ((t[flows] == op.TRANSPORT_CNP) & (not want_cnp))
            t[flows[upd]] = code[m][first[upd]]


class Counted:
    """Rows found by `counters` that later steps use (RoCE rows, capture order)."""

    def __init__(self):
        self.nak = self.nak_seq_rnr = self.nak_seq = self.ce = self.cnp = np.zeros(0, dtype=np.int64)
        self.naks: list = []        # (event kind, rows, AETH syndromes): events added by related.py


def counters(an, ch) -> Counted:
    """Per-flow counters except bytes (counted with the timeline, same pass)."""
    st, f = an.flow, ch.fid
    out = Counted()
    st.packets += ch.flow_rows
    _data(an, ch)
    _acks(an, ch, out)
    _ecn(an, ch, out)
    cnp = np.flatnonzero((ch.flags & op.F_CNP) != 0)
    if len(cnp):
        st.add("cnp_packets", f.take(cnp))         # its event: related.py, once pairing is known
    out.cnp = cnp
    _first_last_ts(an, ch)
    return out


def _data(an, ch) -> None:
    """Request-space rows are data packets by their opcode: only data packets elsewhere (READ
    responses, UD, no valid PSN) need a count of their own."""
    data = (ch.flags & op.F_DATA) != 0
    if not data.any():
        return
    st = an.flow
    request = (ch.flags & op.F_REQUEST_SPACE) != 0
    if not ch.in_psn_all:
        request &= ch.in_psn
    st.data_packets += ch.space_rows[:, 0]
    extra = data & ~request
    if extra.any():
        st.add("data_packets", ch.fid, extra)
    st.add("payload_bytes", ch.fid, ch.values("payload_len") * data)


def _acks(an, ch, out: Counted) -> None:
    """ACKs are counted with cheap byte-wide tests over the chunk; only NAKs (AETH syndrome
    kind != ACK, rare) are classified row by row."""
    if "aeth_syndrome" not in ch.batch.cols:
        return                                   # no AETH anywhere: neither ACK nor NAK
    ack = (ch.flags & op.F_ACK) != 0
    ok = ch.valid("aeth_syndrome")
    if ok is not None:
        ack &= ok
    kind = ch.take(ch.batch.cols["aeth_syndrome"]) & 0x60
    plain = ack & (kind == 0)
    n_plain = np.count_nonzero(plain)
    if ch.in_psn_all and n_plain == ch.space_rows[:, 1].sum():
        an.flow.acks += ch.space_rows[:, 1]     # the response space holds exactly these rows
    elif n_plain:
        an.flow.add("acks", ch.fid, plain)
    if n_plain < np.count_nonzero(ack):
        _naks(an, ch, out, np.flatnonzero(ack & (kind != 0)))


def _naks(an, ch, out: Counted, a: np.ndarray) -> None:
    syn = ch.values_at("aeth_syndrome", a)
    kind, code = (syn >> 5) & 3, syn & 0x1F
    naks = {"nak_seq": (kind == op.AETH_NAK) & (code == op.NAK_PSN_SEQUENCE_ERROR),
            "nak_rnr": kind == op.AETH_RNR_NAK,
            "nak_other": ((kind == op.AETH_NAK) & (code != 0)) | (kind == op.AETH_RESERVED)}
    for name, m in naks.items():
        if m.any():
            r = a[m]
            f = ch.fid.take(r)
            an.flow.add(f"naks_{name[4:]}", f)
            out.naks.append((name, r, syn[m]))
    # A NAK's PSN is the request it refuses (IBTA 9.7.5.1.3): it acknowledges only the PSNs
    # before it, so it moves the highest-seen mark to PSN - 1 (a span of 0).
    out.nak = a
    out.nak_seq_rnr = a[naks["nak_seq"] | naks["nak_rnr"]]
    out.nak_seq = a[naks["nak_seq"]]


def _ecn(an, ch, out: Counted) -> None:
    if "ecn" not in ch.batch.cols:
        return
    ecn, ok = ch.take(ch.batch.cols["ecn"]), ch.valid("ecn")
    not_ect, ce = ecn == 0, ecn == 3
    if ok is not None:
        not_ect &= ok
        ce &= ok
    if not_ect.any():
        an.flow.add("ecn_not_ect", ch.fid, not_ect)
    ce = np.flatnonzero(ce)
    if len(ce):
        f = ch.fid.take(ce)
        an.flow.add("ecn_ce", f)
        psn = np.where(ch.in_psn[ce], ch.psn_at(ce), -1)
        an.events.add("ecn_ce", ch.ts.take(ce), ch.idx(ce), f, psn, rank=rank(ch, ce))
    out.ce = ce


def _first_last_ts(an, ch) -> None:
    starts, lengths, flows = ch.groups()
    ts = ch.ts
    if ch.ts_in_order():                         # a group's first row is its earliest
        lo = ts.take(ch.sorted_r(starts))
        hi = ts.take(ch.sorted_r(starts + lengths - 1))
    else:
        ts_s = ts if ch.order is None else ts.take(ch.order)
        lo, hi = np.minimum.reduceat(ts_s, starts), np.maximum.reduceat(ts_s, starts)
    np.minimum.at(an.flow.first_ts, flows, lo)
    np.maximum.at(an.flow.last_ts, flows, hi)


def timeline(an, ch, counted: Counted, retransmitted: np.ndarray) -> None:
    """The timeline, and the per-flow bytes counter from its sums. retransmitted: RoCE rows."""
    wire = ch.values("wire_len")
    values = {"bytes": wire, "ecn_ce": _rows(counted.ce), "cnp_packets": _rows(counted.cnp),
              "retransmitted_packets": _rows(retransmitted)}
    flow_bytes = an.timeline.feed(ch.ts, ch.fid, values, ch.n_flows, ch.ts_in_order())
    an.flow.bytes += flow_bytes.astype(np.int64)


def _rows(r: np.ndarray):
    return Rows(r) if len(r) else None
