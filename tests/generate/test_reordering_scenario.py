"""The reordering scenario: ECMP rehashes move a requester's QP to a new UDP source port on a
shorter (or longer) path; the first packet on a shorter path overtakes the last one or two on the
longer one, the responder NAKs once (PSN sequence error, IBTA 9.7.5.1.3) and the requester goes
back N, though nothing is lost. Each test holds the capture (decoded by tshark, at the
receiver-side mirror after the paths, or at the sender side before them, same run) and the
model's ground truth to that."""
from __future__ import annotations

import re
from itertools import pairwise

import pytest

from helpers.diagnose import findings_of, kinds, show
from roceview.generate import SCENARIOS, generate, write_capture
from roceview.generate import ibta as ib
from test_scenarios_make_their_faults import is_request, needs_tshark, roce, sample, ts_ns

pytestmark = pytest.mark.tshark
SEEDS = range(3)
NAK_SEQ = ib.AETH_NAK | ib.NAK_PSN_SEQUENCE_ERROR
FIRSTS = {ib.SEND_FIRST, ib.RDMA_WRITE_FIRST}
LASTS = {ib.SEND_LAST, ib.RDMA_WRITE_LAST}


def _run(tmp_path_factory, seed: int, mirror: str | None = None):
    """(truth, the QP pair, rows, the requester's request rows) of one run."""
    cap, _, rows = sample(tmp_path_factory, "reordering", seed, mirror)
    (q,) = cap.truth.qps
    reqs = [r for r in roce(rows) if r["qp"] == q["responder_qpn"] and is_request(r["opcode"])]
    return cap.truth, q, rows, reqs


def _shorter(truth) -> list[dict]:
    return [c for c in truth.path_changes if c["new_path_ns"] < c["old_path_ns"]]


def _overtaken(truth, change: dict) -> list[int]:
    return sorted(r["psn"] for r in truth.reordered if r["overtaken_by_psn"] == change["psn"])


def _seq(q: dict, psn: int) -> int:
    return (psn - q["first_psn"]) % (1 << 24)


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
def test_source_port_changes_at_the_stated_psns(tmp_path_factory, seed):
    """Sender side (the order the requester sent in): the UDP source port changes exactly at the
    PSNs the truth states, every 6th message: onto the short path at that message's last packet,
    back onto the long path at its first; every packet after a change, resends included, carries
    the new port."""
    t, q, _, reqs = _run(tmp_path_factory, seed, "sender")
    changes = [(r["psn"], prev["sport"], r["sport"]) for prev, r in pairwise(reqs)
               if r["sport"] != prev["sport"]]
    assert changes == [(c["psn"], c["old_sport"], c["new_sport"]) for c in t.path_changes]
    assert len(changes) == 5 and [c["new_path_ns"] for c in t.path_changes] == [0, 150, 0, 150, 0]
    firsts = {}                  # first transmission of each PSN
    for r in reqs:
        firsts.setdefault(r["psn"], r)
    for k, c in enumerate(t.path_changes):
        op = firsts[c["psn"]]["opcode"]
        assert op in (LASTS if c["new_path_ns"] == 0 else FIRSTS)
        ended = sum(r["opcode"] in LASTS for p, r in firsts.items() if _seq(q, p) < _seq(q, c["psn"]))
        assert ended == 6 * (k + 1)      # in message 6, 12, 18, ... (0-based): 6, 12, 18 ended before
    assert sorted(firsts, key=lambda p: _seq(q, p)) == list(firsts)     # in PSN order before the paths


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
def test_first_packet_on_the_new_port_reaches_the_receiver_mirror_before_the_last_ones_on_the_old(
        tmp_path_factory, seed):
    """Receiver side (after the paths): the first packet on a 150 ns shorter path arrives before
    the last one or two sent on the longer one, which land within 200 ns after it; a change onto
    the longer path reorders nothing."""
    t, q, _, reqs = _run(tmp_path_factory, seed)
    for c in t.path_changes:
        i = next(i for i, r in enumerate(reqs) if r["psn"] == c["psn"] and r["sport"] == c["new_sport"])
        late = [r for r in reqs[i + 1:] if r["sport"] == c["old_sport"]]
        if c["new_path_ns"] > c["old_path_ns"]:
            assert not late
            continue
        psns = [r["psn"] for r in late]
        assert 1 <= len(psns) <= 2 and psns == _overtaken(t, c)
        assert [_seq(q, p) for p in psns] == list(range(_seq(q, c["psn"]) - len(psns), _seq(q, c["psn"])))
        assert all(0 < ts_ns(r) - ts_ns(reqs[i]) < 200 for r in late)
    assert t.counters["reordered_packets"] == len(t.reordered) >= 3


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
def test_responder_naks_once_per_reordering_and_the_requester_resends_from_that_psn(tmp_path_factory, seed):
    """One NAK PSN sequence error per reordering, for the first overtaken PSN, after its late
    original had landed; the requester then resends from that PSN up to the packet that overtook
    it, on the new port, and the first ACK after the NAK covers them all (duplicates re-ACKed)."""
    t, q, rows, reqs = _run(tmp_path_factory, seed)
    naks = [r for r in roce(rows) if r["syndrome"] == NAK_SEQ]
    shorter = _shorter(t)
    assert len(naks) == len(shorter) == 3
    assert [n["psn"] for n in t.seq_naks] == [n["psn"] for n in naks]
    acks = [r for r in roce(rows) if r["syndrome"] == ib.AETH_ACK_NO_CREDIT]
    for nak, c in zip(naks, shorter):
        overtaken = _overtaken(t, c)
        assert nak["psn"] == overtaken[0]
        landed = [r for r in reqs if r["psn"] in overtaken and ts_ns(r) < ts_ns(nak)]
        assert len(landed) == len(overtaken)                     # the late originals, before the NAK
        resent = [r for r in reqs if ts_ns(r) > ts_ns(nak)][:len(overtaken) + 1]
        assert [_seq(q, r["psn"]) for r in resent] == list(range(_seq(q, nak["psn"]), _seq(q, c["psn"]) + 1))
        assert {r["sport"] for r in resent} == {c["new_sport"]}
        ack = next(a for a in acks if ts_ns(a) > ts_ns(nak))
        assert ack["psn"] == c["psn"] and ts_ns(ack) > ts_ns(resent[-1])


@pytest.mark.parametrize("seed", range(5))
def test_nothing_is_dropped_every_nak_is_spurious_and_its_resends_are_counted(seed):
    t = generate("reordering", seed=seed).truth
    assert not t.drops and not t.qp_errors and t.counters["ack_timeouts"] == 0
    n = len(_shorter(t))
    assert t.counters["naks_seq_sent"] == t.counters["naks_seq_spurious"] == n == 3
    assert all(x["spurious"] for x in t.seq_naks)
    # each go-back-N resends the overtaken packets (duplicates by then) and the one that overtook
    # them (discarded as out of sequence when it came first)
    assert t.counters["duplicates_received"] == t.counters["reordered_packets"] == len(t.reordered)
    assert (t.counters["retransmitted_packets"] == t.counters["resent_after_spurious_nak"]
            == sum(x["resent"] for x in t.seq_naks) == len(t.reordered) + n)


def test_network_loss_naks_are_not_spurious():
    t = generate("network-loss", seed=0).truth
    assert t.seq_naks and not any(x["spurious"] for x in t.seq_naks)
    assert t.counters["naks_seq_spurious"] == t.counters["resent_after_spurious_nak"] == 0
    assert not t.path_changes and not t.reordered


# ---- what the diagnoser makes of it ---------------------------------------------------------
def _finding(tmp_path, seed: int):
    cap = generate("reordering", seed=seed)
    write_capture(cap, tmp_path / "r.pcap")
    findings = findings_of(tmp_path / "r.pcap")
    assert not kinds(findings) & set(SCENARIOS["reordering"].forbidden), show(findings)
    (f,) = [f for f in findings if f["kind"] == "reordering"]
    return cap.truth, f


@pytest.mark.parametrize("seed", SEEDS)
def test_diagnoser_calls_it_reordering_with_spurious_naks_not_loss(tmp_path, seed):
    t, f = _finding(tmp_path, seed)
    assert f["severity"] == "warning"
    assert f"{t.counters['reordered_packets']} packets arrived out of order" in f["summary"]
    assert f"{t.counters['naks_seq_spurious']} spurious NAKs" in f["summary"]


@pytest.mark.parametrize("seed", SEEDS)
def test_diagnoser_counts_the_packets_the_spurious_naks_made_the_requester_resend(tmp_path, seed):
    t, f = _finding(tmp_path, seed)
    resent = int(re.search(r"resend (\d+) packets", f["summary"]).group(1))
    assert resent == t.counters["resent_after_spurious_nak"]
