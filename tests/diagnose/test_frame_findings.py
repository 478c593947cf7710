"""Bad_icrc on packets the receiver acknowledged is the capture path;
RoCEv1 and RoCEv2 on one QP pair is roce_version_mixed, and ECT in a RoCEv1 GRH is not ECN.

A capture path that corrupts a few copies (not whole request
classes) is still the capture path when the receiver acknowledged past them and nothing was
resent; an RC receiver ACKs PSN n only once it has every PSN up to n (IBTA 9.7.5.1.1)."""
from __future__ import annotations

from helpers.findings import SYN_NAK_SEQ, Cap, listing, one


def _writes(c: Cap, psns, **kw) -> Cap:
    for psn in psns:
        c.req(0, 1, psn, **kw)
    return c


def test_bad_icrc_that_the_receiver_acknowledged_is_the_capture_path(tmp_path):
    c = _writes(Cap(), range(100, 110), bad_icrc=True).at(2000).ack(1, 0, 109)
    found = c.findings(tmp_path)
    assert listing(found) == [("info", "bad_icrc")]
    f = one(found, "bad_icrc")
    assert "the receivers acknowledged them and nothing was resent" in f["summary"]
    assert "capture path" in f["summary"] and "will retransmit" not in f["advice"]
    assert f["evidence"].startswith("10 bad ICRC on 10.0.0.1>10.0.0.2:0x000110")


def test_bad_icrc_that_was_naked_and_resent_stays_a_warning(tmp_path):
    c = _writes(Cap(), range(100, 106), bad_icrc=True).at(1000).ack(1, 0, 100, SYN_NAK_SEQ).at(1000)
    c = _writes(c, range(100, 106)).at(2000).ack(1, 0, 105)
    found = c.findings(tmp_path)
    f = one(found, "bad_icrc")
    assert f["severity"] == "warning" and "rx_icrc_encapsulated" in f["advice"]
    assert "rx_crc_errors_phy" in f["advice"]


def test_unacknowledged_bad_icrc_stays_a_warning(tmp_path):
    found = _writes(Cap(), range(100, 110), bad_icrc=True).findings(tmp_path)
    assert listing(found) == [("warning", "bad_icrc")]


def test_rocev1_one_way_rocev2_the_other_is_roce_version_mixed(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(0, 1, psn, v1=True).ack(1, 0, psn)
    found = c.findings(tmp_path)
    assert listing(found) == [("warning", "roce_version_mixed")]
    f = one(found, "roce_version_mixed")
    assert "(10.0.0.1 sends RoCEv1; 10.0.0.2 sends RoCEv2)" in f["summary"] and "1 QP pair" in f["summary"]
    assert f["flows"] == "10.0.0.1>10.0.0.2:0x000110;10.0.0.2>10.0.0.1:0x000101"
    assert "gid_attrs/types" in f["advice"] and "default_roce_mode" in f["advice"]


def test_one_pair_on_rocev1_and_another_on_rocev2_is_no_mismatch(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(0, 1, psn, v1=True).ack(1, 0, psn, v1=True)
        c.req(2, 3, psn).ack(3, 2, psn)
    assert listing(c.findings(tmp_path)) == []


def test_ect_in_a_rocev1_grh_is_not_ecn_capable(tmp_path):
    c = Cap()
    for psn in range(10):                          # GRH TClass 0x6a: DSCP 26 + ECT(0), but RoCEv1
        c.req(0, 1, psn, v1=True).ack(1, 0, psn, v1=True)
    c.pfc(0xFFFF).at(3000).pfc(0)
    found = c.findings(tmp_path)
    assert listing(found) == [("warning", "pfc_pause")]   # no pfc_without_ecn: nothing here could be marked


def test_rocev1_with_a_zero_traffic_class_is_not_ecn_not_enabled(tmp_path):
    c = Cap()
    for psn in range(150):
        c.req(0, 1, psn, v1=True, ecn=0, dscp=0).ack(1, 0, psn, v1=True, ecn=0, dscp=0)
    assert listing(c.findings(tmp_path)) == []


def _writes_marking_bad(c: Cap, psns, bad=()) -> Cap:
    for psn in psns:
        c.req(0, 1, psn, bad_icrc=psn in bad)
    return c


def test_a_few_bad_copies_acknowledged_past_are_the_capture_path(tmp_path):
    c = _writes_marking_bad(Cap(), range(100, 110), bad={102, 106}).at(2000).ack(1, 0, 109)
    found = c.findings(tmp_path)
    assert listing(found) == [("info", "bad_icrc")]
    f = one(found, "bad_icrc")
    assert "2 RoCE frames in 1 flow fail the ICRC check as captured" in f["summary"]
    assert f["evidence"].startswith("2 bad ICRC on 10.0.0.1>10.0.0.2:0x000110")


def test_a_few_bad_copies_with_no_ack_after_them_stay_a_warning(tmp_path):
    c = _writes_marking_bad(Cap(), range(100, 105)).at(2000).ack(1, 0, 104)
    c = _writes_marking_bad(c, range(105, 110), bad={107})                   # the capture ends before any ACK
    assert listing(c.findings(tmp_path)) == [("warning", "bad_icrc")]


def test_a_bad_copy_the_receiver_naked_stays_a_warning(tmp_path):
    c = _writes_marking_bad(Cap(), range(100, 106), bad={102}).at(1000).ack(1, 0, 102, SYN_NAK_SEQ).at(1000)
    c = _writes_marking_bad(c, range(102, 106)).at(2000).ack(1, 0, 105)
    assert one(c.findings(tmp_path), "bad_icrc")["severity"] == "warning"
