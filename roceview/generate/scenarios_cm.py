"""RDMA CM faults: connections set up by CM (cm.py) that a server rejects, answers only to a
resent REQ, answers after an MRA, never answers, or answers late. The data of the connections
that are established runs as in the other scenarios; a rejected or unanswered one sends none.
The truth: the model's counters (cm_rej_sent, cm_req_ignored, cm_req_resent, cm_mra_sent,
cm_req_given_up) and the capture's own MADs."""
from __future__ import annotations

from roceview.generate.cm import NVMF_PORT
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.scenario import Scenario
from roceview.generate.simulator import PS_PER_MS

CONSUMER_REJECT = 28          # IBTA 12.6.7 Table 103: rdma_reject() from the server application
UNUSED_PORT = 5000            # a port nobody listens on: Linux ib_cm REJects with "Invalid service ID"
RETRY_TIMEOUT = 8             # the REQ's remote CM response timeout: 4.096 us x 2^8 = 1.05 ms
RETRY_MAX = 2                 # max CM retries: 3 REQs, then the client gives up
MRA_TIMEOUT = 12              # the MRA's service timeout: 4.096 us x 2^12 = 16.8 ms
LATE_MS = 5                   # the REP after an MRA: past the unanswered REQ's give-up (3.2 ms)
SLOW_MS = 150                 # cm-slow-setup's late REP: above the default cm_setup_ms (100 ms)


def _count(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def _messages(rng, n: int, ops=("SEND", "WRITE", "READ"), sizes=(64, 4096)) -> list:
    kinds = rng.integers(0, len(ops), n)
    lengths = rng.integers(sizes[0], sizes[1] + 1, n)
    return [(ops[int(k)], int(length)) for k, length in zip(kinds, lengths)]


def _cm_network(rng, truth, hosts: int, until_ms: float) -> Network:
    return Network(NetworkSettings(hosts=hosts, until_ms=until_ms, rdma_cm=True), rng, truth)


def cm_reject(rng, scale, truth):
    """Three clients' connections to the NVMe-oF port of 10.0.0.2: 10.0.0.1's is established and
    carries mixed traffic; 10.0.0.3's is refused by the server application (REJ, consumer
    reject); a second QP of 10.0.0.1 asks for TCP port 5000, where nothing listens (REJ, invalid
    service ID)."""
    net = _cm_network(rng, truth, 3, 50)
    net.connect(0, 1, Workload(_messages(rng, _count(24, scale)), qd=2, gap_ns=2000))
    refused, _ = net.connect(2, 1, Workload(_messages(rng, _count(6, scale), ("WRITE",)), qd=2))
    stray, _ = net.connect(0, 1, Workload(_messages(rng, _count(6, scale), ("SEND",)), qd=2))
    server = net.hosts[1].cm
    server.listening, server.refuse[refused.qpn] = {NVMF_PORT}, CONSUMER_REJECT
    net.hosts[0].cm.port_of[stray.qpn] = UNUSED_PORT
    return net, [0, 2], [1]


def cm_retry(rng, scale, truth):
    """10.0.0.1 connects three QPs to 10.0.0.2 with a 1.05 ms CM response timeout and 2 CM
    retries: the server never sees the first REQ of the first (its QP1 had no receive buffer),
    answers the resent one; it MRAs the second's REQ and answers 5 ms later; it never sees the
    third's REQs: sent three times, then the client gives up."""
    net = _cm_network(rng, truth, 2, 50)
    lost, _ = net.connect(0, 1, Workload(_messages(rng, _count(12, scale)), qd=2, gap_ns=2000))
    late, _ = net.connect(0, 1, Workload(_messages(rng, _count(12, scale)), qd=2, gap_ns=2000))
    never, _ = net.connect(0, 1, Workload(_messages(rng, _count(6, scale)), qd=2))
    client, server = net.hosts[0].cm, net.hosts[1].cm
    client.cm_timeout, client.max_retries = RETRY_TIMEOUT, RETRY_MAX
    server.ignore.update({lost.qpn: 1, never.qpn: RETRY_MAX + 1})
    server.slow[late.qpn] = (LATE_MS * PS_PER_MS, MRA_TIMEOUT)
    return net, [0], [1]


def cm_slow_setup(rng, scale, truth):
    """10.0.0.1 connects two QPs to 10.0.0.2: the server accepts the first at once and the second
    150 ms later (a busy server application calling rdma_accept late; no MRA, and the REQ's 4.3 s
    CM response timeout has not run out: no resend)."""
    net = _cm_network(rng, truth, 2, 300)
    net.connect(0, 1, Workload(_messages(rng, _count(8, scale)), qd=2, gap_ns=2000))
    slow, _ = net.connect(0, 1, Workload(_messages(rng, _count(8, scale)), qd=2, gap_ns=2000))
    net.hosts[1].cm.slow[slow.qpn] = (SLOW_MS * PS_PER_MS, None)
    return net, [0], [1]


REJECT_SUMMARY = ("RDMA CM to the NVMe-oF port of 10.0.0.2: one client's connection established with mixed "
                  "traffic, another's refused by the server application (REJ consumer reject, 28), a REQ to "
                  "TCP port 5000 where nothing listens (REJ invalid service ID, 8)")
RETRY_SUMMARY = ("RDMA CM with a 1.05 ms CM response timeout and 2 retries: a REQ the server never saw, resent "
                 "with its transaction id and answered; a REQ MRAed and answered 5 ms later; a REQ never "
                 "answered, sent three times, then given up")
SLOW_SUMMARY = ("RDMA CM: the server accepts one connection at once and the other 150 ms after its REQ "
                "(no MRA, no resend): a slow connection set-up")

CM_SCENARIOS = (
    Scenario("cm-reject", REJECT_SUMMARY, cm_reject, "sender", ("cm_reject",)),
    Scenario("cm-retry", RETRY_SUMMARY, cm_retry, "sender", ("cm_retry",)),
    Scenario("cm-slow-setup", SLOW_SUMMARY, cm_slow_setup, "sender", ("cm_slow_setup",)),
)
