"""RC requester (IBTA 9.7.4 - 9.7.6): packetises work requests into PSNs, go-back-N.

State is kept in unwrapped sequence numbers (`seq`, 0-based); the wire PSN is
(first_psn + seq) mod 2^24. `snd_una` is the oldest unacknowledged PSN, `snd_nxt` the next
one to transmit; a NAK or a timeout moves `snd_nxt` back to the PSN to resend (go-back-N,
IBTA 9.7.5.1.3 / 9.7.6.1.3). `sent_hi` is the highest PSN ever sent + 1: a packet below it is
a retransmission. A QP that gives up (fatal NAK, retry or RNR retry exceeded) goes to Error and
sends nothing more; its work request completes with the status recorded in `truth.qp_errors`.
`reroutes` moves the QP to a new UDP source port from a given PSN on (an ECMP rehash: the NIC or
its driver picks new entropy); every packet sent after that, resends of older PSNs included,
carries the new port. Each NAK PSN sequence error acted on is recorded in `truth.seq_naks` with
the packets its go-back-N resent, and whether it was spurious (its PSN was never lost).

READ responses (IBTA 9.7.5.1, the requester's response PSN checks): a READ expects its responses
FIRST/MIDDLE/LAST (or ONLY) at consecutive PSNs; a response, or an ACK / NAK, acknowledges every
request before its PSN. A READ response past the next PSN a READ still awaits (a PSN gap in the
response stream) or an ACK / NAK for a later request while a READ is incomplete (an implied NAK:
mlx5's implied_nak_seq_err) means responses were lost: the requester re-issues the READ from the
first missing PSN (its VA advanced and DMA length cut by what arrived) and goes back N from
there, once per gap (as rxe's comp.started_retry); the ACK timer covers a re-read lost again.
Each re-read is recorded in `truth.rereads`: PSN, how it was detected, packets resent.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from roceview.generate import ibta as ib
from roceview.generate.simulator import BASE_TS_NS, serialisation_ps
from roceview.generate.frames import RocePacket

RNR_RETRY_INFINITE = 7   # QP attribute rnr_retry (3 bits): 0-6 resends after RNR NAKs, 7 = for ever
# work completion status of the WR that was outstanding when a NAK code ended the QP
FATAL_NAK_STATUS = {ib.NAK_INVALID_REQUEST: "IBV_WC_REM_INV_REQ_ERR",
                    ib.NAK_REMOTE_ACCESS_ERROR: "IBV_WC_REM_ACCESS_ERR",
                    ib.NAK_REMOTE_OPERATIONAL_ERROR: "IBV_WC_REM_OP_ERR"}

# what made the requester re-read: the counter each way adds to (implied_naks: mlx5's
# implied_nak_seq_err; a timeout is also in ack_timeouts)
REREAD_COUNTERS = {"out_of_sequence_response": "read_responses_out_of_sequence",
                   "implied_nak": "implied_naks", "timeout": "reads_reissued_after_timeout"}


@dataclass
class WorkRequest:
    op: str            # SEND, SEND_IMM, WRITE, WRITE_IMM, READ, CMP_SWAP, FETCH_ADD
    length: int
    first: int         # first seq
    npkts: int
    va: int
    rkey: int
    imm: int = 0
    sends: list = field(default_factory=list)   # (packet, resent) of each request packet, in order
    completed_by: object = None                 # the response the requester completed it on

    @property
    def end(self) -> int:
        return self.first + self.npkts


class Requester:
    def __init__(self, qp, window: int, timeout_exp: int, retry_cnt: int = 7, ackreq_every: int = 16,
                 rnr_retry: int = RNR_RETRY_INFINITE, max_rd_atomic: int | None = None):
        self.qp = qp
        self.max_rd_atomic = max_rd_atomic   # initiator depth: READ / atomic requests in flight (9.7.2.1)
        self._response = None                # the response being handled (what completes a WR)
        self.window, self.retry_cnt, self.ackreq_every = window, retry_cnt, ackreq_every
        self.rnr_retry, self.rnr_naks = rnr_retry, 0   # RNR NAKs since the last forward progress
        self.timeout_exp, self.timeout_ps = timeout_exp, ib.local_ack_timeout_ps(timeout_exp)
        self.wrs: list[WorkRequest] = []
        self._starts: list[int] = []
        self.snd_una = self.snd_nxt = self.sent_hi = self.posted_end = 0
        self.done = 0                 # index of the oldest incomplete work request
        self.next_tx = self.hold_until = 0
        self.timer_gen, self.timer_armed, self.retries = 0, False, 0
        self.error = False
        self.on_complete = lambda wr: None
        self.reroutes: dict[int, int] = {}   # seq -> UDP source port from that PSN on
        self.on_reroute = lambda seq, old_sport, new_sport: None
        self._go_back = None          # truth.seq_naks / rereads record whose resends are going out
        self._reread_at = None        # seq a re-read was last issued from (one per gap)

    # ---- posting ----------------------------------------------------------------------------
    def post(self, op: str, length: int, va: int, rkey: int, imm: int = 0) -> WorkRequest:
        npkts = 1 if op in ib.ATOMIC_OPCODES else max(1, -(-length // self.qp.mtu))
        wr = WorkRequest(op, length, self.posted_end, npkts, va, rkey, imm)
        self.wrs.append(wr)
        self._starts.append(wr.first)
        self.posted_end = wr.end
        self.qp.host.port.kick()
        return wr

    # ---- transmission (pulled by the NIC port) ---------------------------------------------
    def next_packet(self, now: int, allowed):
        if self.error or self.qp.pcp not in allowed or self.snd_nxt >= self.posted_end:
            return None, None
        if self.snd_nxt - self.snd_una >= self.window or self._at_depth():
            return None, None          # an ACK (a READ's last response) will kick the port
        wait = max(self.hold_until, self.next_tx)
        if now < wait:
            return None, wait
        pkt = self._build(self.snd_nxt)
        self.next_tx = now + serialisation_ps(pkt.wire_bytes, self.qp.rp.rate(now))
        self._arm_timer()
        return pkt, None

    def _at_depth(self) -> bool:
        """The next request is a new READ / atomic and max_rd_atomic of them are in flight: the
        send queue waits (in order) until one completes."""
        if self.max_rd_atomic is None or self.snd_nxt < self.sent_hi:
            return False
        wr = self.wrs[bisect.bisect_right(self._starts, self.snd_nxt) - 1]
        if wr.op not in ib.READ_ATOMIC_OPS:
            return False
        flight = 0
        for k in range(self.done, len(self.wrs)):
            w = self.wrs[k]
            if w.first >= self.sent_hi:
                break
            flight += w.op in ib.READ_ATOMIC_OPS
        return flight >= self.max_rd_atomic

    def _build(self, seq: int) -> RocePacket:
        wr = self.wrs[bisect.bisect_right(self._starts, seq) - 1]
        resent = seq < self.sent_hi
        pkt = self._packet(wr, seq)
        wr.sends.append((pkt, resent))
        return pkt

    def _packet(self, wr: WorkRequest, seq: int) -> RocePacket:
        i = seq - wr.first
        if seq < self.sent_hi:
            self.qp.truth.retransmitted[f"{self.qp.qpn:#08x}"] += 1
            self.qp.truth.count("retransmitted_packets")
            if self._go_back is not None:
                self._go_back["resent"] += 1
                if self._go_back.get("spurious"):
                    self.qp.truth.count("resent_after_spurious_nak")
        elif seq in self.reroutes:      # first transmission of the PSN the new path starts at
            old, self.qp.sport = self.qp.sport, self.reroutes[seq]
            self.on_reroute(seq, old, self.qp.sport)
        if wr.op == "READ":
            return self._read_request(wr, i)
        if wr.op in ib.ATOMIC_OPCODES:
            return self._atomic_request(wr, seq)
        return self._data_packet(wr, i, seq)

    def _atomic_request(self, wr: WorkRequest, seq: int) -> RocePacket:
        """CmpSwap / FetchAdd: one packet, AtomicETH (VA, R_Key, swap or add data, compare data)."""
        self.snd_nxt = seq + 1
        self.sent_hi = max(self.sent_hi, seq + 1)
        return self.qp.packet(ib.ATOMIC_OPCODES[wr.op], seq, ackreq=True,
                              atomic=(wr.va, wr.rkey, wr.imm + 1, wr.imm))

    def _read_request(self, wr: WorkRequest, i: int) -> RocePacket:
        offset = i * self.qp.mtu  # a resent READ asks only for what is still missing (9.7.4.1.4)
        self.snd_nxt = wr.end
        self.sent_hi = max(self.sent_hi, wr.end)
        return self.qp.packet(ib.RDMA_READ_REQUEST, wr.first + i, ackreq=True,
                              reth=(wr.va + offset, wr.rkey, wr.length - offset))

    def _data_packet(self, wr: WorkRequest, i: int, seq: int) -> RocePacket:
        first, middle, last, only = ib.MESSAGE_OPCODES[wr.op]
        n = wr.npkts
        opcode = only if n == 1 else first if i == 0 else last if i == n - 1 else middle
        size = self.qp.mtu if i < n - 1 else wr.length - (n - 1) * self.qp.mtu
        reth = (wr.va, wr.rkey, wr.length) if opcode in ib.RETH_OPCODES else None
        imm = wr.imm if opcode in ib.IMMDT_OPCODES else None
        ackreq = i == n - 1 or i % self.ackreq_every == self.ackreq_every - 1
        self.snd_nxt = seq + 1
        self.sent_hi = max(self.sent_hi, seq + 1)
        return self.qp.packet(opcode, seq, ackreq=ackreq, reth=reth, imm=imm, payload_len=size,
                              se=opcode in ib.IMMDT_OPCODES)

    # ---- responses (ACK / NAK / READ responses) ---------------------------------------------
    def on_response(self, pkt: RocePacket) -> None:
        if self.error:
            return
        self._response = pkt
        seq = self.qp.unwrap_sq(pkt.psn, self.snd_una)
        if pkt.opcode != ib.ACKNOWLEDGE:
            return self._read_response(seq, pkt.opcode)
        syndrome = pkt.aeth[0]
        kind, code = syndrome >> 5, syndrome & 0x1F
        if kind == 3 and code != ib.NAK_PSN_SEQUENCE_ERROR:
            return self._fatal_nak(code, seq)
        # a NAK acknowledges what precedes its PSN: a READ incomplete there was answered in full
        if kind in (1, 3) and self._implied_nak(seq, seq):
            self.qp.truth.count("naks_rnr_received" if kind == 1 else "naks_seq_received")
        elif kind == 0 and not self._implied_nak(seq + 1, seq):
            self._advance(seq + 1)
        elif kind == 1:
            self._rnr_nak(seq, code)
        elif kind == 3:
            self._sequence_nak(seq)

    def _read_response(self, seq: int, opcode: int) -> None:
        """A READ response at `seq` acknowledges every request before it; past the next PSN a READ
        awaits, the responses between were lost: re-read from there."""
        if seq < self.snd_una:
            return                     # a replayed READ's response, already had
        missing = self._missing_read(seq)
        if missing is None:
            return self._advance(seq + 1)
        self._advance(missing[0])      # requests before the READ: implicitly acknowledged
        self._reread(missing[0], "out_of_sequence_response", seq, opcode)

    def _implied_nak(self, end: int, seq: int) -> bool:
        """An ACK covering PSNs up to `end` (exclusive; a NAK: its PSN) while a READ before `end`
        still awaits responses. Beyond the READ's last PSN it is an implied NAK: the responder
        has moved on to later requests, the READ's missing responses were lost; re-read them.
        An ACK inside the READ's range may be an unsolicited ACK (IBTA: a repeat of the latest
        acknowledge, whose PSN can be a READ response's): it acknowledges what precedes the READ
        only. True if handled here."""
        missing = self._missing_read(end)
        if missing is None:
            return False
        first, wr = missing
        self._advance(first)
        if seq >= wr.end:
            self._reread(first, "implied_nak", seq, ib.ACKNOWLEDGE)
        return True

    def _missing_read(self, end: int):
        """(seq, WR): the first PSN below `end` a READ still awaits a response for, or None.
        Requests other than READs before it are acknowledged by any later response."""
        pos = self.snd_una
        for k in range(self.done, len(self.wrs)):
            wr = self.wrs[k]
            if pos >= end:
                return None
            if wr.op in ib.READ_ATOMIC_OPS:        # answered by its own response only
                return pos, wr
            pos = wr.end
        return None

    def _reread(self, seq: int, how: str, by_seq: int | None, by_opcode: int | None) -> None:
        """Re-issue the READ from `seq` (its first missing response) and go back N from there:
        the requests after it are resent too (rxe req_retry, IBTA 9.7.5.1)."""
        if seq == self._reread_at:
            return                     # this gap is being re-read already
        self._reread_at = seq
        self.qp.truth.count("reads_reissued")
        self.qp.truth.count(REREAD_COUNTERS[how])
        wr = self.wrs[bisect.bisect_right(self._starts, seq) - 1]
        offset = (seq - wr.first) * self.qp.mtu
        self._go_back = {"qpn": self.qp.qpn, "psn": self._psn(seq), "ts_ns": BASE_TS_NS + self.qp.sim.now // 1000,
                         "detected": how, "by_psn": None if by_seq is None else self._psn(by_seq),
                         "by_opcode": by_opcode, "va": wr.va + offset, "dma_length": wr.length - offset,
                         "resent": 0}
        self.qp.truth.rereads.append(self._go_back)
        self.snd_nxt = min(self.snd_nxt, seq)
        self.qp.host.port.kick()

    def _psn(self, seq: int) -> int:
        return (self.qp.sq_psn + seq) & ib.PSN_MASK

    def _sequence_nak(self, seq: int) -> None:
        """NAK PSN sequence error: everything before `seq` arrived; resend from it (9.7.5.1.3)."""
        if seq < self.snd_una:
            return
        self.qp.truth.count("naks_seq_received")
        self._record_seq_nak(seq)
        self._advance(seq)
        self.snd_nxt = min(self.snd_nxt, seq)
        self.qp.host.port.kick()

    def _record_seq_nak(self, seq: int) -> None:
        """Spurious: the NAKed PSN was never dropped in the network, only overtaken (a later PSN
        reached the responder first); its original was still on its way or had just arrived."""
        truth, psn = self.qp.truth, (self.qp.sq_psn + seq) & ib.PSN_MASK
        lost = any(d.where != "mirror" and d.dest_qp == self.qp.peer_qpn and d.psn == psn
                   for d in truth.drops)
        self._go_back = {"qpn": self.qp.qpn, "psn": psn, "ts_ns": BASE_TS_NS + self.qp.sim.now // 1000,
                         "spurious": not lost, "resent": 0}
        truth.seq_naks.append(self._go_back)
        if not lost:
            truth.count("naks_seq_spurious")

    def _rnr_nak(self, seq: int, timer_code: int) -> None:
        """RNR NAK: wait the RNR timer, then resend from `seq` (9.7.5.2.8), at most `rnr_retry`
        times in a row (7: for ever); the next RNR NAK ends the QP. The count restarts when an
        ACK moves snd_una (as rxe's reset_retry_counters on each completed WQE)."""
        if seq < self.snd_una:
            return
        self.qp.truth.count("naks_rnr_received")
        self._advance(seq)
        self.rnr_naks += 1
        if self.rnr_retry != RNR_RETRY_INFINITE and self.rnr_naks > self.rnr_retry:
            self.qp.truth.count("rnr_retry_exceeded")
            return self._to_error("IBV_WC_RNR_RETRY_EXC_ERR", seq)
        self.snd_nxt = min(self.snd_nxt, seq)
        self._go_back = None          # what goes out again now is the RNR NAK's doing
        self.hold_until = self.qp.sim.now + ib.RNR_TIMER_US[timer_code] * 1_000_000
        self.qp.host.port.wake_at(self.hold_until)

    def _fatal_nak(self, code: int, seq: int) -> None:
        """Invalid request / remote access / remote operational error at `seq`: the requests
        before it completed (a NAK acknowledges what precedes its PSN, as rxe completes those
        WQEs first), the QP goes to Error."""
        self.qp.truth.count("naks_other_received")
        self._advance(seq)
        self._to_error(FATAL_NAK_STATUS.get(code, "IBV_WC_REM_OP_ERR"), seq)

    def _to_error(self, status: str, seq: int) -> None:
        """QP to Error: nothing more is sent, the timer stops; the WR at `seq` completes with
        `status` (the rest are flushed, which the wire never shows)."""
        self.error = True
        self.timer_gen += 1
        self.qp.truth.qp_errors.append({
            "qpn": self.qp.qpn, "status": status, "psn": (self.qp.sq_psn + seq) & ib.PSN_MASK,
            "ts_ns": BASE_TS_NS + self.qp.sim.now // 1000})

    def _advance(self, new_una: int) -> None:
        if new_una <= self.snd_una:
            return
        self.snd_una = min(new_una, self.sent_hi)
        self.snd_nxt = max(self.snd_nxt, self.snd_una)
        self.retries = self.rnr_naks = 0
        while self.done < len(self.wrs) and self.wrs[self.done].end <= self.snd_una:
            self.done += 1
            self.wrs[self.done - 1].completed_by = self._response
            self.on_complete(self.wrs[self.done - 1])
        self._restart_timer()
        self.qp.host.port.kick()

    # ---- Local ACK Timeout (9.7.6.1.3) ---------------------------------------------------------
    def _arm_timer(self) -> None:
        if not self.timer_armed:
            self._restart_timer(force=True)

    def _restart_timer(self, force: bool = False) -> None:
        self.timer_gen += 1
        self.timer_armed = force or self.snd_una < self.sent_hi
        if self.timer_armed:
            self.qp.sim.after(self.timeout_ps, self._timeout, self.timer_gen)

    def _timeout(self, gen: int) -> None:
        if gen != self.timer_gen or self.error:
            return
        self.timer_armed = False
        if self.snd_una >= self.sent_hi:
            return
        self.retries += 1
        self.qp.truth.count("ack_timeouts")
        if self.retries > self.retry_cnt:   # retry exceeded (local_ack_timeout_err)
            return self._to_error("IBV_WC_RETRY_EXC_ERR", self.snd_una)
        self.snd_nxt = self.snd_una
        self._go_back = None          # the timer's resends, not a NAK's
        wr = self.wrs[self.done]
        if wr.op == "READ":           # the READ is re-issued from its first missing response
            self._reread_at = None
            self._reread(self.snd_una, "timeout", None, None)
        self.qp.host.port.kick()
