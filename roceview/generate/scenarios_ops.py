"""Scenarios for the per-operation view (ops.csv): every kind of RC operation with coalesced ACKs,
losses and re-reads; READ-heavy traffic held at its initiator depth. The truth of every
operation is the model's (ops_truth.py)."""
from __future__ import annotations

from roceview.generate import ibta as ib
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import QpSettings, Workload
from roceview.generate.scenario import Scenario
from roceview.generate.switch import SwitchSettings

OPS = ("SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "CMP_SWAP", "FETCH_ADD")
# the READ responses the switch drops (the k-th of that opcode it forwards): the requester sees
# the next one out of sequence (a MIDDLE) or an ACK past the READ (a LAST): it re-reads
OPS_DROPS = ((ib.RDMA_READ_RESPONSE_MIDDLE, 3), (ib.RDMA_READ_RESPONSE_LAST, 4),
             (ib.RDMA_READ_RESPONSE_ONLY, 6))
DEPTH = 16                # the REQ's initiator depth (cm.req_message), the requester's max_rd_atomic


def _count(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def _messages(rng, n: int, ops, sizes) -> list:
    kinds = rng.integers(0, len(ops), n)
    lengths = rng.integers(sizes[0], sizes[1] + 1, n)
    return [(ops[int(k)], 8 if ops[int(k)] in ib.ATOMIC_OPCODES else int(length)) for k, length in zip(kinds, lengths)]


def ops_mixed(rng, scale, truth):
    """SEND / SEND with immediate / RDMA WRITE (with immediate) / RDMA READ / CmpSwap / FetchAdd
    from 10.0.0.1, 6 outstanding, ACKs coalesced over 1 us; small SENDs and FetchAdds back. The
    switch drops 8 % of the data packets toward 10.0.0.2 for a while (NAKs, go-back-N) and three
    READ responses toward 10.0.0.1 (re-reads)."""
    messages = _messages(rng, _count(60, scale), OPS, (64, 6000))
    data = sum(1 if op in ("READ",) + tuple(ib.ATOMIC_OPCODES) else -(-n // 1024) for op, n in messages)
    sw = SwitchSettings(loss_prob=0.08, loss_window_pkts=(data // 5, data * 3 // 5), loss_to=1, drop_kth=OPS_DROPS)
    net = Network(NetworkSettings(hosts=2, until_ms=200, switch=sw), rng, truth)
    net.connect(0, 1, Workload(messages, qd=6, gap_ns=500))
    back = _messages(rng, _count(16, scale), ("SEND", "FETCH_ADD"), (64, 512))
    net.connect(1, 0, Workload(back, qd=2, gap_ns=3000))
    return net, [0], [1]


def read_depth_limit(rng, scale, truth):
    """An NVMe-oF-like target reading from 10.0.0.1: 128 RDMA READs of 0.5-2 KiB posted 64 at a
    time on a QP set up by RDMA CM with initiator depth 16 (the REQ's), over 10 Gb/s links: the
    requester keeps 16 READs in flight and holds the rest, nearly all the time. (Small READs keep
    the sample small; at 10 Gb/s a READ's round trip is long against the capture point's view of
    the slot a completion frees: see diagnose/read_depth.py.)"""
    s = NetworkSettings(hosts=2, gbps=10.0, until_ms=200, rdma_cm=True)
    net = Network(s, rng, truth)
    reads = _messages(rng, _count(128, scale), ("READ",), (512, 2048))
    # the PSN window wide enough for 64 READs: only the initiator depth holds them back
    net.connect(0, 1, Workload(reads, qd=64), QpSettings(max_rd_atomic=DEPTH, window=4096))
    return net, [0], [1]


OPS_MIXED_SUMMARY = ("every RC operation (SEND, SEND with immediate, RDMA WRITE with and without immediate, RDMA "
                     "READ, CmpSwap, FetchAdd) from 10.0.0.1, 6 outstanding, ACKs coalesced; small SENDs and "
                     "FetchAdds back; the switch drops 8 % of the data packets toward 10.0.0.2 for a while and "
                     "three READ responses toward 10.0.0.1 (re-reads); the truth of every operation")
READ_DEPTH_SUMMARY = ("128 RDMA READs of 0.5-2 KiB posted 64 at a time on a QP set up by RDMA CM with initiator "
                      "depth 16, 10 Gb/s: the requester keeps 16 READs in flight and holds the rest")

OPS_SCENARIOS = (
    Scenario("ops-mixed", OPS_MIXED_SUMMARY, ops_mixed, "sender", ("network_loss",), ("timeout_retransmit",)),
    Scenario("read-depth-limit", READ_DEPTH_SUMMARY, read_depth_limit, "sender", ("read_depth_limited",)),
)
