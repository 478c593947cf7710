"""The fault scenarios: each sets up hosts, QPs, switch and mirror so that one fault arises
from the model's own behaviour. Every scenario lists the finding kinds an analyzer must
report on its capture (`expected`) and those it must not (`forbidden`); others are
tolerated side effects (documented in captures/README.md)."""
from __future__ import annotations

from functools import partial

from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import QpSettings, Workload
from roceview.generate.scenario import ALL_KINDS, Scenario
from roceview.generate import scenarios_cc as cc
from roceview.generate.scenarios_cm import CM_SCENARIOS
from roceview.generate.scenarios_capture import (TAP_SKEW_SUMMARY, TWO_POINT_SUMMARY, tap_skew,
                                                 two_point_mirror)
from roceview.generate.scenarios_ops import OPS_SCENARIOS
from roceview.generate.scenarios_pfc import PFC_SCENARIOS
from roceview.generate.scenarios_read import (LAST_SUMMARY, MIDDLE_SUMMARY, read_response_loss_last,
                                              read_response_loss_middle)
from roceview.generate.switch import SwitchSettings

def _n(count: int, scale: float) -> int:
    return max(1, int(round(count * scale)))


def _mix(rng, n: int, ops, sizes) -> list:
    """n messages: op drawn from `ops`, length uniform in [sizes[0], sizes[1]]."""
    op_idx = rng.integers(0, len(ops), n)
    lengths = rng.integers(sizes[0], sizes[1] + 1, n)
    return [(ops[int(i)], int(length)) for i, length in zip(op_idx, lengths)]


MIXED = ("SEND", "WRITE", "WRITE_IMM", "READ", "SEND_IMM")


# ---- builders ------------------------------------------------------------------------------
def _two_way(rng, scale, truth, settings: NetworkSettings, forward=(36, 6000, 4), back: int = 12):
    """Mixed SEND/WRITE/READ from host 0 to host 1 (`forward`: messages, longest, queue
    depth) and small SENDs back: the traffic of clean and of the capture-path scenarios."""
    net = Network(settings, rng, truth)
    n, longest, qd = forward
    net.connect(0, 1, Workload(_mix(rng, _n(n, scale), MIXED, (64, longest)), qd=qd, gap_ns=2000))
    net.connect(1, 0, Workload(_mix(rng, _n(back, scale), ("SEND",), (64, 512)), qd=1, gap_ns=5000))
    return net, [0], [1]


def _clean(rng, scale, truth):
    return _two_way(rng, scale, truth, NetworkSettings(hosts=2, until_ms=50))


def _loss_settings(messages):
    data_pkts = sum(-(-length // 1024) if op != "READ" else 1 for op, length in messages)
    window = (data_pkts // 10, data_pkts * 7 // 10)   # a loss episode that ends before the tail
    return SwitchSettings(loss_prob=0.12, loss_window_pkts=window, loss_to=1)


def _network_loss(rng, scale, truth):
    messages = _mix(rng, _n(48, scale), ("SEND", "WRITE", "WRITE_IMM", "READ"), (256, 5000))
    sw = _loss_settings(messages)
    net = Network(NetworkSettings(hosts=2, until_ms=50, switch=sw), rng, truth)
    net.connect(0, 1, Workload(messages, qd=4, gap_ns=1000))
    return net, [0], [1]


def _capture_drop(rng, scale, truth):
    s = NetworkSettings(hosts=2, until_ms=50, mirror_gbps=100.0, mirror_buffer_bytes=8000)
    net = Network(s, rng, truth)
    net.connect(0, 1, Workload(_mix(rng, _n(10, scale), ("WRITE",), (12000, 20000)), qd=2))
    net.connect(1, 0, Workload(_mix(rng, _n(20, scale), ("SEND",), (2000, 4000)), qd=1, gap_ns=1000))
    return net, [0], [1]


def _tail_timeout(rng, scale, truth):
    # queue depth 1 of single-packet messages: a lost packet is always the tail, no later
    # packet reveals the gap, only the Local ACK Timeout (67 ms) recovers it
    sw = SwitchSettings(loss_prob=0.05, loss_window_pkts=(0, 10**9), loss_to=1)
    net = Network(NetworkSettings(hosts=2, until_ms=2000, switch=sw), rng, truth)
    net.connect(0, 1, Workload(_mix(rng, _n(100, scale), ("SEND", "WRITE"), (64, 1024)), qd=1, gap_ns=3000))
    return net, [0], [1]


def _rnr(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=100), rng, truth)
    n = _n(60, scale)
    qs = QpSettings(rnr_timer_code=4)   # min RNR timer 0.04 ms
    # the responder's own rnr_retry differs (it sends nothing): RDMA CM's REQ carries it, the REP the
    # requester's 3 (each message asks the other end's QP, IBTA 12.6.5 / 12.6.8)
    _, responder = net.connect(0, 1, Workload(_mix(rng, n, ("SEND",), (256, 2048)), qd=8), qs,
                               QpSettings(rnr_timer_code=4, rnr_retry=7))
    responder.responder.credits = 8     # receive WQEs posted up front
    net.every(8_000, n, lambda: responder.responder.post_receives(1))   # app reposts slowly
    return net, [0], [1]


def _remote_error(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=50), rng, truth)
    n = _n(30, scale)
    w = Workload(_mix(rng, n, ("WRITE",), (1000, 4000)), qd=4, gap_ns=1000, bad_rkey_at=n * 2 // 3)
    _, responder = net.connect(0, 1, w)
    responder.responder.invalid_rkeys = {w.rkey + 1}   # the MR was deregistered
    return net, [0], [1]


def _incast(rng, scale, truth):
    net = Network(NetworkSettings(hosts=7, until_ms=50), rng, truth)
    for s in range(6):   # six workers answer one aggregator at the same instant
        msgs = _mix(rng, _n(2, scale), ("WRITE",), (10000, 12000))
        net.connect(s, 6, Workload(msgs, qd=2, start_ns=10_000 + int(rng.integers(0, 300))))
    return net, list(range(6)), [6]


def _pfc_storm(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=400), rng, truth)
    qs = QpSettings(timeout_exp=18)    # 1.07 s (NCCL_IB_TIMEOUT default): outlasts the storm
    net.connect(0, 1, Workload(_mix(rng, _n(30, scale), ("WRITE", "SEND"), (2000, 6000)), qd=4), qs)
    rx = net.slow_receiver(1, drain_gbps=400.0, xoff_bytes=10**9, xon_bytes=10**9 - 1)
    rx.stall(8 * 10**6, 150 * 10**9)    # receive pipeline stuck from 8 us (mid-transfer) to 150 ms
    return net, [0], [1]


def _pfc_without_ecn(rng, scale, truth):
    sw = SwitchSettings(ecn_marking=False, xoff_bytes=24_000, xon_bytes=12_000)
    net = Network(NetworkSettings(hosts=3, until_ms=50, switch=sw), rng, truth)
    for s in (0, 1):
        net.connect(s, 2, Workload(_mix(rng, _n(6, scale), ("WRITE",), (14000, 18000)), qd=6))
    return net, [0, 1], [2]


def _ecn_not_enabled(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=50), rng, truth)
    qs = QpSettings(ecn=0)   # NIC ECN off: packets go out Not-ECT
    net.connect(0, 1, Workload(_mix(rng, _n(36, scale), MIXED, (64, 6000)), qd=4, gap_ns=2000), qs)
    return net, [0], [1]


def _cnp_missing(rng, scale, truth):
    s = NetworkSettings(hosts=3, until_ms=50, np_enabled=False)   # receiver NP disabled
    net = Network(s, rng, truth)
    for snd in (0, 1):
        net.connect(snd, 2, Workload(_mix(rng, _n(6, scale), ("WRITE",), (14000, 18000)), qd=6))
    return net, [0, 1], [2]


def _priority_mismatch(rng, scale, truth):
    sw = SwitchSettings(kmin_bytes=8_000, kmax_bytes=32_000, xoff_bytes=24_000, xon_bytes=12_000)
    net = Network(NetworkSettings(hosts=3, until_ms=50, switch=sw), rng, truth)
    net.advertise_dcbx()   # LLDP: PFC enabled on priority 3, what the PFC frames never say
    good = QpSettings(pcp=3, dscp=26)
    wrong = QpSettings(pcp=0, dscp=0)   # host 1 never got the QoS config: lossy class 0
    for snd, qs in ((0, good), (1, wrong)):
        msgs = _mix(rng, _n(6, scale), ("WRITE",), (14000, 18000))
        net.connect(snd, 2, Workload(msgs, qd=6), qs, peer_settings=good)
    return net, [0, 1], [2]


def _slow_receiver(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=50), rng, truth)
    net.connect(0, 1, Workload(_mix(rng, _n(12, scale), ("WRITE",), (8000, 14000)), qd=2),
                QpSettings(window=16))
    net.slow_receiver(1, drain_gbps=25.0, xoff_bytes=12_000, xon_bytes=6_000)
    return net, [0], [1]


# ---- healthy traffic that looks like a fault, and capture-path faults -----------------------
def _pmtu_4096(rng, scale, truth, rdma_cm: bool = False):
    # hosts 0 and 1: a 4096-MTU storage pair (NVMe-oF style 4 KiB READs, no multi-packet
    # request between them); host 2: a legacy 1024-MTU NIC writing to host 1
    s = NetworkSettings(hosts=3, until_ms=50, mtus=(4096, 4096, 1024), rdma_cm=rdma_cm)
    net = Network(s, rng, truth)
    net.connect(0, 1, Workload([("READ", 4096)] * _n(6, scale), qd=2, gap_ns=2000))
    nvme = [("READ", 4096) if k % 2 == 0 else ("SEND", int(rng.integers(64, 4097)))
            for k in range(_n(6, scale))]
    net.connect(0, 1, Workload(nvme, qd=2, gap_ns=2000))
    net.connect(2, 1, Workload(_mix(rng, _n(3, scale), ("WRITE",), (2500, 5000)), qd=2))
    return net, [0, 2], [1]


def _double_mirror(rng, scale, truth):
    s = NetworkSettings(hosts=2, until_ms=50, mirror_copies=2)
    return _two_way(rng, scale, truth, s, forward=(12, 3000, 2), back=6)


def _pfc_pause_train(rng, scale, truth):
    net = Network(NetworkSettings(hosts=2, until_ms=400), rng, truth)
    qs = QpSettings(timeout_exp=18)    # 1.07 s: outlasts the pause train
    net.connect(0, 1, Workload(_mix(rng, _n(8, scale), ("WRITE", "SEND"), (1000, 3000)), qd=4), qs)
    # XOFF re-sent 1 us after the previous pause (335.5 us) ran out: 99.7 % paused
    rx = net.slow_receiver(1, drain_gbps=400.0, xoff_bytes=10**9, xon_bytes=10**9 - 1, lapse_ns=1000)
    rx.stall(8 * 10**6, (8 + 150_000) * 10**6)   # 150 ms from 8 us (mid-transfer)
    return net, [0], [1]


def _capture_bad_icrc(rng, scale, truth):
    return _two_way(rng, scale, truth, NetworkSettings(hosts=2, until_ms=50, mirror_corrupt_prob=0.08))


def _mixed_roce_versions(rng, scale, truth):
    s = NetworkSettings(hosts=2, until_ms=50, roce_v1_hosts=(0,))
    return _two_way(rng, scale, truth, s, forward=(24, 4000, 4), back=8)


def _psn_wrap(rng, scale, truth):
    wrap = 1 << 24   # every initial PSN within 16 of 2^24: both QPs' PSNs run through 0xffffff -> 0
    net = Network(NetworkSettings(hosts=2, until_ms=50, first_psn_range=(wrap - 16, wrap - 2)),
                  rng, truth)
    for _ in range(2):
        net.connect(0, 1, Workload(_mix(rng, _n(24, scale), MIXED, (256, 3000)), qd=4, gap_ns=2000))
    return net, [0], [1]


def _pfc_other_priority(rng, scale, truth):
    # two lossless classes (PFC on 3 and 5); RoCE uses 3 only (PCP 3 / DSCP 26, the defaults)
    sw = SwitchSettings(pfc_prios=(3, 5))
    net = Network(NetworkSettings(hosts=2, until_ms=50, switch=sw), rng, truth)
    net.connect(0, 1, Workload(_mix(rng, _n(36, scale), MIXED, (64, 6000)), qd=2, gap_ns=400_000))
    net.connect(1, 0, Workload(_mix(rng, _n(12, scale), ("SEND",), (64, 512)), qd=1, gap_ns=600_000))
    # the switch pauses priority 5 toward 10.0.0.1 four times while the RoCE traffic runs (7 ms),
    # 250 us each (XOFF, its refresh 168 us later, XON): traffic on 5 that this capture does
    # not carry fills the switch's buffer
    net.pause_cycles(0, 5, first_ns=800_000, period_ns=1_500_000, hold_ns=250_000, count=4)
    return net, [0], [1]


def _rnr_exhausted(rng, scale, truth, rdma_cm: bool = False):
    net = Network(NetworkSettings(hosts=2, until_ms=100, rdma_cm=rdma_cm), rng, truth)
    n = _n(40, scale)
    qs = QpSettings(rnr_timer_code=4, rnr_retry=3)   # 0.04 ms RNR timer, 3 resends, then Error
    # the responder's own rnr_retry differs (it sends nothing): RDMA CM's REQ carries it, the REP the
    # requester's 3 (each message asks the other end's QP, IBTA 12.6.5 / 12.6.8)
    _, responder = net.connect(0, 1, Workload(_mix(rng, n, ("SEND",), (256, 2048)), qd=8), qs,
                               QpSettings(rnr_timer_code=4, rnr_retry=7))
    responder.responder.credits = 8     # receive WQEs posted up front
    # the application reposts one every 8 us, then hangs: the SEND after the last one posted
    # gets 4 RNR NAKs and the requester gives up
    net.every(8_000, n // 2, lambda: responder.responder.post_receives(1))
    # another QP keeps writing for 15 ms: the capture goes on long after the first fell silent
    # (longer than a soft-RoCE requester's RNR wait, rounded up to jiffies: up to 10 ms)
    writes = _mix(rng, _n(30, scale), ("WRITE",), (256, 4096))
    net.connect(0, 1, Workload(writes, qd=1, gap_ns=500_000))
    return net, [0], [1]


DCQCN_STEP_NS, DCQCN_SLOT_NS = 1_000_000, 9_000


def _healthy_dcqcn(rng, scale, truth):
    """Six workers join one every 2.5 ms; from then on, every 1 ms step, each writes 32 KB to
    host 6 in its slot, 9 us after the previous worker's (a 32 KB burst lasts 10.5 us at
    25 Gb/s): consecutive writes overlap by a microsecond or two, the switch queue passes Kmin,
    the receiver's CNPs cut the senders' rates (DCQCN). Every joined worker sends in every
    millisecond; PFC XOFF is far above any queue: nothing is paused or lost."""
    sw = SwitchSettings(kmin_bytes=5_000, kmax_bytes=60_000, pmax=0.2, xoff_bytes=10**9,
                        xon_bytes=10**9 - 1)
    net = Network(NetworkSettings(hosts=7, gbps=25.0, until_ms=200, switch=sw), rng, truth)
    steps = _n(20, scale)
    for s in range(6):
        join = s * 2_500_000 + int(rng.integers(0, 200_000))
        first = -(-join // DCQCN_STEP_NS)
        at = [join] + [k * DCQCN_STEP_NS + s * DCQCN_SLOT_NS + int(rng.integers(0, 2000))
                       for k in range(first, steps)]
        net.connect(s, 6, Workload([("WRITE", 32 * 1024)] * len(at), qd=2, at_ns=tuple(at)))
    return net, list(range(6)), [6]


# the longer of two ECMP paths (30 m more fibre, say): a 1 KB packet lasts 89 ns on a 100 Gb/s
# wire and a short last packet is received (store and forward) up to 79 ns sooner than a full
# one, so the first packet on the shorter path overtakes the last one or two on the longer one
REORDER_PATH_NS = 150
REORDER_EVERY = 6        # a path change every 6th message (more often when --scale leaves few)


def _reordering(rng, scale, truth):
    """WRITEs and SENDs of 3-6 packets, one at a time, while the requester's UDP source port
    is rehashed between a long and a short path. Onto the short path: at a message's last packet,
    which overtakes the last one or two on the long one; the responder NAKs the first once (PSN
    sequence error, IBTA 9.7.5.1.3), accepts them as they land and the requester goes back N.
    Only one packet on the new path before the requester waits for its ACK: a later one arriving
    after the late originals would be a second sequence error (ePSN is then the PSN that was
    discarded), which a real responder NAKs too (rxe_resp.c check_psn clears sent_psn_nak on the
    in-sequence packet). Back onto the long path: at a message's first packet, nothing in flight."""
    net = Network(NetworkSettings(hosts=2, until_ms=50), rng, truth)
    messages = _mix(rng, _n(36, scale), ("WRITE", "SEND"), (2100, 6000))
    requester, _ = net.connect(0, 1, Workload(messages, qd=1, gap_ns=2000))
    ends, end = [], 0                  # seq after each message
    for _, length in messages:
        end += -(-length // net.s.mtu)
        ends.append(end)
    every = max(1, min(REORDER_EVERY, (len(messages) - 1) // 3))
    changes = [(ends[m] - 1, 0) if k % 2 == 0 else (ends[m - 1], REORDER_PATH_NS)
               for k, m in enumerate(range(every, len(messages), every))]
    net.reroute(requester, REORDER_PATH_NS, changes)
    return net, [0], [1]


_PFC_SIDE_EFFECTS = ("slow_receiver", "pfc_without_ecn", "ecn_congestion")

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("clean", "two hosts, mixed SEND/WRITE/READ both ways, no loss, CE, pause or RNR",
             _clean, "sender", ()),
    Scenario("network-loss", "the switch drops data packets during a loss episode; the responder "
             "NAKs (PSN sequence error), the requester goes back N; mirror before the loss point",
             _network_loss, "sender", ("network_loss",)),
    Scenario("network-loss-receiver-side", "as network-loss, mirror after the loss point: gap, "
             "NAK, then the resent packets", _network_loss, "receiver", ("network_loss",)),
    Scenario("capture-drop", "both directions of a 100G link mirrored into one 100G SPAN port: "
             "the mirror drops copies, the endpoints lose nothing", _capture_drop, "sender",
             ("capture_loss",)),
    Scenario("tail-timeout", "queue depth 1 of single-packet messages; a lost packet has no "
             "successor to reveal it, the requester resends after its 67 ms ACK timer",
             _tail_timeout, "sender", ("timeout_retransmit",)),
    Scenario("rnr", "the receiving application posts receive WQEs slower than SENDs arrive: "
             "RNR NAKs (timer 0.04 ms), resends after the RNR timer", _rnr, "sender", ("rnr",)),
    Scenario("remote-error", "a WRITE to a deregistered R_Key: NAK remote access error, the "
             "requester's QP goes to Error", _remote_error, "sender", ("remote_error",)),
    Scenario("incast", "six senders write to one receiver at the same instant: queue builds, "
             "CE marks, CNPs, DCQCN rate cuts", _incast, "receiver", ("incast", "ecn_congestion"),
             ("pfc_pause",)),
    Scenario("pfc-storm", "the receiver NIC's receive pipeline hangs for 150 ms and keeps "
             "priority 3 paused, refreshing XOFF before it lapses", _pfc_storm, "receiver",
             ("pfc_storm", "pfc_pause"), _PFC_SIDE_EFFECTS),
    Scenario("pfc-without-ecn", "2:1 oversubscription with ECN marking off on the switch: "
             "the switch pauses the senders, no CE, no CNP", _pfc_without_ecn, "sender",
             ("pfc_without_ecn", "pfc_pause")),
    Scenario("ecn-not-enabled", "NIC ECN disabled: every RoCE packet is Not-ECT",
             _ecn_not_enabled, "sender", ("ecn_not_enabled",)),
    Scenario("cnp-missing", "2:1 oversubscription, the switch CE-marks, the receiver's "
             "notification point is disabled: no CNP", _cnp_missing, "receiver", ("cnp_missing",),
             ("ecn_congestion", "pfc_pause")),
    Scenario("priority-mismatch", "one sender tags its RoCE traffic PCP 0 / DSCP 0 while PFC "
             "protects priority 3 (lossy class); the switch's LLDP DCBX TLV enables PFC on 3",
             _priority_mismatch, "sender",
             ("priority_mismatch",), ("pfc_pause", "ecn_congestion")),
    Scenario("slow-receiver", "the receiver NIC drains to host memory at 25 Gb/s and sends "
             "PFC pauses itself; the switch queue stays below Kmin: no CE", _slow_receiver,
             "receiver", ("slow_receiver", "pfc_pause")),
    Scenario("pmtu-4096", "path MTU 4096 between 10.0.0.1 and 10.0.0.2: 4 KiB READs answered "
             "by one READ RESPONSE ONLY, no multi-packet request on those QPs; a 1024-MTU "
             "host writes beside them (healthy)", _pmtu_4096, "sender", ()),
    Scenario("pmtu-4096-cm", "as pmtu-4096, each QP set up by RDMA CM first: the CM REQ "
             "carries the path MTU (4096 between 10.0.0.1 and 10.0.0.2, 1024 to 10.0.0.3)",
             partial(_pmtu_4096, rdma_cm=True), "sender", ()),
    Scenario("double-mirror", "two mirror sessions copy every frame to the capture port: "
             "each frame captured twice, byte-identical, < 1 us apart (healthy fabric)",
             _double_mirror, "sender", ("duplicate_frames",)),
    Scenario("pfc-pause-train", "the receiver NIC hangs for 150 ms and re-sends XOFF 1 us "
             "after each pause ran out: pauses lapse between XOFFs, 99.7 % paused",
             _pfc_pause_train, "receiver", ("pfc_storm", "pfc_pause"), _PFC_SIDE_EFFECTS),
    Scenario("capture-bad-icrc", "the mirror flips a payload bit in 8 % of the data packets' "
             "copies: bad ICRC in the capture only, the endpoints ACK everything, nothing resent",
             _capture_bad_icrc, "sender", ("bad_icrc",)),
    Scenario("mixed-roce-versions", "10.0.0.1's NIC sends RoCEv1 (EtherType 0x8915, GRH), "
             "10.0.0.2 answers on the same QP pairs with RoCEv2", _mixed_roce_versions,
             "sender", ("roce_version_mixed",), ("ecn_not_enabled",)),
    Scenario("psn-wrap", "two QPs from 10.0.0.1 to 10.0.0.2 start within 16 PSNs of 2^24: "
             "both PSN spaces cross 0xffffff -> 0 (healthy)", _psn_wrap, "sender", ()),
    Scenario("pfc-other-priority", "RoCE on PCP 3 / DSCP 26 runs clean while the switch pauses "
             "priority 5 (another lossless class, no RoCE on it) toward the sender four times: "
             "PFC frames with class-enable vector 0x20 only", _pfc_other_priority, "sender", (),
             ("pfc_pause",)),
    Scenario("rnr-exhausted", "as rnr with rnr_retry 3: the receiving application stops posting "
             "receive WQEs, 4 RNR NAKs on one PSN, the requester gives up (RNR retry exceeded, QP "
             "to Error) and sends nothing more while another QP writes on for 15 ms",
             _rnr_exhausted, "sender", ("rnr",)),
    Scenario("rnr-exhausted-cm", "as rnr-exhausted, each QP set up by RDMA CM first: the REQ and REP carry "
             "rnr_retry_count 3 (the SENDs' QP) and 7 (the writer's), which confirm the give-up",
             partial(_rnr_exhausted, rdma_cm=True), "sender", ("rnr",)),
    Scenario("healthy-dcqcn", "six senders join one every 2.5 ms, then each writes 32 KB to one "
             "receiver every 1 ms, in turn with overlapping tails (25 Gb/s): a few % CE-marked, "
             "CNPs, DCQCN slows the senders; no loss, no pause", _healthy_dcqcn, "receiver",
             ("ecn_congestion",)),
    Scenario("reordering", "ECMP rehashes (a new UDP source port) move a requester's QP between two "
             "paths 150 ns apart; onto the shorter, its first packet overtakes the last one or two "
             "(WRITE/SEND, 3-6 packets): one spurious NAK each, go-back-N, nothing lost; mirror after "
             "the paths", _reordering, "receiver", ("reordering",)),
    Scenario("read-response-loss-middle", MIDDLE_SUMMARY, read_response_loss_middle, "receiver",
             ("network_loss",)),
    Scenario("read-response-loss-last", LAST_SUMMARY, read_response_loss_last, "receiver",
             ("network_loss",)),
    # every frame really is in the capture twice: duplicate_frames is true, if not the whole story
    Scenario("two-point-mirror", TWO_POINT_SUMMARY, two_point_mirror(_network_loss), "sender",
             ("network_loss", "capture_points"), ("duplicate_frames",)),
    Scenario("tap-skew", TAP_SKEW_SUMMARY, tap_skew(_network_loss), "sender",
             ("network_loss", "clock_skew")),
    *OPS_SCENARIOS, *CM_SCENARIOS,
    # congestion control: each sender's DCQCN reaction point, the receiver's CNP spacing
    Scenario("dcqcn-reaction", cc.REACTION_SUMMARY, cc.dcqcn_reaction, "sender", ("ecn_congestion",)),
    Scenario("dcqcn-ignored", cc.IGNORED_SUMMARY, cc.dcqcn_ignored, "sender", ("ecn_congestion", "cnp_ignored")),
    Scenario("dcqcn-slow", cc.SLOW_SUMMARY, cc.dcqcn_slow, "sender", ("ecn_congestion",)),
    Scenario("cnp-excess", cc.EXCESS_SUMMARY, cc.cnp_excess, "sender", ("ecn_congestion",)),
    # PFC forensics: ECN before PFC or not, a NIC sending on a paused priority, a victim flow
    *PFC_SCENARIOS,
)}
