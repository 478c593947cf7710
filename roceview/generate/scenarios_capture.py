"""Capture-path scenarios: the traffic of a scenario with network loss (scenarios.py passes
network-loss's builder: a few NAKs and go-back-N resends), captured in a way one synchronised
capture point never shows, so that an analyzer can be held to the counts one point would give.

* two-point-mirror: one mirror on the sender's leaf, one on the receiver's, into one capture file:
  every frame twice, the receiver leaf's copy 3.7 us after the sender leaf's for sender -> receiver
  frames and 1.3 us before it for receiver -> sender ones (ACKs, NAKs, READ responses). The fabric
  between the leaves is 2.5 us long each way (the switch's paths, switch.py) and the receiver
  leaf's clock 1.2 us ahead: 2.5 + 1.2 and -2.5 + 1.2. Without that path the receiver leaf would
  record a response 5 us - RTT before the request it answers; with it each point's own copies are
  in causal order. The loss point stands for the receiver leaf's egress toward the receiver, after
  both mirrors, so both points see every frame (its drops are stamped at switch ingress).
* tap-skew: a TAP on the sender's link, its two directions stamped by two capture ports whose
  clocks are 3 us apart: the receiver side's frames are stamped 3 us early, the sender's true.
  Every frame once; an ACK can now appear before the request it answers.

The simulator runs the wrapped scenario's model with the same seed: tap-skew's frames are
network-loss's, the receiver direction restamped; two-point-mirror's longer fabric changes the
timing, and with it which ACKs the responder coalesces (22 at seed 0 against network-loss's 20;
drops, NAKs and resends were the same at seeds 0-39). `truth.capture_points` records the layout and what one point shows per flow (capture_points.py).
With `--mirror receiver` the points' times are taken at the receiver's link, after the loss point:
both mirrors then see the gaps (the loss is before both), the TAP is on the receiver's link.
"""
from __future__ import annotations

from roceview.generate.capture_points import SkewedTap, TwoPoints
from roceview.generate.simulator import PS_PER_NS

TWO_POINT_PATH_NS = 2_500                # the fabric between the two leaves, each way
TWO_POINT_CLOCK_NS = 1_200               # the receiver leaf's clock ahead of the sender leaf's
# the receiver leaf's copy minus the sender leaf's: sender -> receiver frames, receiver -> sender ones
TWO_POINT_OFFSETS_NS = (TWO_POINT_PATH_NS + TWO_POINT_CLOCK_NS, TWO_POINT_CLOCK_NS - TWO_POINT_PATH_NS)
TAP_SKEW_NS = -3_000                     # stamped minus true, on the receiver side's direction


def _captured_by(traffic, points, *args, path_ns: int = 0):
    """A builder: `traffic`'s (rng, scale, truth) -> (net, senders, receivers), every RoCE frame
    `path_ns` longer in the fabric (both ways: each QP's UDP source port hashes onto a path that
    long), the mirror's copies stamped by `points`(net, senders, receivers, *args)."""
    def build(rng, scale, truth):
        net, senders, receivers = traffic(rng, scale, truth)
        if path_ns:
            for host in net.hosts:
                for qp in host.qps.values():
                    net.switch.path_delay_ps[qp.sport] = path_ns * PS_PER_NS
        net.mirror.points = points(net, senders, receivers, *args)
        return net, senders, receivers
    return build


def two_point_mirror(traffic):
    return _captured_by(traffic, TwoPoints, TWO_POINT_OFFSETS_NS, TWO_POINT_PATH_NS, path_ns=TWO_POINT_PATH_NS)


def tap_skew(traffic):
    return _captured_by(traffic, SkewedTap, TAP_SKEW_NS)


TWO_POINT_SUMMARY = ("as network-loss with 2.5 us of fabric between the leaves, captured by two mirrors "
                     "into one file, one on each leaf (clock 1.2 us ahead), the loss point after both: "
                     "every frame twice, the receiver leaf's copy +3.7 us (sender -> receiver) or -1.3 us "
                     "(receiver -> sender) from the sender leaf's, the downstream copy's TTL one less")
TAP_SKEW_SUMMARY = ("as network-loss, captured by a TAP on the sender's link whose two directions are "
                    "stamped by capture ports with clocks 3 us apart: the receiver side's frames "
                    "(ACKs, NAKs, READ responses) stamped 3 us early, each frame once")
