"""The truth of every operation a capture shows (`Truth.ops`): each work request as the capture
point saw it, taken from the model's own record of it, for comparison with `ops.csv`.

A work request keeps every request packet it sent (first sends and resends) and the response its
requester completed it on (requester.py), the responder the response it answered each request
packet with (responder.py); the mirror knows the frame each packet became (mirror.captured). So,
per work request with a captured packet:
  - its completion is the frame of the response the requester completed it on, when captured;
    when the capture shows a resend of it after that response (the resend crossed the response
    on the wire: a go-back-N from an earlier loss), the response that answered its last resend:
    the capture point cannot tell the requester had its completion already;
  - its packets are its captured request packets before that frame (a packet sent after it is
    one the capture shows after the completion: not the operation's any more);
  - it is retransmitted when one of those packets carries a PSN the capture had already shown
    on its QP (at or behind the highest PSN seen, a READ's span included): the capture point's
    own view of a resend, which is all a capture can tell;
  - its outstanding: the READ and atomic work requests of its QP whose first packet the capture
    showed before its own first packet and whose completion it had not shown yet;
  - the CM MADs (UD SEND ONLY to QP1) are operations of one packet, nothing completes them.
Only for a capture with one capture point (no `points`): a frame's first copy is its frame.
"""
from __future__ import annotations

from roceview.generate import ibta as ib
from roceview.generate.frames import RocePacket
from roceview.generate.simulator import BASE_TS_NS


def operations(net) -> list[dict]:
    """One dict per operation (the ops.csv columns, latency as `latency_ns`), by first frame."""
    if net.mirror.points is not None:
        return []
    seen = net.mirror.captured(BASE_TS_NS)
    ips = [".".join(map(str, ip)) for ip in net.addr.ips]
    qps = {q.qpn: q for h in net.hosts for q in h.qps.values()}
    rows = []
    for qp in qps.values():
        rows += _qp_operations(qp, qps[qp.peer_qpn], seen, ips)
    rows += _mads(net, seen, ips)
    rows.sort(key=lambda r: r["first_frame"])
    return rows


def _qp_operations(qp, peer, seen: dict, ips: list[str]) -> list[dict]:
    req = qp.requester
    flow = f"{ips[qp.host.index]}>{ips[qp.peer]}:0x{qp.peer_qpn:06x}"
    resent = _resent_at_capture(req, seen)
    answers = peer.responder.answered_by
    done = {id(wr): _completion(wr, seen, answers) for wr in req.wrs}
    firsts = {}
    for wr in req.wrs:
        frames = [seen[id(p)] for p, _ in wr.sends if id(p) in seen]
        if frames:
            firsts[id(wr)] = min(frames)
    rows = []
    for wr in req.wrs:
        if id(wr) not in firsts:
            continue
        compl = done[id(wr)]
        sends = sorted(seen[id(p)] for p, _ in wr.sends if id(p) in seen)
        counted = [s for s in sends if compl is None or s[0] < compl[0]]
        start, last = counted[0], counted[-1]
        if wr.op == "READ" and compl is not None:
            last = compl
        rows.append({
            "flow": flow, "src_ip": ips[qp.host.index], "dst_ip": ips[qp.peer], "dest_qp": qp.peer_qpn, "op": wr.op,
            "first_psn": (qp.sq_psn + wr.first) & ib.PSN_MASK, "packets": len(counted),
            "bytes": 8 if wr.op in ib.ATOMIC_OPCODES else wr.length, "first_frame": start[0], "last_frame": last[0],
            "start_ts": start[1], "end_ts": last[1], "completion_frame": compl[0] if compl else None,
            "completion_ts": compl[1] if compl else None, "latency_ns": compl[1] - start[1] if compl else None,
            "retransmitted": any(s[0] in resent for s in counted),
            "outstanding": _outstanding(req, wr, firsts, done)})
    return rows


def _completion(wr, seen: dict, answers: dict):
    """(frame, ts) of the response that completes `wr` at the capture point, None if not captured."""
    if wr.completed_by is None or id(wr.completed_by) not in seen:
        return None
    done = seen[id(wr.completed_by)]
    sends = sorted((seen[id(p)], p) for p, _ in wr.sends if id(p) in seen)
    if sends and sends[-1][0][0] > done[0]:                   # a resend the capture shows after it
        answer = answers.get(id(sends[-1][1]))
        return seen.get(id(answer)) if answer is not None else None
    return done


def _resent_at_capture(req, seen: dict) -> set[int]:
    """Frames of the QP's request packets whose PSN the capture had already shown (at or behind
    the highest one seen before them, a READ request's span included)."""
    packets = []
    for wr in req.wrs:
        for pkt, _ in wr.sends:
            if id(pkt) in seen:
                seq = (pkt.psn - req.qp.sq_psn) & ib.PSN_MASK
                last = wr.end - 1 if wr.op == "READ" else seq
                packets.append((seen[id(pkt)][0], seq, last))
    packets.sort()
    out, high = set(), None
    for frame, seq, last in packets:
        if high is not None and seq <= high:
            out.add(frame)
        high = last if high is None else max(high, last)
    return out


def _outstanding(req, wr, firsts: dict, done: dict) -> int:
    """READ / atomic work requests of the QP in flight when the capture showed `wr`'s first
    packet: their first packet came before it, and neither their completion nor that of a work
    request posted after them (completions are in order) came before it."""
    at = firsts[id(wr)][0]
    n, end = 0, None
    for w in reversed(req.wrs):                  # `end`: the earliest completion from w on
        compl = done[id(w)]
        if compl is not None and id(w) in firsts:
            end = compl[0] if end is None else min(end, compl[0])
        if w is wr or w.op not in ib.READ_ATOMIC_OPS or id(w) not in firsts or firsts[id(w)][0] >= at:
            continue
        n += end is None or end > at
    return n


def _mads(net, seen: dict, ips: list[str]) -> list[dict]:
    """The CM's MADs: a UD SEND ONLY each."""
    rows = []
    for frame in {id(f): f for f in net.mirror.sources}.values():
        if not isinstance(frame, RocePacket) or frame.opcode != 0x64:
            continue
        number, ts = seen[id(frame)]
        rows.append({"flow": f"{ips[frame.src]}>{ips[frame.dst]}:0x{frame.dest_qp:06x}", "src_ip": ips[frame.src],
                     "dst_ip": ips[frame.dst], "dest_qp": frame.dest_qp, "op": "SEND", "first_psn": frame.psn,
                     "packets": 1, "bytes": frame.payload_len, "first_frame": number, "last_frame": number,
                     "start_ts": ts, "end_ts": ts, "completion_frame": None, "completion_ts": None,
                     "latency_ns": None, "retransmitted": False, "outstanding": 0})
    return rows
