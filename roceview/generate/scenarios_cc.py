"""Scenarios for congestion control forensics: how each sender's DCQCN reaction point answers the
CNPs it gets (dcqcn.py), with the truth of every CNP (truth `cnps`: when it reached the sender's
NIC, whether and when it cut the rate, the rate before and after).

Two senders write long messages to one receiver over 100 Gb/s links: 2:1 at the receiver's
port, so the switch queue passes Kmin, CE marks reach the receiver and its CNPs go back. The
messages are long (64 KiB, 64 packets at path MTU 1024) and several are posted at once, so a
sender is backlogged: the spacing of its packets is its rate limiter's, and a cut shows within
a message. The hosts sit on a ToR (20 ns links). The mirror is the senders' links (before the
switch's queues): it sees each sender's packets as it paced them and the CNPs as they come back.
"""
from __future__ import annotations

from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import QpSettings, Workload

MESSAGE = 64 * 1024
REACTION_NS = 2_000        # CNP -> rate cut on a healthy reaction point (a few us on real NICs)
SLOW_REACTION_NS = 50_000  # a reaction point that takes 50 us to apply a cut
SLOW_CNP_SPACING_NS = 60_000  # dcqcn-slow: longer than the reaction delay (see dcqcn_slow)
# ToR-attached hosts (4 m of cable): the mirror stamps a sender's packets one propagation delay
# after they leave it and the CNPs one before they reach it, so the capture point's offset from
# the NIC (2 x 20 ns) stays small against a 2 us reaction delay
PROP_NS = 20


def _count(n: int, scale: float) -> int:
    return max(1, round(n * scale))


def _two_senders(rng, scale, truth, senders: tuple[QpSettings, QpSettings], min_cnp_ns: int = 4000,
                 messages: tuple[int, int] = (12, 12)):
    settings = NetworkSettings(hosts=3, until_ms=50, min_time_between_cnps_ns=min_cnp_ns, prop_ns=PROP_NS)
    net = Network(settings, rng, truth)
    for host, (settings, n) in enumerate(zip(senders, messages)):
        writes = [("WRITE", MESSAGE)] * _count(n, scale)
        net.connect(host, 2, Workload(writes, qd=4, start_ns=int(rng.integers(0, 500))), settings)
    return net, [0, 1], [2]


def dcqcn_reaction(rng, scale, truth):
    """Both reaction points cut their rate 2 us after each CNP (at most one cut per 4 us)."""
    healthy = QpSettings(rp_reaction_ns=REACTION_NS)
    return _two_senders(rng, scale, truth, (healthy, healthy))


def dcqcn_ignored(rng, scale, truth):
    """10.0.0.1's reaction point ignores CNPs (DCQCN off for its priority, or broken): its rate
    never changes; 10.0.0.2's cuts its rate 2 us after each CNP. 10.0.0.1 has twice the messages:
    at line rate it would otherwise be done before the 100 us a CNP is judged over (analysis/cc.py)."""
    return _two_senders(rng, scale, truth, (QpSettings(rp_reacts=False), QpSettings(rp_reaction_ns=REACTION_NS)),
                        messages=(24, 12))


def dcqcn_slow(rng, scale, truth):
    """Both reaction points apply each cut 50 us after the CNP. The receiver sends a CNP at most
    every 60 us per QP, so that no cut is pending when the next CNP comes: with CNPs every 4 us a
    dozen cuts would wait at once (dcqcn.py keeps them all), and the capture could not say which
    CNP each answers."""
    slow = QpSettings(rp_reaction_ns=SLOW_REACTION_NS)
    return _two_senders(rng, scale, truth, (slow, slow), min_cnp_ns=SLOW_CNP_SPACING_NS)


def cnp_excess(rng, scale, truth):
    """The receiver's notification point sends a CNP for every CE-marked packet: no minimum
    spacing (mlx5's np min_time_between_cnps set to 0), where the default allows one per QP per
    4 us."""
    healthy = QpSettings(rp_reaction_ns=REACTION_NS)
    return _two_senders(rng, scale, truth, (healthy, healthy), min_cnp_ns=0)


REACTION_SUMMARY = ("10.0.0.1 and 10.0.0.2 write 64 KiB messages to 10.0.0.3 (2:1, 100 Gb/s); the CE marks' CNPs "
                    "come back and each sender's DCQCN reaction point cuts its rate 2 us after a CNP")
IGNORED_SUMMARY = ("as dcqcn-reaction, but 10.0.0.1's reaction point ignores CNPs: its rate never changes")
SLOW_SUMMARY = "as dcqcn-reaction, each cut applied 50 us after its CNP (CNPs at most every 60 us per QP)"
EXCESS_SUMMARY = ("as dcqcn-reaction, the receiver sends a CNP for every CE-marked packet (no minimum spacing; "
                  "mlx5's default allows one per QP per 4 us)")
