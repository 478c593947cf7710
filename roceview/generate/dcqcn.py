"""DCQCN end-host halves, simplified (Zhu et al., SIGCOMM 2015; RoCEv2 A17.9).

Notification point (NP, the receiver): on a CE-marked packet it sends a CNP to the
sender's QP, at most one per QP per `min_time_between_cnps` (the NIC's
`np_min_time_between_cnps`). Reaction point (RP, the sender): a CNP cuts the rate by
alpha/2 (alpha tracks how often CNPs come); without CNPs the rate recovers toward the line
rate, halving the distance every `recovery_period` (DCQCN fast recovery), computed lazily.

The RP applies a cut `reaction_ps` after the CNP reaches it (the NIC's CNP handling: a few
microseconds on real NICs, none in the paper's model), and an RP that does not react
(`reacts=False`: DCQCN off for the priority, or a broken RP) counts CNPs and keeps its rate.
Each CNP's outcome is returned for the truth: the rate just before the cut and after it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from roceview.generate.simulator import PS_PER_US


@dataclass
class ReactionPoint:
    line_gbps: float
    g: float = 1 / 16                      # alpha gain
    min_gbps: float = 1.0
    rate_reduce_period: int = 4 * PS_PER_US  # at most one cut per period
    recovery_period: int = 55 * PS_PER_US
    reaction_ps: int = 0                   # CNP arrival -> the rate limiter applies the cut
    reacts: bool = True                    # False: CNPs are counted, the rate never changes
    alpha: float = 1.0
    cuts: int = 0
    # the cuts scheduled, oldest first: (when it takes effect, the rate right after it); with a
    # reaction delay longer than the rate-reduce period several wait at once. The older ones
    # than the newest in effect are dropped as time passes (bounded by delay / period).
    schedule: list = field(default_factory=list)

    def rate(self, now: int) -> float:
        """The limiter's rate at `now` (which may be ahead of the simulation: a pending cut)."""
        last, cut = -1, 0.0
        for when, after in self.schedule:
            if when > now:
                break
            last, cut = when, after
        if last < 0:
            return self.line_gbps
        halvings = (now - last) / self.recovery_period
        return self.line_gbps - (self.line_gbps - cut) * 0.5 ** halvings

    def on_cnp(self, now: int) -> dict:
        """React to a CNP that arrived at `now`: at most one cut per rate_reduce_period. Returns
        the CNP's outcome: when the cut takes effect (None: no cut) and the rate before and after."""
        while len(self.schedule) > 1 and self.schedule[1][0] <= now:
            self.schedule.pop(0)                 # superseded by a later cut already in effect
        at = now + self.reaction_ps
        before = self.rate(at)
        outcome = {"cut_ps": None, "rate_before_gbps": before, "rate_after_gbps": before}
        if not self.reacts or (self.schedule and at - self.schedule[-1][0] < self.rate_reduce_period):
            return outcome
        self.alpha = (1 - self.g) * self.alpha + self.g
        after = max(self.min_gbps, before * (1 - self.alpha / 2))
        self.schedule.append((at, after))
        self.cuts += 1
        outcome.update(cut_ps=at, rate_after_gbps=after)
        return outcome


@dataclass
class NotificationPoint:
    enabled: bool = True
    min_time_between_cnps: int = 4 * PS_PER_US
    last_cnp: dict | None = None

    def should_send(self, qpn: int, now: int) -> bool:
        if not self.enabled:
            return False
        last = (self.last_cnp or {}).get(qpn)
        if last is not None and now - last < self.min_time_between_cnps:
            return False
        self.last_cnp = self.last_cnp or {}
        self.last_cnp[qpn] = now
        return True
