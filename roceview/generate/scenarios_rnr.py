"""RNR scenarios whose QPs RDMA CM sets up first: the REQ and the REP carry each requester's RNR
Retry Count (IBTA 12.6.5, 12.6.8), so the analysis can confirm an RNR exhaustion from what
the two sides agreed on rather than from the silence after it. Builders and summaries, as
scenarios_ops.py exports them: scenarios.py makes the Scenario entries."""
from __future__ import annotations

from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import QpSettings, Workload

RNR_RETRY = 3                 # the client's rnr_retry: 3 resends after RNR NAKs, the 4th NAK ends the QP
REPOST_NS = 8_000             # the receiving application reposts one receive WQE this often ...
WRITER_GAP_NS = 500_000       # ... then hangs, while another QP writes on, one WRITE this often

RNR_EXHAUSTED_CM_SUMMARY = (
    "as rnr-exhausted, each QP set up by RDMA CM first (the REQ and REP carry rnr_retry_count 3): "
    "the receiving application stops posting receive WQEs, 4 RNR NAKs on one PSN, the requester gives "
    "up (RNR retry exceeded, QP to Error) while another QP writes on for 15 ms")


def rnr_exhausted_cm(rng, scale, truth):
    """SENDs from 10.0.0.1 with rnr_retry 3 and an RNR timer of 0.04 ms; 8 receive WQEs posted up
    front, one more every REPOST_NS for half the messages, then none: the next SEND gets 4 RNR
    NAKs and the requester gives up. A second QP writes every WRITER_GAP_NS, so the capture goes
    on long after the first fell silent."""
    net = Network(NetworkSettings(hosts=2, until_ms=100, rdma_cm=True), rng, truth)
    n = max(1, round(40 * scale))
    lengths = rng.integers(256, 2049, n)
    qs = QpSettings(rnr_timer_code=4, rnr_retry=RNR_RETRY)
    _, responder = net.connect(0, 1, Workload([("SEND", int(x)) for x in lengths], qd=8), qs)
    responder.responder.credits = 8
    net.every(REPOST_NS, n // 2, lambda: responder.responder.post_receives(1))
    writes = rng.integers(256, 4097, max(1, round(30 * scale)))
    net.connect(0, 1, Workload([("WRITE", int(x)) for x in writes], qd=1, gap_ns=WRITER_GAP_NS))
    return net, [0], [1]
