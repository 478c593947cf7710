"""Events with their related frame: retransmissions, NAKs and CNPs, once the chunk's first
sends, gaps and pairing are known.

- A retransmission names the frame that first carried its PSN (sends.py: request PSN spaces,
  when captured within the last WINDOW PSNs of the space).

- A NAK PSN sequence error names the frame that opened the gap it reports: the last gap of the
  peer's request space before the NAK whose first missing PSN is the NAK's PSN (IBTA 9.7.5.1.3:
  the responder NAKs the PSN it expected). A mirror before the loss sees no gap: none.
- A CNP names the last CE-marked packet of the flow it answers before it: the CNP goes back to
  the requester's QP (RoCEv2 A17.9.2), so it shares a flow id with the responder's ACKs, and the
  marked packets are of its peer flow. Without a known peer: none.
The counts were taken by chunk_counts; only the events are added here.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.chunk_counts import rank
from roceview.analysis.chunk_psn import original_send
from roceview.analysis.segments import PSN_MOD, last_before


def nak_events(an, ch, counted, gaps) -> None:
    """gaps: chunk_psn.request_gaps (flow, idx, first missing PSN)."""
    for name, r, syn in counted.naks:
        f, idx, psn = ch.fid.take(r), ch.idx(r), ch.psn_at(r)
        rel = np.full(len(r), -1, dtype=np.int64)
        if name == "nak_seq":
            peer = an.pairing.peer[f]
            pos, carried = last_before(gaps[0], gaps[1], an.flow.last_gap_idx, peer, idx)
            first = np.where(peer >= 0, an.flow.last_gap_first[np.maximum(peer, 0)], -1)
            if len(gaps[0]):
                here, at = pos >= 0, np.maximum(pos, 0)
                carried = np.where(here, gaps[1][at], carried)
                first = np.where(here, gaps[2][at], first)
            rel = np.where(first == psn, carried, -1)
        an.events.add(name, ch.ts.take(r), idx, f, psn, syn, rank=rank(ch, r), rel=rel)


def cnp_events(an, ch, counted) -> None:
    cnp, ce = counted.cnp, counted.ce
    if len(cnp):
        f, idx = ch.fid.take(cnp), ch.idx(cnp)
        peer = an.pairing.peer[f]
        ce_f, ce_idx = ch.fid.take(ce), ch.idx(ce)
        pos, carried = last_before(ce_f, ce_idx, an.flow.last_ce_idx, peer, idx)
        rel = np.where(pos >= 0, ce_idx[np.maximum(pos, 0)] if len(ce) else -1, carried)
        an.events.add("cnp", ch.ts.take(cnp), idx, f, rank=rank(ch, cnp), rel=rel)
    if len(ce):
        np.maximum.at(an.flow.last_ce_idx, ch.fid.take(ce), ch.idx(ce))


def retransmit_events(an, ch, part) -> None:
    """Before chunk_psn.timeouts records this chunk's first sends."""
    s, r = part.retrans, part.retrans_r
    if len(s) == 0:
        return
    rel = np.full(len(s), -1, dtype=np.int64)
    req = part.is_request_group[ch.group_at(s)]
    if req.any():
        rel[req] = original_send(an, ch, part, s[req], ch.fid.take(r[req]))[1]
    an.events.add("retransmit", ch.ts.take(r), ch.idx(r), ch.fid.take(r), part.psn[s], rel=rel)


def request_gaps(ch, part):
    """(flow, idx, first missing PSN) of the request-space gaps: the capture (or the network)
    lost packets there, so a later ACK may cover requests whose own ACK was not captured (RTT),
    and a NAK may report one."""
    s = part.res.gap
    if len(s):
        s = s[part.is_request_group[ch.group_at(s)]]
    r = ch.sorted_r(s)
    return ch.fid.take(r), ch.idx(r), (part.res.h_prev[s] + 1) & (PSN_MOD - 1)
