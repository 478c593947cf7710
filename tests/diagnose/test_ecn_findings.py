"""Cnp_missing quotes the CE count ecn_congestion quotes and is hedged;
incast counts only the pause frames near its receiver and window; ecn_not_enabled on a handful of
packets is info and names soft-RoCE."""
from __future__ import annotations

from helpers.findings import MACS, SWITCH_MAC, Cap, listing, one


def test_cnp_missing_counts_the_same_ce_marks_as_ecn_congestion(tmp_path):
    c = Cap()
    for psn in range(20):
        c.req(0, 1, psn, ecn=3 if psn % 4 == 0 else 2)
    c.at(50_000).ack(1, 0, 19).at(1000).req(0, 1, 20, ecn=3)   # a last CE mark 100 ns before the end
    found = c.findings(tmp_path)
    assert listing(found) == [("warning", "cnp_missing"), ("warning", "ecn_congestion")]
    assert "6 CE-marked data packets" in one(found, "ecn_congestion")["summary"]
    miss = one(found, "cnp_missing")
    assert "received 6 CE-marked packets from 10.0.0.1" in miss["summary"]
    assert "may be off" in miss["summary"] and "this capture point does not see" in miss["summary"]
    assert "5 CE marks more than 10 us before the capture end" in miss["evidence"]


def _incast(c: Cap, receiver: int = 0, senders=(1, 2, 3, 4)) -> Cap:
    for psn in range(4):
        for s in senders:
            c.req(s, receiver, psn, ecn=3 if psn == 3 else 2)
    for s in senders:
        c.ack(receiver, s, 3).cnp(receiver, s)
    return c


def test_incast_ignores_pauses_from_another_host_and_another_window(tmp_path):
    c = _incast(Cap())
    c.req(5, 1, 0).pfc(0xFFFF, mac=MACS[5]).pfc(0, mac=MACS[5])        # host 5's NIC, same window
    c.at(5_000_000).pfc(0xFFFF).at(1000).pfc(0)                           # a switch, 5 ms later
    incast = one(c.findings(tmp_path), "incast")
    assert "PFC pause" not in incast["summary"] and "PFC pause" not in incast["evidence"]
    assert "with 4 CE-marked packets, 4 CNPs from 10.0.0.1 in that window" in incast["summary"]


def test_incast_counts_switch_pauses_in_its_window(tmp_path):
    c = _incast(Cap()).pfc(0xFFFF).pfc(0xFFFF, mac=MACS[0]).pfc(0, mac=SWITCH_MAC)
    incast = one(c.findings(tmp_path), "incast")
    assert "2 PFC pause frames" in incast["summary"]


def _not_ect(c: Cap, n: int) -> Cap:
    for psn in range(n):
        c.req(0, 1, psn, ecn=0, step=2000).ack(1, 0, psn, ecn=0)
    return c


def test_a_handful_of_not_ect_packets_is_info_and_names_soft_roce(tmp_path):
    found = _not_ect(Cap(), 10).findings(tmp_path)
    assert listing(found) == [("info", "ecn_not_enabled")]
    f = one(found, "ecn_not_enabled")
    assert "only 10 packets: below 100" in f["summary"] and "soft-RoCE (rxe)" in f["summary"]
    assert "ROCE_CC_PRIO_MASK_P1" in f["advice"] and "mlnxconfig" not in f["advice"]


def test_a_sustained_not_ect_source_is_still_a_warning(tmp_path):
    found = _not_ect(Cap(), 120).findings(tmp_path)
    assert listing(found) == [("warning", "ecn_not_enabled")]
    assert "120 of 120 data packets" in one(found, "ecn_not_enabled")["summary"]


def _staggered(c: Cap, receiver: int = 0, senders=(1, 2, 3, 4)) -> Cap:
    """The senders join one per 1.5 ms and then each send one packet per 0.25 ms to the receiver
    until 8 ms, every fourth CE-marked and answered by a CNP: shaped traffic, no burst."""
    psn = 0
    for step in range(32):
        for k, s in enumerate(senders):
            if step * 250_000 >= k * 1_500_000:
                c.req(s, receiver, psn, ecn=3 if psn % 4 == 3 else 2)
                if psn % 4 == 3:
                    c.cnp(receiver, s)
        psn += 1
        c.at(250_000)
    for s in senders:
        c.ack(receiver, s, psn - 1)
    return c


def test_senders_that_join_one_by_one_are_congestion_not_incast(tmp_path):
    found = _staggered(Cap()).findings(tmp_path)
    assert "incast" not in {k for _, k in listing(found)}, listing(found)
    assert "ecn_congestion" in {k for _, k in listing(found)}


def test_five_senders_joining_one_by_one_are_no_incast(tmp_path):
    found = _staggered(Cap(), senders=(1, 2, 3, 4, 5)).findings(tmp_path)
    assert "incast" not in {k for _, k in listing(found)}, listing(found)


def _together(c: Cap, ms: int, senders=(1, 2, 3, 4)) -> Cap:
    for psn in range(ms * 4):
        for s in senders:
            c.req(s, 0, 100 + psn, ecn=3 if psn % 4 == 3 else 2)
        c.at(250_000)
    return c.ack(0, 1, 100 + ms * 4 - 1).cnp(0, 1)


def test_senders_starting_together_after_an_idle_window_are_incast(tmp_path):
    c = Cap()
    for psn in range(12):                     # one sender alone for 3 ms: the idle window is seen
        c.req(5, 0, psn).at(250_000)
    incast = one(_together(c, 2).findings(tmp_path), "incast")
    assert "4 senders burst into 10.0.0.1" in incast["summary"]
    assert incast["evidence"].startswith("senders: 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5;"), incast["evidence"]


def test_senders_already_sending_when_the_capture_began_are_no_incast(tmp_path):
    found = _together(Cap(), 4).findings(tmp_path)     # they keep sending in every later window
    assert "incast" not in {k for _, k in listing(found)}, listing(found)
    assert "ecn_congestion" in {k for _, k in listing(found)}


def test_incast_counts_ce_and_cnps_in_its_window_only(tmp_path):
    c = _incast(Cap()).at(3_000_000)
    for psn in range(4, 40):                       # later CE marks and CNPs, another window
        c.req(1, 0, psn, ecn=3).cnp(0, 1).at(10_000)
    incast = one(c.findings(tmp_path), "incast")
    assert "with 4 CE-marked packets, 4 CNPs from 10.0.0.1 in that window" in incast["summary"], incast["summary"]
