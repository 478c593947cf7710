"""DCQCN end-host halves, simplified (Zhu et al., SIGCOMM 2015; RoCEv2 A17.9).

Notification point (NP, the receiver): on a CE-marked packet it sends a CNP to the
sender's QP, at most one per QP per `min_time_between_cnps` (the NIC's
`np_min_time_between_cnps`). Reaction point (RP, the sender): a CNP cuts the rate by
alpha/2 (alpha tracks how often CNPs come); without CNPs the rate recovers toward the line
rate, halving the distance every `recovery_period` (DCQCN fast recovery), computed lazily.
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
    alpha: float = 1.0
    cut_gbps: float = 0.0                  # rate right after the last cut
    last_cut: int = -1
    cuts: int = 0

    def rate(self, now: int) -> float:
        if self.last_cut < 0:
            return self.line_gbps
        halvings = (now - self.last_cut) / self.recovery_period
        return self.line_gbps - (self.line_gbps - self.cut_gbps) * 0.5 ** halvings

    def on_cnp(self, now: int) -> None:
        if self.last_cut >= 0 and now - self.last_cut < self.rate_reduce_period:
            return
        current = self.rate(now)
        self.alpha = (1 - self.g) * self.alpha + self.g
        self.cut_gbps = max(self.min_gbps, current * (1 - self.alpha / 2))
        self.last_cut = now
        self.cuts += 1


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
