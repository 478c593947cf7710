"""RC responder (IBTA 9.7.5): expected PSN, ACK coalescing, NAKs, RNR, READ responses.

In sequence: accept, advance the expected PSN (ePSN), count the message (MSN) and, for a
packet with AckReq, schedule one coalesced ACK `ack_delay` later covering everything that
arrived meanwhile. Ahead of ePSN: one NAK PSN sequence error, then silence until ePSN
arrives (9.7.5.1.3). Behind ePSN: a duplicate; re-ACK it or replay the READ (9.7.5.1.2).
A SEND with no receive WQE posted gets an RNR NAK (9.7.5.2.8); a WRITE to an unknown R_Key
a NAK remote access error, after which the QP is in the Error state (9.7.5.2.3).
"""
from __future__ import annotations

from roceview.generate import ibta as ib


class Responder:
    def __init__(self, qp, ack_delay_ps: int, rnr_timer_code: int = 12):
        self.qp = qp
        self.ack_delay_ps = ack_delay_ps
        self.rnr_timer_code = rnr_timer_code
        self.epsn = 0                 # unwrapped expected PSN
        self.msn = 0
        self.nak_state = None         # None | "seq" | "rnr"
        self.credits = None           # posted receive WQEs; None = always enough
        self.invalid_rkeys: set[int] = set()
        self.ack_pending = False
        self.error = False
        self.atomic_results: dict[int, int] = {}   # seq -> original data, replayed to a duplicate
        # id(request packet) -> the response that answered it (the operations' truth, ops_truth.py)
        self.answered_by: dict[int, object] = {}
        self._unanswered: list = []                # requests the next coalesced ACK answers
        self.memory = 0                            # the 8 bytes the atomics work on

    def on_request(self, pkt) -> None:
        if self.error:
            return
        self._request = pkt
        seq = self.qp.unwrap_rq(pkt.psn, self.epsn)
        if seq == self.epsn:
            self._in_sequence(pkt)
        elif seq > self.epsn:
            self._out_of_sequence()
        else:
            self._duplicate(pkt, seq)

    def _in_sequence(self, pkt) -> None:
        op = pkt.opcode
        if op in ib.SEND_START_OPCODES and self.credits is not None:
            if self.credits == 0:
                return self._rnr_nak()
            self.credits -= 1
        if pkt.reth and op != ib.RDMA_READ_REQUEST and pkt.reth[1] in self.invalid_rkeys:
            return self._fatal_nak(ib.NAK_REMOTE_ACCESS_ERROR)
        self.nak_state = None
        if op == ib.RDMA_READ_REQUEST:
            self._read_responses(pkt, self.epsn)
            self.epsn += self.qp.span(pkt.reth[2])
            self.msn += 1
            return
        if op in (ib.CMP_SWAP, ib.FETCH_ADD):
            self._atomic(pkt, self.epsn)
            self.epsn += 1
            return
        self.epsn += 1
        if op in ib.MESSAGE_END_OPCODES:
            self.msn += 1
        if pkt.ackreq:
            self._schedule_ack()

    def _out_of_sequence(self) -> None:
        if self.nak_state is not None:
            return                     # one NAK per error; wait for ePSN (9.7.5.1.3)
        self.nak_state = "seq"
        self.qp.truth.count("naks_seq_sent")
        self._send_aeth(ib.AETH_NAK | ib.NAK_PSN_SEQUENCE_ERROR, self.epsn)

    def _duplicate(self, pkt, seq: int) -> None:
        self.qp.truth.count("duplicates_received")
        if pkt.opcode == ib.RDMA_READ_REQUEST:
            self._read_responses(pkt, seq)
        elif seq in self.atomic_results:     # an atomic is not executed twice: its result again (9.7.5.2.6)
            self._atomic_ack(seq, self.atomic_results[seq])
        else:
            self._schedule_ack()

    def _atomic(self, pkt, seq: int) -> None:
        """CmpSwap / FetchAdd (9.4.5): execute once, answer with an ATOMIC ACKNOWLEDGE carrying
        the original data (AtomicAckETH), at the request's PSN."""
        va, rkey, swap_add, compare = pkt.atomic
        original = self.memory
        if pkt.opcode == ib.FETCH_ADD:
            self.memory = (self.memory + swap_add) & (1 << 64) - 1
        elif self.memory == compare:
            self.memory = swap_add
        self.msn += 1
        self.atomic_results[seq] = original
        self._atomic_ack(seq, original)

    def _atomic_ack(self, seq: int, original: int) -> None:
        self.qp.truth.count("atomic_acks_sent")
        pkt = self.qp.packet(ib.ATOMIC_ACKNOWLEDGE, seq, aeth=(ib.AETH_ACK_NO_CREDIT, self.msn),
                             atomic_ack=original, peer_space=True)
        self.answered_by[id(self._request)] = pkt
        self.qp.send_response(pkt)

    def _rnr_nak(self) -> None:
        self.qp.truth.count("naks_rnr_sent")
        self.nak_state = "rnr"
        self._send_aeth(ib.AETH_RNR_NAK | self.rnr_timer_code, self.epsn)

    def _fatal_nak(self, code: int) -> None:
        self.qp.truth.count("naks_other_sent")
        self._send_aeth(ib.AETH_NAK | code, self.epsn)
        self.error = True

    # ---- output ------------------------------------------------------------------------------
    def _schedule_ack(self) -> None:
        self._unanswered.append(self._request)
        if not self.ack_pending:
            self.ack_pending = True
            self.qp.sim.after(self.ack_delay_ps, self._emit_ack)

    def _emit_ack(self) -> None:
        self.ack_pending = False
        if not self.error:
            self.qp.truth.count("acks_sent")
            ack = self._send_aeth(ib.AETH_ACK_NO_CREDIT, self.epsn - 1)
            for request in self._unanswered:
                self.answered_by[id(request)] = ack
        self._unanswered = []

    def _send_aeth(self, syndrome: int, seq: int):
        pkt = self.qp.packet(ib.ACKNOWLEDGE, seq, aeth=(syndrome, self.msn), peer_space=True)
        self.qp.send_response(pkt)
        return pkt

    def _read_responses(self, pkt, seq: int) -> None:
        """RDMA READ response FIRST/MIDDLE/LAST or ONLY; AETH on all but MIDDLE (9.3.5)."""
        length = pkt.reth[2]
        n = self.qp.span(length)
        first, middle, last, only = ib.READ_RESPONSE_OPCODES
        for i in range(n):
            op = only if n == 1 else first if i == 0 else last if i == n - 1 else middle
            size = self.qp.mtu if i < n - 1 else length - (n - 1) * self.qp.mtu
            aeth = (ib.AETH_ACK_NO_CREDIT, self.msn + 1) if op != middle else None
            response = self.qp.packet(op, seq + i, aeth=aeth, payload_len=size, peer_space=True)
            self.qp.send_response(response)
        self.answered_by[id(pkt)] = response           # its last response completes the READ
        self.qp.truth.count("read_response_packets", n)

    # ---- receive queue (for RNR) ---------------------------------------------------------------
    def post_receives(self, n: int) -> None:
        if self.credits is not None:
            self.credits += n
