"""Hand-built captures for the diagnoser's boundary cases. Frames come from the generator's own
wire helpers (real ICRCs); every capture is the smallest that shows the rule."""
from __future__ import annotations

import re
import struct

import pytest

from helpers.diagnose import SEVERE, findings_of, kinds, show
from roceview.capture.writer import write_pcapng
from roceview.diagnose import load_config
from roceview.generate import ibta as ib
from roceview.generate.frames import Addressing, PfcFrame, RocePacket, pfc_frame, roce_frame

T0 = 1_700_000_000_000_000_000
HOST_MACS = (bytes.fromhex("0ec0de000010"), bytes.fromhex("0ec0de000011"), bytes.fromhex("0ec0de000012"))
SWITCH_MAC = bytes.fromhex("0e5c0000ff10")
ADDR = Addressing(macs=HOST_MACS, ips=(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), bytes([10, 0, 0, 3])))
A, B = 0, 1
QP_B, QP_A = 0x0000D2, 0x0000C1          # dest QP of A->B, of B->A
SYN_ACK, SYN_NAK_SEQ = 0x1F, 0x60


class Cap:
    """Frames in time order; `write` makes a pcapng."""

    def __init__(self):
        self.frames: list[bytes] = []
        self.ts: list[int] = []
        self.t = T0

    def at(self, dt_ns: int) -> "Cap":
        self.t += dt_ns
        return self

    def roce(self, src, dst, opcode, psn, payload=0, ecn=2, pcp=3, dscp=26, tagged=True, **kw) -> "Cap":
        qp = QP_B if dst == B else QP_A
        p = RocePacket(src=src, dst=dst, sport=49152, pcp=pcp, dscp=dscp, ecn=ecn, opcode=opcode, dest_qp=qp,
                       psn=psn & 0xFFFFFF, payload_len=payload, **kw)
        frame = roce_frame(p, ADDR, bytes(payload))
        self._add(frame if tagged else frame[:12] + frame[16:])
        return self

    def req(self, psn, opcode=ib.RDMA_WRITE_ONLY, payload=1024, **kw) -> "Cap":
        reth = (0x1000, 0x1234, payload) if opcode in (ib.RDMA_WRITE_ONLY, ib.RDMA_WRITE_FIRST) else None
        return self.roce(A, B, opcode, psn, payload, reth=reth, ackreq=True, **kw)

    def ack(self, psn, syndrome=SYN_ACK, **kw) -> "Cap":
        return self.roce(B, A, ib.ACKNOWLEDGE, psn, aeth=(syndrome, 1), **kw)

    def cnp(self, src=B, dst=A, **kw) -> "Cap":
        return self.roce(src, dst, ib.CNP, 0, becn=True, **kw)

    def pfc(self, quanta3=0xFFFF, enable=0x08, mac=SWITCH_MAC, slot0=0) -> "Cap":
        q = [slot0, 0, 0, quanta3, 0, 0, 0, 0]
        self._add(pfc_frame(PfcFrame(mac, enable, tuple(q))))
        return self

    def pause(self, quanta, mac=SWITCH_MAC) -> "Cap":
        frame = bytes.fromhex("0180c2000001") + mac + struct.pack("!HHH", 0x8808, 0x0001, quanta)
        self._add(frame + bytes(60 - len(frame)))
        return self

    def _add(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.ts.append(self.t)
        self.t += 100

    def findings(self, tmp_path, config=None, **kw):
        path = tmp_path / "cap.pcapng"
        write_pcapng(path, self.frames, self.ts)
        return findings_of(path, config, **kw)


def _one(findings, kind):
    found = [f for f in findings if f["kind"] == kind]
    assert len(found) == 1, show(findings)
    return found[0]


# ---- loss: where the mirror sits -----------------------------------------------------------
def test_mirror_before_the_loss_point_sees_nak_then_go_back_n_without_a_gap(tmp_path):
    c = Cap()
    for psn in range(100, 110):
        c.req(psn)
    c.at(2000).ack(103, SYN_NAK_SEQ).at(1000)   # 103 was lost after the mirror
    for psn in range(103, 110):
        c.req(psn)
    c.at(2000).ack(109)
    found = c.findings(tmp_path)
    loss = _one(found, "network_loss")
    assert "capture_loss" not in kinds(found)
    assert "without a gap" in loss["evidence"] and "7 packets resent (the QP table's retx), 7 of them by go-back-N after the NAKs" in loss["evidence"]
    assert "NAK-to-retransmission delay median 1.100 us" in loss["evidence"]
    assert loss["severity"] == "warning"


def test_mirror_after_the_loss_point_sees_gap_then_nak_then_retransmission(tmp_path):
    c = Cap()
    for psn in (100, 101, 102, 104, 105):
        c.req(psn)
    c.at(1000).ack(103, SYN_NAK_SEQ).at(1000)
    for psn in (103, 104, 105):
        c.req(psn)
    c.at(2000).ack(105)
    found = c.findings(tmp_path)
    loss = _one(found, "network_loss")
    assert "capture_loss" not in kinds(found)
    assert "1 gap of 1 PSN seen before" in loss["evidence"]
    assert "NAK generation delay median 1.200 us" in loss["evidence"]  # gap at 104, NAK 1.2 us later


def test_nak_never_answered_by_a_retransmission_is_critical(tmp_path):
    c = Cap()
    for psn in range(100, 106):
        c.req(psn)
    c.at(1000).ack(103, SYN_NAK_SEQ)
    loss = _one(c.findings(tmp_path), "network_loss")
    assert loss["severity"] == "critical" and "never retransmitted after the NAK: PSN 103" in loss["evidence"]


def test_request_gap_nobody_noticed_is_capture_loss_not_network_loss(tmp_path):
    c = Cap()
    for psn in (100, 101, 104, 105):            # 102, 103 missing from the capture only
        c.req(psn)
    c.at(2000).ack(105)                          # the receiver acknowledges past the gap
    found = c.findings(tmp_path)
    cap = _one(found, "capture_loss")
    assert "network_loss" not in kinds(found)
    assert "2 packets in 1 gap" in cap["summary"]


# ---- capture drops of a READ response and of an ACK -------------------------------------
def _read(c, psn, span, drop=()):
    c.req(psn, ib.RDMA_READ_REQUEST, payload=0, reth=None)
    c.at(1000)
    ops = [ib.RDMA_READ_RESPONSE_FIRST] + [ib.RDMA_READ_RESPONSE_MIDDLE] * (span - 2) + [ib.RDMA_READ_RESPONSE_LAST]
    if span == 1:
        ops = [ib.RDMA_READ_RESPONSE_ONLY]
    for i, op in enumerate(ops):
        aeth = None if op == ib.RDMA_READ_RESPONSE_MIDDLE else (SYN_ACK, 1)
        if i not in drop:
            c.roce(B, A, op, psn + i, 1024, aeth=aeth)
        else:
            c.at(100)


def test_capture_drop_of_a_read_response_is_capture_loss(tmp_path):
    c = Cap()
    c.roce(A, B, ib.RDMA_READ_REQUEST, 200, 0, reth=(0x1000, 0x1234, 4096), ackreq=True)
    c.at(1000)
    c.roce(B, A, ib.RDMA_READ_RESPONSE_FIRST, 200, 1024, aeth=(SYN_ACK, 1))
    c.at(100)                                    # MIDDLE 201 missing from the capture
    c.roce(B, A, ib.RDMA_READ_RESPONSE_MIDDLE, 202, 1024)
    c.roce(B, A, ib.RDMA_READ_RESPONSE_LAST, 203, 1024, aeth=(SYN_ACK, 1))
    c.at(1000).req(204).at(1000).ack(204)        # the requester moves on: it had the response
    found = c.findings(tmp_path)
    cap = _one(found, "capture_loss")
    assert "network_loss" not in kinds(found) and "10.0.0.2>10.0.0.1" in cap["flows"]


def test_read_after_writes_skips_response_psns_without_any_finding(tmp_path):
    c = Cap()
    c.req(300, ib.RDMA_WRITE_ONLY).req(301).req(302)   # acknowledged implicitly by the READ response
    c.roce(A, B, ib.RDMA_READ_REQUEST, 303, 0, reth=(0x1000, 0x1234, 1024), ackreq=True)
    c.at(1000).roce(B, A, ib.RDMA_READ_RESPONSE_ONLY, 303, 1024, aeth=(SYN_ACK, 1))
    c.at(1000).req(304).at(1000).ack(304)
    found = c.findings(tmp_path)
    assert not kinds(found, SEVERE), show(found)


def test_capture_drop_of_an_ack_is_not_a_loss(tmp_path):
    c = Cap()
    for psn in range(100, 110):
        c.req(psn).at(500)
        if psn != 104:                           # the ACK of 104 is missing from the capture
            c.ack(psn)
        c.at(500)
    found = c.findings(tmp_path)
    assert not kinds(found) & {"network_loss", "capture_loss", "timeout_retransmit"}, show(found)
    assert not kinds(found, SEVERE)


# ---- PFC / PAUSE -------------------------------------------------------------------------
def test_quanta_zero_resumes_at_once(tmp_path):
    c = Cap().pfc(0xFFFF).at(10_000 - 100).pfc(0)
    c.at(1_000_000).pfc(0)                       # a later resume: capture lasts > 1 ms
    pause = _one(c.findings(tmp_path), "pfc_pause")
    assert "10.000 us in total" in pause["summary"] and pause["severity"] == "info"


def test_quanta_in_a_disabled_class_slot_are_ignored(tmp_path):
    c = Cap().pfc(quanta3=0, enable=0x08, slot0=0xFFFF).at(1_000_000).pfc(0)
    found = c.findings(tmp_path)
    assert "pfc_pause" not in kinds(found), show(found)


def test_8023x_pause_counts_as_all_priorities(tmp_path):
    c = Cap().pause(0xFFFF).at(1_000_000).pause(0)
    pause = _one(c.findings(tmp_path), "pfc_pause")
    assert "802.3x PAUSE" in pause["summary"] and "335.539 us" in pause["summary"]


def _xoff_train(gap_ns: int, total_ns: int = 150_000_000) -> Cap:
    c = Cap()
    for _ in range(total_ns // gap_ns):
        c.pfc(0xFFFF).at(gap_ns - 100)             # 65535 quanta = 335.52 us at 100 Gb/s
    c.pfc(0)
    return c


def test_pause_refreshed_before_expiry_for_150_ms_is_a_storm(tmp_path):
    storm = _one(_xoff_train(300_000).findings(tmp_path), "pfc_storm")
    assert storm["severity"] == "critical" and re.search(r"for 150\.0\d\d ms", storm["summary"])


def test_pause_that_lapses_between_refreshes_is_no_storm(tmp_path):
    found = _xoff_train(400_000).findings(tmp_path)
    assert "pfc_storm" not in kinds(found), show(found)
    assert _one(found, "pfc_pause")["severity"] == "info"   # 84 % paused, but no RoCE on priority 3


def test_storm_threshold_comes_from_the_config(tmp_path):
    path = tmp_path / "storm.toml"
    path.write_text("[diagnose]\nstorm_ms = 200.0\nstorm_window_ms = 200.0\n")
    found = _xoff_train(300_000).findings(tmp_path, load_config(path))
    assert "pfc_storm" not in kinds(found)


def test_pauses_from_a_switch_without_marks_are_pfc_without_ecn(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(psn)
    c.pfc(0xFFFF, mac=SWITCH_MAC).at(3000).pfc(0, mac=SWITCH_MAC)
    c.ack(9)
    found = c.findings(tmp_path)
    assert "pfc_without_ecn" in kinds(found) and "slow_receiver" not in kinds(found), show(found)


def test_pauses_from_the_receiving_host_are_a_slow_receiver(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(psn)
    c.pfc(0xFFFF, mac=HOST_MACS[B]).at(3000).pfc(0, mac=HOST_MACS[B])
    c.ack(9)
    found = c.findings(tmp_path)
    assert "slow_receiver" in kinds(found) and "pfc_without_ecn" not in kinds(found), show(found)


def test_cnps_prove_marking_works_at_a_sender_side_mirror(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(psn)
    c.pfc(0xFFFF, mac=SWITCH_MAC).at(3000).pfc(0, mac=SWITCH_MAC).cnp().ack(9)
    found = c.findings(tmp_path)
    assert "pfc_without_ecn" not in kinds(found) and "ecn_congestion" in kinds(found), show(found)


# ---- ECN ---------------------------------------------------------------------------------
def _marked(c: Cap):
    for psn in range(20):
        c.req(psn, ecn=3 if psn % 4 == 0 else 2)
    return c


def test_ce_without_cnp_is_cnp_missing(tmp_path):
    c = _marked(Cap()).at(50_000).ack(19)
    found = c.findings(tmp_path)
    miss = _one(found, "cnp_missing")
    assert "5 CE-marked packets" in miss["summary"] and "np_cnp_sent" in miss["advice"]


def test_ce_answered_by_cnps_is_ecn_congestion_only(tmp_path):
    c = _marked(Cap()).cnp().at(50_000).ack(19)
    found = c.findings(tmp_path)
    assert "cnp_missing" not in kinds(found)
    assert "25.0%" in _one(found, "ecn_congestion")["summary"]


def test_not_ect_data_is_ecn_not_enabled(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(psn, ecn=0)
    c.ack(9, ecn=0)
    assert "10 of 10 data packets" in _one(c.findings(tmp_path), "ecn_not_enabled")["evidence"]


# ---- priorities: PCP vs DSCP -------------------------------------------------------------
@pytest.mark.parametrize("tagged,pcp,dscp,trust,mismatch", [
    (True, 3, 0, "auto", False),     # tagged: the PCP decides
    (True, 0, 26, "auto", True),
    (True, 0, 26, "dscp", False),    # a switch trusting DSCP maps 26 -> 3
    (False, 0, 26, "auto", False),   # untagged: the DSCP decides
    (False, 0, 0, "auto", True),
])
def test_priority_comes_from_pcp_when_tagged_else_dscp(tmp_path, tagged, pcp, dscp, trust, mismatch):
    c = Cap()
    for psn in range(5):
        c.req(psn, pcp=pcp, dscp=dscp, tagged=tagged)
    c.ack(4).pfc(0xFFFF).at(2000).pfc(0)
    found = c.findings(tmp_path, load_config(trust=trust, pfc_priorities=[3]))
    assert ("priority_mismatch" in kinds(found)) == mismatch, show(found)
    # the PFC frames alone say priority 3 was paused, not that only 3 has PFC: no mismatch
    assert "priority_mismatch" not in kinds(c.findings(tmp_path, load_config(trust=trust))), show(found)


def test_mismatch_advice_keeps_pfc_on_every_priority_seen_paused(tmp_path):
    c = Cap()
    for psn in range(5):
        c.req(psn, pcp=0, dscp=0, tagged=True)
    c.ack(4).pfc(0xFFFF).at(2000).pfc(0)
    found = c.findings(tmp_path, load_config(pfc_priorities=[5]))
    (pm,) = [f for f in found if f["kind"] == "priority_mismatch" and "on priority 0" in f["summary"]]
    assert "--pfc 0,0,0,1,0,1,0,0" in pm["advice"] and "prio-pfc 3:on 5:on" in pm["advice"]


def test_cnps_on_an_unprotected_priority_are_info(tmp_path):
    c = Cap()
    for psn in range(5):
        c.req(psn)
    c.cnp(pcp=6, dscp=48).ack(4).pfc(0xFFFF).at(2000).pfc(0)
    found = c.findings(tmp_path, load_config(pfc_priorities=[3]))
    (pm,) = [f for f in found if f["kind"] == "priority_mismatch"]
    assert pm["severity"] == "info" and "CNP" in pm["summary"] and "priority 6" in pm["summary"]


def test_clean_hand_built_exchange_has_no_warning(tmp_path):
    c = Cap()
    for psn in range(50):
        c.req(psn).at(200).ack(psn)
    assert not c.findings(tmp_path)


# ---- RNR: retried, or given up ---------------------------------------------------------------
SYN_RNR_0_04_MS = 0x20 | 4          # RNR NAK, timer code 4 = 0.04 ms (IBTA Table 45)


def _rnr_naks(c: Cap, naks: int, resend_last: bool) -> Cap:
    c.req(0)
    for _ in range(naks):
        c.at(1000).ack(0, syndrome=SYN_RNR_0_04_MS).at(40_000).req(0)
    if resend_last:
        c.at(1000).ack(0)
    return c


def test_rnr_naks_with_the_retries_seen_are_a_warning(tmp_path):
    c = _rnr_naks(Cap(), 3, resend_last=True)
    rnr = _one(c.findings(tmp_path), "rnr")
    assert rnr["severity"] == "warning" and "gave up" not in rnr["summary"]


def test_rnr_naks_then_silence_past_the_timer_while_the_capture_goes_on_is_critical(tmp_path):
    c = _rnr_naks(Cap(), 4, resend_last=False)
    c.frames.pop(), c.ts.pop()                        # the requester never resent after the 4th NAK
    c.at(12_000_000).pfc(0)                           # the capture goes on 12 ms (300 RNR timers)
    rnr = _one(c.findings(tmp_path), "rnr")
    assert rnr["severity"] == "critical", rnr["summary"]
    assert "gave up after 4 RNR NAKs on PSN 0" in rnr["summary"] and "IBV_WC_RNR_RETRY_EXC_ERR" in rnr["summary"]


def test_rnr_naks_at_the_end_of_the_capture_are_not_called_given_up(tmp_path):
    c = _rnr_naks(Cap(), 4, resend_last=False)
    c.frames.pop(), c.ts.pop()                        # the capture ends right after the last NAK
    assert _one(c.findings(tmp_path), "rnr")["severity"] == "warning"


# ---- reordering: the late original, the spurious NAK ---------------------------------------
def _in_order(c: Cap, upto: int) -> Cap:
    for psn in range(upto):
        c.req(psn)
    return c.at(1000).ack(upto - 1)


def test_a_psn_overtaken_by_the_next_then_arriving_is_reordering_not_loss(tmp_path):
    c = _in_order(Cap(), 5).at(2000).req(6).at(60).req(5).req(7).at(1000).ack(7)
    found = c.findings(tmp_path)
    assert not {"network_loss", "timeout_retransmit", "capture_loss"} & kinds(found), show(found)
    r = _one(found, "reordering")
    assert r["severity"] == "info" and "1 packet arrived out of order" in r["summary"] and "60 ns" in r["summary"]


def test_the_nak_an_overtaking_psn_caused_is_spurious_and_its_go_back_n_no_loss(tmp_path):
    # the responder NAKs 5 when 6 lands first; 5 itself lands 60 ns later; the requester then
    # goes back to 5 and resends 5 and 6, which the responder acknowledges
    c = _in_order(Cap(), 5).at(2000).req(6).at(60).req(5).at(1000).ack(5, syndrome=SYN_NAK_SEQ)
    c.at(3000).req(5).req(6).at(1000).ack(6)
    found = c.findings(tmp_path)
    assert "network_loss" not in kinds(found) and "timeout_retransmit" not in kinds(found), show(found)
    r = _one(found, "reordering")
    assert r["severity"] == "warning" and "1 spurious NAK made the requester resend 2 packets" in r["summary"], r


def test_a_resend_after_a_nak_the_capture_missed_is_still_loss(tmp_path):
    # 5 lost: 6 reveals the gap, the NAK is not captured, go-back-N resends 5 and 6
    c = _in_order(Cap(), 5).at(2000).req(6).at(3000).req(5).req(6).at(1000).ack(6)
    found = c.findings(tmp_path)
    assert "reordering" not in kinds(found) and "network_loss" in kinds(found), show(found)


def test_a_resend_an_ack_timeout_explains_is_not_reordering(tmp_path):
    c = _in_order(Cap(), 5).at(2000).req(6).at(200_000).req(5).at(1000).ack(6)
    found = c.findings(tmp_path)
    assert "reordering" not in kinds(found), show(found)


def test_rnr_silence_shorter_than_a_soft_roce_wait_is_not_called_given_up(tmp_path):
    c = _rnr_naks(Cap(), 4, resend_last=False)
    c.frames.pop(), c.ts.pop()
    c.at(3_000_000).pfc(0)            # 3 ms: rxe rounds the RNR timer up to jiffies (4 ms at HZ=250)
    assert _one(c.findings(tmp_path), "rnr")["severity"] == "warning"


def test_a_resend_long_after_the_rnr_timer_keeps_rnr_a_warning(tmp_path):
    c = Cap().req(0).at(1000).ack(0, syndrome=SYN_RNR_0_04_MS).at(15_000_000).req(0).at(1000).ack(0)
    c.at(1_000_000).pfc(0)            # the resend came 375 timers later; the capture went on
    rnr = _one(c.findings(tmp_path), "rnr")
    assert rnr["severity"] == "warning" and "gave up" not in rnr["summary"]


def test_an_rnr_episode_long_over_does_not_excuse_a_later_loss(tmp_path):
    c = Cap().req(10).at(1000).ack(10, syndrome=SYN_RNR_0_04_MS).at(40_000).req(10).at(1000).ack(10)
    c.at(1_000_000)
    for psn in [*range(11, 25), 26, 27, 28, 29]:     # 25 lost in the network, the mirror after the loss
        c.req(psn)
    c.at(3000)                                       # the NAK of 25 not captured
    for psn in range(25, 30):
        c.req(psn)                                   # go-back-N from 25
    found = c.at(2000).ack(29).findings(tmp_path)
    assert "network_loss" in kinds(found) and "capture_loss" not in kinds(found), show(found)


def test_loss_beside_reordering_quotes_only_its_own_resends(tmp_path):
    c = _in_order(Cap(), 5).at(2000).req(6).at(60).req(5).at(1000).ack(5, syndrome=SYN_NAK_SEQ)
    c.at(3000).req(5).req(6).at(1000).ack(6)          # the spurious NAK's go-back-N
    for psn in (7, 8, 9, 11):                          # 10 lost in the network
        c.req(psn)
    c.at(900).ack(10, syndrome=SYN_NAK_SEQ).at(1500).req(10).req(11).at(1000).ack(11)
    found = c.findings(tmp_path)
    loss = _one(found, "network_loss")
    assert "1 NAK, 2 packets resent" in loss["summary"], loss["summary"]
    assert "the QP table's retx, 5, less 3 that reordering explains" in loss["evidence"]
    assert "1 spurious NAK made the requester resend 2 packets" in _one(found, "reordering")["summary"]
