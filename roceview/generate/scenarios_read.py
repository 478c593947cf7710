"""READ response loss: the switch drops chosen RDMA READ RESPONSE packets on their way back to
the requester, which re-reads from the first missing PSN (the READ request's PSN set to it, VA
advanced and DMA length cut by what arrived) and goes back N from there (requester.py). Lost
responses are network loss: mirrored at the responder's link, before the loss point, the capture
shows every response once, then the re-read request and the responses again."""
from __future__ import annotations

from roceview.generate import ibta as ib
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.switch import SwitchSettings

# which responses the switch drops: the k-th READ RESPONSE MIDDLE / LAST it forwards. The first
# READ has 2-6 MIDDLEs (4-8 packets): the 2nd is its own; ten READs have at least 20, and the 20th
# comes after the first gap's go-back-N has ended (in each of seeds 0-39), so it is a gap of its
# own rather than a response the requester discards while re-reading (go-back-N resends the READs
# after a gap whole: a loss among their first responses would never be noticed)
MIDDLE_DROPS = ((ib.RDMA_READ_RESPONSE_MIDDLE, 2), (ib.RDMA_READ_RESPONSE_MIDDLE, 20))
LAST_DROPS = ((ib.RDMA_READ_RESPONSE_LAST, 2), (ib.RDMA_READ_RESPONSE_LAST, 5))


def _count(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def _network(rng, truth, drops) -> Network:
    return Network(NetworkSettings(hosts=2, until_ms=50, switch=SwitchSettings(drop_kth=drops)), rng, truth)


def read_response_loss_middle(rng, scale, truth):
    """Two READs of 4-8 KiB (4-8 packets at PMTU 1024) then a SEND of 64 B-2 KiB, five times,
    4 outstanding; the switch drops the 2nd and the 20th READ RESPONSE MIDDLE: the next
    MIDDLE or the LAST reaches the requester with a PSN past the one it expects."""
    messages = [("SEND", int(rng.integers(64, 2049))) if k % 3 == 2 else ("READ", int(rng.integers(4096, 8193)))
                for k in range(_count(15, scale))]
    net = _network(rng, truth, MIDDLE_DROPS)
    net.connect(0, 1, Workload(messages, qd=4, gap_ns=1000))
    return net, [0], [1]


def read_response_loss_last(rng, scale, truth):
    """A READ of 3-8 KiB, then a one-packet SEND, in turn, 2 outstanding: while a READ is
    incomplete only the SEND after it is in flight. The switch drops the 2nd and the 5th READ
    RESPONSE LAST; no later response of that READ reveals it, the ACK of the SEND (its PSN past
    the READ's) does: an implied NAK."""
    messages = []
    for _ in range(_count(8, scale)):
        messages += [("READ", int(rng.integers(3000, 8193))), ("SEND", int(rng.integers(64, 1025)))]
    net = _network(rng, truth, LAST_DROPS)
    net.connect(0, 1, Workload(messages, qd=2, gap_ns=1000))
    return net, [0], [1]


MIDDLE_SUMMARY = ("READs of 4-8 KiB (PMTU 1024) interleaved with SENDs, 4 outstanding; the switch "
                  "drops the 2nd and 20th READ RESPONSE MIDDLE toward the requester, which sees the "
                  "next response out of sequence, re-reads from the missing PSN and goes back N; "
                  "mirror at the responder, before the loss point")
LAST_SUMMARY = ("READs of 3-8 KiB each followed by a SEND, 2 outstanding; the switch drops the 2nd "
                "and 5th READ RESPONSE LAST; the SEND's ACK (PSN past the READ) is an implied NAK: "
                "the requester re-reads the last PSN and resends the SEND; mirror at the responder")
