"""Scenarios for PFC forensics: whether ECN acted before PFC, a NIC that sends on a paused
priority, a flow held by pauses meant for another receiver's congestion (head-of-line blocking).

The ECN / PFC order: the switch CE-marks on the depth of an egress queue (RED: Kmin, Kmax) and
pauses an ingress port when the bytes it has buffered pass XOFF. Healthy thresholds put marking
well below XOFF: the senders' DCQCN slows them before any pause (truth `firsts`: the first CE mark,
CNP and XOFF). Inverted (XOFF below Kmin), the switch pauses first; CE marks come later, once the
egress queue, fed by several paused ingresses and what was already on the wire, passes Kmin.

The violator and the victim run on a routed ToR (NetworkSettings.routed): a host's frames go to
its switch port's MAC, which is also where that port's pauses come from, so the frames a pause
holds are those addressed to the pauser's MAC. Their truth: `pfc_violations`, `victims`
(pause_watch.py). The mirror is on the senders' links: the switch's pauses and the traffic they
hold cross the same links.
"""
from __future__ import annotations

from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import Workload
from roceview.generate.scenario import Scenario
from roceview.generate.simulator import pause_quanta_ps
from roceview.generate.switch import SwitchSettings

KIB = 1024
# A NIC must stop sending on a priority within a bound after a PFC frame arrives; the issue
# quotes 905 pause quanta at 400 G. The violator's frames are listed only past 905 quanta at the
# link speed (4.6 us at 100 G): the loosest bound in quanta the issue names, so each listed frame
# violates whichever bound an analyzer takes for the speed.
RESPONSE_BOUND_QUANTA = 905
VIOLATOR_LAG_NS = 12_000     # the violator acts on a pause 12 us after it arrived
JOINERS, JOIN_EVERY_NS = 8, 5_000


def _count(n: int, scale: float, least: int = 1) -> int:
    """n messages at `scale`, never fewer than `least`: below that the fault would not arise."""
    return max(least, round(n * scale))


def _writes(rng, n: int, sizes: tuple[int, int] = (24 * KIB, 40 * KIB)) -> list:
    return [("WRITE", int(x)) for x in rng.integers(sizes[0], sizes[1] + 1, n)]


def _joining_incast(rng, scale, truth, sw: SwitchSettings):
    """Eight hosts join an incast to the ninth one every 5 us, each writing three 24-40 KiB
    messages (2 outstanding): the queue builds as they join."""
    net = Network(NetworkSettings(hosts=JOINERS + 1, until_ms=50, switch=sw), rng, truth)
    for s in range(JOINERS):
        w = Workload(_writes(rng, _count(3, scale, 3)), qd=2,
                     start_ns=5_000 + s * JOIN_EVERY_NS + int(rng.integers(0, 300)))
        net.connect(s, JOINERS, w)
    return net, list(range(JOINERS)), [JOINERS]


def ecn_before_pfc(rng, scale, truth):
    """Kmin 10 KB < Kmax 40 KB < XOFF 64 KB per ingress port: marking starts once two senders
    share the receiver's port (~12 us), the CNPs cut the senders' rates, and only the later
    joiners, each at line rate until its first CNP, take an ingress past XOFF (~25 us)."""
    sw = SwitchSettings(kmin_bytes=10_000, kmax_bytes=40_000, xoff_bytes=64_000, xon_bytes=32_000)
    return _joining_incast(rng, scale, truth, sw)


def ecn_pfc_inverted(rng, scale, truth):
    """The same incast with XOFF 10 KB per ingress port below Kmin 48 KB of the egress queue:
    the first two senders are paused (~12 us) long before the queue could be marked; once
    five or more paused ingresses hold up to XOFF each, plus what was on the wire when the
    XOFFs left, the queue passes Kmin and CE marks follow (~18-30 us)."""
    sw = SwitchSettings(kmin_bytes=48_000, kmax_bytes=64_000, xoff_bytes=10_000, xon_bytes=5_000)
    return _joining_incast(rng, scale, truth, sw)


def pfc_violator(rng, scale, truth):
    """Routed ToR without ECN marking (a PFC-only fabric); 10.0.0.1-3 each stripe 24-40 KiB
    writes over two storage targets, 10.0.0.4 and 10.0.0.5 (1.5:1 at each port), so each
    sender's link carries both targets' ACKs; the switch pauses the senders' ingress ports
    again and again. 10.0.0.1's NIC acts on each PFC frame only 12 us after it arrived: it keeps
    sending on priority 3 (it has the most to send: 4 messages per target, the others 2)."""
    sw = SwitchSettings(ecn_marking=False, xoff_bytes=24_000, xon_bytes=12_000)
    net = Network(NetworkSettings(hosts=5, until_ms=50, switch=sw, routed=True), rng, truth)
    for s in range(3):
        n = _count(4, scale, 4) if s == 0 else _count(2, scale, 2)
        for target in (3, 4):
            w = Workload(_writes(rng, n), qd=2, start_ns=5_000 + int(rng.integers(0, 300)))
            net.connect(s, target, w)
    bound_ps = pause_quanta_ps(RESPONSE_BOUND_QUANTA, net.s.gbps)
    net.pause_lag(0, VIOLATOR_LAG_NS, bound_ps // 1000)
    return net, [0, 1, 2], [3, 4]


def hol_victim(rng, scale, truth):
    """Routed ToR; 10.0.0.1-4 write to 10.0.0.5 at once (incast; ECN from Kmin 2 KB, Kmax 20 KB, Pmax
    0.5, well below XOFF 40 KB per ingress: CNPs reach 10.0.0.1 before the pauses do); 10.0.0.1 also writes
    8-16 KiB messages to 10.0.0.6, which nothing else loads, one at a time on the same priority. The incast fills the switch's
    buffer from 10.0.0.1's ingress too: the switch pauses priority 3 toward 10.0.0.1, and its
    writes to 10.0.0.6 wait with the rest. The mirror is 10.0.0.1's link (it carries 10.0.0.5's
    and 10.0.0.6's frames: the switch's MAC there sends for two hosts, a router's)."""
    sw = SwitchSettings(kmin_bytes=2_000, kmax_bytes=20_000, pmax=0.5, xoff_bytes=40_000, xon_bytes=20_000)
    net = Network(NetworkSettings(hosts=6, until_ms=50, switch=sw, routed=True), rng, truth)
    for s in range(4):
        w = Workload(_writes(rng, _count(6, scale, 4)), qd=2, start_ns=5_000 + int(rng.integers(0, 300)))
        net.connect(s, 4, w)
    # one message at a time, 1 us apart: the writes to 10.0.0.6 go on while the incast lasts
    side = Workload(_writes(rng, _count(12, scale, 10), (8 * KIB, 16 * KIB)), qd=1, gap_ns=1_000, start_ns=5_000)
    net.connect(0, 5, side)
    net.watch_pauses(0)
    return net, [0], [4, 5]


ECN_FIRST_SUMMARY = ("10.0.0.1-8 join an incast to 10.0.0.9 one every 5 us; ECN marking (Kmin 10 KB, Kmax 40 KB) "
                     "below XOFF (64 KB per ingress): CE marks, CNPs and DCQCN cuts first, the switch's pauses "
                     "10 us or more later")
INVERTED_SUMMARY = ("as ecn-before-pfc with the thresholds inverted, XOFF 10 KB per ingress below Kmin 48 KB: "
                    "the switch pauses the senders before any CE mark; CE marks follow once the paused "
                    "ingresses' bytes take the egress queue past Kmin")
VIOLATOR_SUMMARY = ("routed ToR, no ECN marking; 10.0.0.1-3 stripe writes over 10.0.0.4 and 10.0.0.5 (1.5:1 "
                    "each); the switch pauses priority 3 toward the senders, and 10.0.0.1's NIC obeys each pause "
                    "only 12 us after it arrived: it sends on the paused priority (truth `pfc_violations`)")
VICTIM_SUMMARY = ("routed ToR; 10.0.0.1-4 write to 10.0.0.5 at once (ECN marks first); 10.0.0.1 also writes to "
                  "idle 10.0.0.6 on the same priority: the incast gets 10.0.0.1's ingress paused and its writes to "
                  "10.0.0.6 wait too (truth `victims`); mirror on 10.0.0.1's link")

PFC_SCENARIOS = (
    Scenario("ecn-before-pfc", ECN_FIRST_SUMMARY, ecn_before_pfc, "sender", ("ecn_congestion",),
             ("pfc_pause", "incast")),
    Scenario("ecn-pfc-inverted", INVERTED_SUMMARY, ecn_pfc_inverted, "sender", ("pfc_before_ecn", "pfc_pause"),
             ("ecn_congestion", "incast")),
    Scenario("pfc-violator", VIOLATOR_SUMMARY, pfc_violator, "sender", ("pfc_violation", "pfc_pause"),
             ("pfc_without_ecn",)),
    Scenario("hol-victim", VICTIM_SUMMARY, hol_victim, "sender", ("hol_victim", "pfc_pause"),
             ("ecn_congestion", "incast")),
)
