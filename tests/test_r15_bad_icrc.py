"""Review of issue 15 item 6: a capture path that corrupts a few copies (not whole request
classes) is still the capture path when the receiver acknowledged past them and nothing was
resent; an RC receiver ACKs PSN n only once it has every PSN up to n (IBTA 9.7.5.1.1)."""
from __future__ import annotations

from f15b_helpers import SYN_NAK_SEQ, Cap, listing, one


def _writes(c: Cap, psns, bad=()) -> Cap:
    for psn in psns:
        c.req(0, 1, psn, bad_icrc=psn in bad)
    return c


def test_a_few_bad_copies_acknowledged_past_are_the_capture_path(tmp_path):
    c = _writes(Cap(), range(100, 110), bad={102, 106}).at(2000).ack(1, 0, 109)
    found = c.findings(tmp_path)
    assert listing(found) == [("info", "bad_icrc")]
    f = one(found, "bad_icrc")
    assert "2 RoCE frames in 1 flow fail the ICRC check as captured" in f["summary"]
    assert f["evidence"].startswith("2 bad ICRC on 10.0.0.1>10.0.0.2:0x000110")


def test_a_few_bad_copies_with_no_ack_after_them_stay_a_warning(tmp_path):
    c = _writes(Cap(), range(100, 105)).at(2000).ack(1, 0, 104)
    c = _writes(c, range(105, 110), bad={107})                   # the capture ends before any ACK
    assert listing(c.findings(tmp_path)) == [("warning", "bad_icrc")]


def test_a_bad_copy_the_receiver_naked_stays_a_warning(tmp_path):
    c = _writes(Cap(), range(100, 106), bad={102}).at(1000).ack(1, 0, 102, SYN_NAK_SEQ).at(1000)
    c = _writes(c, range(102, 106)).at(2000).ack(1, 0, 105)
    assert one(c.findings(tmp_path), "bad_icrc")["severity"] == "warning"
