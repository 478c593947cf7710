"""What a scenario declares: its name, what it models, how to build it, where the mirror is,
and the finding kinds an analyzer must report on its capture (`expected`), may report (side
effects, `tolerated`) and must not (`forbidden`: every other kind of ALL_KINDS). Each
scenarios_*.py module lists its own; scenarios.py gathers them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ALL_KINDS = ("network_loss", "capture_loss", "timeout_retransmit", "rnr", "remote_error",
             "pfc_storm", "pfc_pause", "pfc_without_ecn", "incast", "ecn_congestion",
             "ecn_not_enabled", "cnp_missing", "priority_mismatch", "slow_receiver", "bad_icrc",
             "roce_version_mixed", "link_speed_mismatch",
             # psn_reuse is the false finding a wrong path MTU causes
             "psn_reuse", "duplicate_frames", "ack_unsent_psn", "pmtu_mismatch", "reordering",
             # a capture with more than one capture point (every frame again, offset), and one
             # whose two directions' clocks disagree
             "capture_points", "clock_skew",
             # RDMA READs held at the initiator depth RDMA CM negotiated; RDMA CM's faults
             "read_depth_limited", "cm_reject", "cm_retry", "cm_slow_setup",
             # DCQCN: a sender that ignores CNPs, a receiver that sends them too often
             "cnp_ignored", "cnp_excess",
             # PFC forensics: a switch pausing before ECN marks, a NIC sending while paused, a
             # flow held by pauses meant for another receiver's congestion
             "pfc_before_ecn", "pfc_violation", "hol_victim")


@dataclass
class Scenario:
    name: str
    summary: str
    build: Callable            # (rng, scale, truth) -> (Network, sender hosts, receiver hosts)
    mirror: str                # default mirror side: "sender" | "receiver"
    expected: tuple
    tolerated: tuple = ()

    @property
    def forbidden(self) -> tuple:
        return tuple(k for k in ALL_KINDS if k not in self.expected and k not in self.tolerated)
