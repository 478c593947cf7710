"""Scenarios an analyzer must tell apart from the faults they resemble: PFC pauses on a priority
that carries no RoCE (pfc-other-priority), a requester that spends its RNR retries and gives up
(rnr-exhausted), DCQCN doing its job on a staggered six-to-one load (healthy-dcqcn); and the
LLDP DCBX frame that says which priorities have PFC enabled (priority-mismatch). Each test holds
the capture (decoded by tshark, or read byte by byte) and the model's ground truth to what the
scenario says."""
from __future__ import annotations

import struct
import subprocess
from collections import Counter

import numpy as np
import pytest

from roceview.generate import generate, write_capture
from roceview.generate import ibta as ib
from test_scenarios_make_their_faults import is_request, needs_tshark, roce, sample, ts_ns

pytestmark = pytest.mark.tshark
RNR_RETRY = 3                                    # rnr-exhausted's QP attribute
RNR_TIMER_NS = ib.RNR_TIMER_US[4] * 1000         # its responder's min RNR timer: 0.04 ms
WIRE_OVERHEAD = 24                               # FCS + preamble + inter-frame gap


# ---- pfc-other-priority ----------------------------------------------------------------------
def _pfc_slots(frames: list[bytes]) -> list[tuple]:
    """The eight pause times of each 802.1Qbb frame (untagged, opcode 0x0101)."""
    return [struct.unpack("!8H", f[18:34]) for f in frames if f[12:16] == b"\x88\x08\x01\x01"]


@needs_tshark
def test_other_priority_pfc_frames_pause_only_priority_5_and_roce_rides_priority_3(tmp_path_factory):
    cap, _, rows = sample(tmp_path_factory, "pfc-other-priority")
    pfc = [r for r in rows if r["macc"] == 0x0101]
    assert len(pfc) == 12 and {r["enbv"] for r in pfc} == {1 << 5}
    slots = _pfc_slots(cap.frame_list())
    assert {s[:5] + s[6:] for s in slots} == {(0,) * 7}              # no time for another class
    assert sorted(s[5] for s in slots) == [0] * 4 + [0xFFFF] * 8     # 8 XOFF (with refreshes), 4 XON
    t = cap.truth
    assert t.counters["pfc_xoff_sent_prio5"] == t.counters["pfc_xoff_sent"] == 8
    assert t.counters["pfc_xon_sent_prio5"] == t.counters["pfc_xon_sent"] == 4
    assert t.pause_sources == {"0e:5c:00:00:ff:10": "switch"} == {r["src_mac"]: "switch" for r in pfc}
    data = roce(rows)
    assert {(r["pcp"], r["dscp"]) for r in data} == {(3, 26)}
    assert ts_ns(data[0]) < ts_ns(pfc[0]) and ts_ns(pfc[-1]) < ts_ns(data[-1])   # paused mid-traffic


@pytest.mark.parametrize("seed", range(3))
def test_other_priority_pauses_leave_the_roce_traffic_untouched(seed):
    t = generate("pfc-other-priority", seed=seed).truth
    assert not t.drops and not t.qp_errors
    for k in ("retransmitted_packets", "naks_seq_sent", "naks_rnr_sent", "ack_timeouts", "ce_marked",
              "cnps_sent", "pfc_xoff_sent_prio3"):
        assert t.counters[k] == 0, k
    assert t.counters["pfc_xoff_sent_prio5"] > 0


# ---- rnr-exhausted ---------------------------------------------------------------------------
def _rnr_naks(rows, requester_qpn: int) -> list[dict]:
    return [r for r in roce(rows) if r["qp"] == requester_qpn and r["syndrome"] is not None
            and r["syndrome"] >> 5 == 1]


@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_rnr_exhausted_requester_stops_after_rnr_retry_plus_one_rnr_naks_on_one_psn(tmp_path_factory, seed):
    cap, _, rows = sample(tmp_path_factory, "rnr-exhausted", seed)
    t = cap.truth
    (err,) = t.qp_errors
    q = next(q for q in t.qps if q["requester_qpn"] == err["qpn"])
    rnr = _rnr_naks(rows, q["requester_qpn"])
    last = rnr[-1]
    on_last = [r for r in rnr if r["psn"] == last["psn"]]
    assert len(on_last) == RNR_RETRY + 1 and err["psn"] == last["psn"]
    assert max(Counter(r["psn"] for r in rnr).values()) == RNR_RETRY + 1   # the others recovered sooner
    assert err["status"] == "IBV_WC_RNR_RETRY_EXC_ERR" and t.counters["rnr_retry_exceeded"] == 1
    assert len(rnr) == t.counters["naks_rnr_sent"]
    sends = [r for r in roce(rows) if r["qp"] == q["responder_qpn"] and is_request(r["opcode"])]
    for nak in on_last[:-1]:       # each RNR NAK but the last is answered after the RNR timer
        resend = next(r for r in sends if r["psn"] == nak["psn"] and ts_ns(r) > ts_ns(nak))
        assert ts_ns(resend) - ts_ns(nak) >= RNR_TIMER_NS


@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_rnr_exhausted_qp_is_silent_while_the_capture_goes_on(tmp_path_factory, seed):
    cap, _, rows = sample(tmp_path_factory, "rnr-exhausted", seed)
    (err,) = cap.truth.qp_errors
    q = next(q for q in cap.truth.qps if q["requester_qpn"] == err["qpn"])
    last = _rnr_naks(rows, q["requester_qpn"])[-1]
    pair = {q["requester_qpn"], q["responder_qpn"]}
    after = [r for r in roce(rows) if ts_ns(r) > ts_ns(last)]
    assert not [r for r in after if r["qp"] in pair]            # nothing either way on that QP pair
    assert after and ts_ns(rows[-1]) - ts_ns(last) >= 2 * RNR_TIMER_NS   # another QP writes on
    assert err["ts_ns"] >= ts_ns(last)                           # the requester gave up on receiving it


@pytest.mark.parametrize("seed", range(3))
def test_infinite_rnr_retry_never_gives_up(seed):
    t = generate("rnr", seed=seed).truth
    assert t.counters["naks_rnr_received"] > 0 and t.counters["rnr_retry_exceeded"] == 0
    assert not t.qp_errors


def test_a_fatal_nak_records_its_work_completion_status_and_psn():
    cap = generate("remote-error", seed=0)
    (err,) = cap.truth.qp_errors
    assert err["status"] == "IBV_WC_REM_ACCESS_ERR" and err["qpn"] == cap.truth.qps[0]["requester_qpn"]
    # the NAK remote access error (AETH syndrome 0x62 after the 12-byte BTH) names that PSN
    (nak,) = [f for f in cap.frame_list() if f[46] == ib.ACKNOWLEDGE and f[58] == 0x62]
    assert int.from_bytes(nak[55:58], "big") == err["psn"]


# ---- healthy-dcqcn ---------------------------------------------------------------------------
@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_healthy_dcqcn_marks_a_few_percent_and_the_receiver_answers_with_cnps(tmp_path_factory, seed):
    cap, _, rows = sample(tmp_path_factory, "healthy-dcqcn", seed)
    t = cap.truth
    data = [r for r in roce(rows) if is_request(r["opcode"])]
    ce = sum(r["ecn"] == 3 for r in data)
    assert ce == t.counters["ce_marked"] and 0.01 <= ce / len(data) <= 0.1
    cnps = [r for r in roce(rows) if r["opcode"] == ib.CNP]
    assert len(cnps) == t.counters["cnps_sent"] > 0 and all(r["bth4"] == 0x40 for r in cnps)
    assert {r["src"] for r in cnps} == {"10.0.0.7"}
    assert {r["qp"] for r in cnps} <= {q["requester_qpn"] for q in t.qps}
    assert 0 < t.counters["dcqcn_rate_cuts"] <= t.counters["cnps_received"]
    assert not [r for r in rows if r["macc"] is not None] and not t.drops     # no pause, no loss
    assert t.counters["retransmitted_packets"] == 0
    assert not [r for r in roce(rows) if r["syndrome"] is not None and r["syndrome"] >> 5]


@needs_tshark
@pytest.mark.parametrize("seed", range(3))
def test_healthy_dcqcn_senders_join_staggered_and_then_send_every_millisecond(tmp_path_factory, seed):
    _, _, rows = sample(tmp_path_factory, "healthy-dcqcn", seed)
    data = [r for r in roce(rows) if is_request(r["opcode"])]
    senders = sorted({r["src"] for r in data})
    assert len(senders) == 6
    times = {s: np.array([ts_ns(r) for r in data if r["src"] == s]) for s in senders}
    starts = np.sort([t[0] for t in times.values()])
    assert all(np.count_nonzero((starts >= s) & (starts < s + 1_000_000)) <= 3 for s in starts)
    assert (np.diff(starts) >= 2_000_000).all()              # in fact one every 2.5 ms
    for t in times.values():                                 # never idle a whole millisecond
        assert np.diff(t).max() < 1_100_000
    assert max(t[-1] for t in times.values()) - starts[0] >= 15_000_000   # tens of ms


def _sender_side(seed: int):
    """Per sender IP: its data packets' (timestamps, frame lengths) and the CNPs it was sent,
    read from the bytes of a sender-side capture of the same run (all RoCEv2, VLAN-tagged)."""
    cap = generate("healthy-dcqcn", seed=seed, mirror="sender")
    out: dict = {}
    for f, t in zip(cap.frame_list(), cap.ts_ns.tolist()):
        src, dst, opcode = f[30:34], f[34:38], f[46]
        if opcode == ib.CNP:
            out.setdefault(dst, ([], [], []))[2].append(t)
        elif opcode <= ib.RDMA_READ_REQUEST:
            out.setdefault(src, ([], [], []))[0].append(t)
            out[src][1].append(len(f))
    return cap, out


@pytest.mark.parametrize("seed", range(3))
def test_healthy_dcqcn_senders_leave_line_rate_after_a_cnp(seed):
    """Before its first CNP a sender clocks each write out at 25 Gb/s; a CNP halves its rate
    (DCQCN), which recovers halving the distance every 55 us: within 20 us of the NIC receiving
    a CNP every packet it sends is spaced at least 1.5 x its serialisation time."""
    cap, senders = _sender_side(seed)
    hop_ns = 500 + 100            # the CNP is captured leaving the switch: one link before the NIC
    paced = 0
    for sent, length, cnps in senders.values():
        t, line = np.array(sent), (np.array(length[:-1]) + WIRE_OVERHEAD) * 8 / 25.0
        gap = np.diff(t)
        burst = gap < 10 * line                              # inside one write, not between writes
        before = burst & (t[:-1] < (cnps[0] if cnps else t[-1] + 1))
        assert (np.abs(gap[before] - line[before]) <= 1).all()
        for c in cnps:
            # t[:-1] is the capture time of the packet at the far end: its departure + 500 ns
            after = burst & (t[:-1] - 500 > c + hop_ns) & (t[:-1] - 500 < c + hop_ns + 20_000)
            assert (gap[after] >= 1.5 * line[after]).all()
            paced += int(after.sum())
    assert paced > 0 and cap.truth.counters["dcqcn_rate_cuts"] > 0


# ---- priority-mismatch: LLDP DCBX ------------------------------------------------------------
LLDP_FIELDS = ["frame.number", "eth.src", "eth.dst", "lldp.chassis.id.mac", "lldp.port.id", "lldp.time_to_live",
               "lldp.dcbx.ieee.pfc.numtcs"] + [f"lldp.dcbx.feature.pfc.prio{p}" for p in range(8)]


@needs_tshark
def test_priority_mismatch_switch_ports_advertise_pfc_on_priority_3_by_lldp_first(tmp_path):
    """802.1AB LLDPDU from each mirrored switch port at the start of the capture, the 802.1Qaz
    PFC configuration TLV enabling priority 3 only; roceview's dissector reads the same bitmap."""
    from dissectors import lldp

    cap = generate("priority-mismatch", seed=0)
    write_capture(cap, tmp_path / "pm.pcap")
    cmd = ["tshark", "-r", str(tmp_path / "pm.pcap"), "-Y", "lldp", "-T", "fields", "-E", "occurrence=f"]
    out = subprocess.run(cmd + [x for f in LLDP_FIELDS for x in ("-e", f)], capture_output=True, text=True,
                         check=True).stdout
    frames = [dict(zip(LLDP_FIELDS, line.split("\t"))) for line in out.splitlines()]
    assert [f["frame.number"] for f in frames] == ["1", "2"]
    assert [(f["eth.src"], f["lldp.port.id"]) for f in frames] == [("0e:5c:00:00:ff:10", "swp1"),
                                                                   ("0e:5c:00:00:ff:11", "swp2")]
    for f in frames:
        assert (f["eth.dst"], f["lldp.chassis.id.mac"], f["lldp.time_to_live"], f["lldp.dcbx.ieee.pfc.numtcs"]) == (
            "01:80:c2:00:00:0e", "0e:5c:00:00:ff:00", "120", "8")
        assert [f[f"lldp.dcbx.feature.pfc.prio{p}"] for p in range(8)] == ["0", "0", "0", "1", "0", "0", "0", "0"]
    assert [lldp.pfc_enable(f, 14) for f in cap.frame_list()[:2]] == [0x08, 0x08]
    assert cap.truth.counters["lldp_sent"] == 3                  # every switch port; two are mirrored
