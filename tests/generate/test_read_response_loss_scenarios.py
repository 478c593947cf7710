"""The READ response loss scenarios: the switch drops chosen RDMA READ RESPONSE packets on their
way back to the requester, which re-reads from the first missing PSN (the READ request's PSN set
to it, VA advanced and DMA length cut by the bytes already received) and goes back N from there.
read-response-loss-middle: a dropped MIDDLE, seen as the next response out of sequence;
read-response-loss-last: a dropped LAST, seen through the ACK of the SEND after the READ (an
implied NAK). Each test holds the capture (decoded by tshark; the default mirror is at the
responder's link, before the loss point, or at the requester's, after it, same run) and the
model's ground truth to that."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.tshark import field_rows
from roceview.generate import SCENARIOS, generate, write_capture
from roceview.generate import ibta as ib
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.scenarios_read import LAST_DROPS, MIDDLE_DROPS
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth
from test_scenarios_make_their_faults import needs_tshark

pytestmark = pytest.mark.tshark
SEEDS = range(3)
MIDDLE, LAST = "read-response-loss-middle", "read-response-loss-last"
RESPONSES = set(ib.READ_RESPONSE_OPCODES)
FIELDS = {"ts": "frame.time_epoch", "src": "ip.src", "opcode": "infiniband.bth.opcode",
          "qp": "infiniband.bth.destqp", "psn": "infiniband.bth.psn", "syndrome": "infiniband.aeth.syndrome",
          "va": "infiniband.reth.va", "dmalen": "infiniband.reth.dmalen"}
REQUESTER, RESPONDER = "10.0.0.1", "10.0.0.2"
_cache: dict = {}


def _value(name: str, v: str):
    if v == "" or name == "src":
        return v or None
    if name == "ts":
        s, frac = v.split(".")
        return int(s) * 10**9 + int(frac.ljust(9, "0"))
    return int(v, 16) if v.startswith("0x") else int(v)


def _run(tmp_path_factory, name: str, seed: int = 0, mirror: str | None = None):
    """(truth, RoCE rows in capture order) of one run."""
    key = (name, seed, mirror)
    if key not in _cache:
        cap = generate(name, seed=seed, mirror=mirror)
        path = tmp_path_factory.mktemp("rr") / f"{name}-{seed}.pcap"
        write_capture(cap, path)
        rows = field_rows(path, FIELDS, _value)
        _cache[key] = (cap.truth, [r for r in rows if r["opcode"] is not None])
    return _cache[key]


def _requests(rows) -> list[dict]:
    return [r for r in rows if r["src"] == REQUESTER]


def _responses(rows) -> list[dict]:
    return [r for r in rows if r["src"] == RESPONDER and r["opcode"] in RESPONSES]


def _seq(truth, psn: int) -> int:
    return (psn - truth.qps[0]["first_psn"]) % (1 << 24)


def _span(r: dict) -> int:
    return max(1, -(-r["dmalen"] // 1024)) if r["opcode"] == ib.RDMA_READ_REQUEST else 1


def _original_read(truth, requests, psn: int) -> dict:
    """The first READ request sent whose PSNs cover `psn`."""
    return next(r for r in requests if r["opcode"] == ib.RDMA_READ_REQUEST
                and _seq(truth, r["psn"]) <= _seq(truth, psn) < _seq(truth, r["psn"]) + _span(r))


# ---- the loss the switch was asked for, and nothing else -------------------------------------
@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name, drops", [(MIDDLE, MIDDLE_DROPS), (LAST, LAST_DROPS)])
def test_the_dropped_response_is_the_kth_of_its_opcode_the_responder_sent(tmp_path_factory, name, drops, seed):
    """Responder side (before the loss point): the k-th distinct PSN sent as READ RESPONSE MIDDLE
    (LAST) is the one the truth records dropped, in the switch, toward the requester."""
    t, rows = _run(tmp_path_factory, name, seed)
    assert [(d.where, d.opcode, d.src_ip, d.dst_ip) for d in t.drops] == [
        ("switch", op, RESPONDER, REQUESTER) for op, _ in drops]
    for (op, k), d in zip(drops, t.drops):
        psns = list(dict.fromkeys(r["psn"] for r in _responses(rows) if r["opcode"] == op))
        assert d.psn == psns[k - 1] and d.dest_qp == t.qps[0]["requester_qpn"]


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_requester_side_misses_exactly_the_dropped_responses(tmp_path_factory, name, seed):
    """The same run mirrored at the requester's link (after the loss point): every frame the
    responder sent arrives but the dropped responses; every request is in both captures."""
    t, at_responder = _run(tmp_path_factory, name, seed)
    _, at_requester = _run(tmp_path_factory, name, seed, "sender")
    sent = [(r["opcode"], r["psn"]) for r in at_responder if r["src"] == RESPONDER]
    for d in t.drops:
        sent.remove((d.opcode, d.psn))      # the first copy: the original response
    assert [(r["opcode"], r["psn"]) for r in at_requester if r["src"] == RESPONDER] == sent
    assert [(r["opcode"], r["psn"]) for r in _requests(at_requester)] == [
        (r["opcode"], r["psn"]) for r in _requests(at_responder)]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_each_drop_is_re_read_once_nothing_else_is_lost_or_timed_out(name, seed):
    t = generate(name, seed=seed).truth
    assert len(t.drops) == 2 and t.counters["dropped_switch"] == 2
    assert sorted(r["psn"] for r in t.rereads) == sorted(d.psn for d in t.drops)
    assert t.counters["reads_reissued"] == 2 and t.counters["ack_timeouts"] == 0 and not t.qp_errors
    assert t.counters["naks_seq_sent"] == t.counters["naks_rnr_sent"] == 0 and not t.seq_naks
    # every packet resent is the re-read or a request after it (go-back-N), counted once
    assert t.counters["retransmitted_packets"] == sum(r["resent"] for r in t.rereads)
    assert t.counters["duplicates_received"] == t.counters["retransmitted_packets"]


# ---- the re-read ----------------------------------------------------------------------------
@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_requester_re_reads_from_exactly_the_first_missing_psn_with_va_and_length_cut(
        tmp_path_factory, name, seed):
    """After each drop the next READ request whose PSN was sent before is the re-read: its PSN is
    the dropped response's, its VA the original's plus the bytes already received, its DMA length
    the original's less them; the responder answers it from that PSN with a new response
    sequence (FIRST ... LAST, or ONLY), as many packets as the shorter length needs, back to back."""
    t, rows = _run(tmp_path_factory, name, seed)
    reqs = _requests(rows)
    for d, rr in zip(t.drops, t.rereads):
        orig = _original_read(t, reqs, d.psn)
        got = (_seq(t, d.psn) - _seq(t, orig["psn"])) * 1024
        reread = next(r for r in reqs if r["ts"] > orig["ts"] and r["psn"] == d.psn)
        assert reread["opcode"] == ib.RDMA_READ_REQUEST and got > 0
        assert (reread["va"], reread["dmalen"]) == (orig["va"] + got, orig["dmalen"] - got)
        assert (rr["va"], rr["dma_length"]) == (reread["va"], reread["dmalen"])
        after = [r for r in _responses(rows) if r["ts"] > reread["ts"]]   # originals may still be leaving
        start = next(i for i, r in enumerate(after) if r["psn"] == d.psn)
        answer = after[start:start + _span(reread)]
        assert [r["psn"] for r in answer] == [(d.psn + i) & ib.PSN_MASK for i in range(_span(reread))]
        first, middle, last, only = ib.READ_RESPONSE_OPCODES
        n = len(answer)
        assert [r["opcode"] for r in answer] == ([only] if n == 1 else [first] + [middle] * (n - 2) + [last])


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_requester_goes_back_n_from_the_re_read(tmp_path_factory, name, seed):
    """From the re-read on, the requester resends what followed it in PSN order (each request
    continuing the previous, a READ by its span) up to the highest PSN sent before, then goes on
    with new PSNs; the packets resent are the truth's per re-read."""
    t, rows = _run(tmp_path_factory, name, seed)
    reqs = _requests(rows)
    for rr in t.rereads:
        sent_before = [r for r in reqs if r["ts"] < rr["ts_ns"]]
        end = max(_seq(t, r["psn"]) + _span(r) for r in sent_before)
        start = next(i for i, r in enumerate(reqs) if r["ts"] >= rr["ts_ns"])
        resent, nxt = [], _seq(t, rr["psn"])
        for r in reqs[start:]:
            if _seq(t, r["psn"]) >= end:
                break
            assert _seq(t, r["psn"]) == nxt
            resent.append(r)
            nxt += _span(r)
        assert nxt == end and len(resent) == rr["resent"] >= 1


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
def test_middle_loss_is_seen_as_the_next_response_out_of_sequence(tmp_path_factory, seed):
    """The response after the dropped MIDDLE (a MIDDLE or the LAST, PSN + 1) is what the requester
    acts on: out of sequence, no NAK or ACK needed; the re-read leaves after it."""
    t, rows = _run(tmp_path_factory, MIDDLE, seed)
    assert t.counters["read_responses_out_of_sequence"] == 2 and t.counters["implied_naks"] == 0
    for d, rr in zip(t.drops, t.rereads):
        assert rr["detected"] == "out_of_sequence_response"
        assert rr["by_psn"] == (d.psn + 1) & ib.PSN_MASK
        assert rr["by_opcode"] in (ib.RDMA_READ_RESPONSE_MIDDLE, ib.RDMA_READ_RESPONSE_LAST)
        trigger = next(r for r in _responses(rows) if r["psn"] == rr["by_psn"])
        assert trigger["opcode"] == rr["by_opcode"] and trigger["ts"] < rr["ts_ns"]
    assert not any(r["syndrome"] is not None and r["syndrome"] >> 5 for r in rows)   # no NAK


@needs_tshark
@pytest.mark.parametrize("seed", SEEDS)
def test_last_loss_takes_the_implied_nak_path(tmp_path_factory, seed):
    """The READ whose LAST was dropped is followed by one SEND only; the responder ACKs it (PSN
    one past the READ's last), and that ACK, before any NAK or timer, makes the requester
    re-read the last PSN (an implied NAK, mlx5 implied_nak_seq_err)."""
    t, rows = _run(tmp_path_factory, LAST, seed)
    assert t.counters["implied_naks"] == 2 and t.counters["read_responses_out_of_sequence"] == 0
    reqs = _requests(rows)
    for d, rr in zip(t.drops, t.rereads):
        assert rr["detected"] == "implied_nak" and rr["by_opcode"] == ib.ACKNOWLEDGE
        assert rr["by_psn"] == (d.psn + 1) & ib.PSN_MASK
        send = next(r for r in reqs if r["psn"] == rr["by_psn"])
        assert send["opcode"] == ib.SEND_ONLY
        ack = next(r for r in rows if r["src"] == RESPONDER and r["opcode"] == ib.ACKNOWLEDGE
                   and r["psn"] == rr["by_psn"])
        assert ack["syndrome"] == ib.AETH_ACK_NO_CREDIT and send["ts"] < ack["ts"] < rr["ts_ns"]
        # no other response of that READ came after the LAST: nothing else to reveal the loss
        last_sent = next(r for r in _responses(rows) if r["psn"] == d.psn)
        assert last_sent["opcode"] == ib.RDMA_READ_RESPONSE_LAST
        assert not [r for r in _responses(rows) if last_sent["ts"] < r["ts"] < ack["ts"]]
        # the re-read asks for the last packet only: one READ RESPONSE ONLY answers it
        assert rr["dma_length"] <= 1024
    assert not any(r["syndrome"] is not None and r["syndrome"] >> 5 for r in rows)   # no NAK


def test_a_lost_last_response_with_nothing_after_it_is_re_read_after_the_ack_timer():
    """The third way: one READ alone, its LAST dropped; no later response or ACK reveals it,
    the Local ACK Timeout (67 ms) does, and the READ is re-issued from the missing PSN."""
    sw = SwitchSettings(drop_kth=((ib.RDMA_READ_RESPONSE_LAST, 1),))
    truth = Truth()
    net = Network(NetworkSettings(hosts=2, until_ms=200, switch=sw), np.random.default_rng(0), truth)
    requester, _ = net.connect(0, 1, Workload([("READ", 3000)], qd=1))
    net.run()
    (rr,) = truth.rereads
    (d,) = truth.drops
    assert rr["detected"] == "timeout" and rr["psn"] == d.psn and rr["by_psn"] is None
    assert (rr["dma_length"], rr["resent"]) == (3000 - 2048, 1)
    assert truth.counters["ack_timeouts"] == 1 and requester.requester.done == 1


def test_without_a_drop_the_read_scenarios_re_read_nothing():
    for name in ("clean", "network-loss", "pmtu-4096", "psn-wrap"):
        t = generate(name, seed=0).truth
        assert not t.rereads and t.counters["reads_reissued"] == 0, name


def test_both_scenarios_expect_network_loss_and_forbid_the_look_alikes():
    for name in (MIDDLE, LAST):
        sc = SCENARIOS[name]
        assert sc.expected == ("network_loss",) and sc.mirror == "receiver"
        assert {"timeout_retransmit", "capture_loss", "psn_reuse", "ack_unsent_psn", "reordering"} <= set(sc.forbidden)


# ---- what the analyzer makes of it ------------------------------------------------------------
def _analyze(tmp_path, name: str, seed: int):
    from roceview.api import analyze

    cap = generate(name, seed=seed)
    write_capture(cap, tmp_path / "r.pcap")
    return cap.truth, analyze([str(tmp_path / "r.pcap")], warn=lambda m: None)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_qp_table_counts_the_re_read_and_go_back_n_as_the_requesters_resends(tmp_path, name, seed):
    t, result = _analyze(tmp_path, name, seed)
    d = result.flows_table.data
    rows = {f: {k: d[k][i] for k in d} for i, f in enumerate(d["flow"])}
    (req,) = [r for f, r in rows.items() if f.startswith(f"{REQUESTER}>")]
    assert int(req["retransmitted_packets"]) == t.counters["retransmitted_packets"]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", [MIDDLE, LAST])
def test_diagnoser_calls_a_lost_read_response_network_loss(tmp_path, name, seed):
    write_capture(generate(name, seed=seed), tmp_path / "r.pcap")
    findings = findings_of(tmp_path / "r.pcap")
    assert "network_loss" in kinds(findings), show(findings)
    assert not kinds(findings) & set(SCENARIOS[name].forbidden), show(findings)
    (loss,) = [f for f in findings if f["kind"] == "network_loss"]
    assert "asked again for lost responses" in loss["summary"] and "re-requested from PSN" in loss["evidence"]
