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

from dataclasses import dataclass

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
    cut_gbps: float = 0.0                  # rate right after the last cut
    last_cut: int = -1                     # when the last cut takes effect (may be ahead of now)
    cuts: int = 0
    prior: tuple = (-1, 0.0)               # (last_cut, cut_gbps) before the last cut took effect

    def rate(self, now: int) -> float:
        last, cut = (self.last_cut, self.cut_gbps) if now >= self.last_cut else self.prior
        if last < 0:
            return self.line_gbps
        halvings = (now - last) / self.recovery_period
        return self.line_gbps - (self.line_gbps - cut) * 0.5 ** halvings

    def on_cnp(self, now: int) -> dict:
        """React to a CNP that arrived at `now`: at most one cut per rate_reduce_period. Returns
        the CNP's outcome: when the cut takes effect (None: no cut) and the rate before and after."""
        at = now + self.reaction_ps
        before = self.rate(at)
        outcome = {"cut_ps": None, "rate_before_gbps": before, "rate_after_gbps": before}
        if not self.reacts or (self.last_cut >= 0 and at - self.last_cut < self.rate_reduce_period):
            return outcome
        self.alpha = (1 - self.g) * self.alpha + self.g
        self.prior = (self.last_cut, self.cut_gbps)
        self.cut_gbps = max(self.min_gbps, before * (1 - self.alpha / 2))
        self.last_cut = at
        self.cuts += 1
        outcome.update(cut_ps=at, rate_after_gbps=self.cut_gbps)
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
