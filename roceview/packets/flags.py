"""Per-packet analysis flags: the bits of the packets table's `flags` column, and the display
filter names (`roceview.<name>`) that test them.

This module only DEFINES the bits (one place, so the analysis that sets them, the display
filter that reads them and the renderers that print them agree). The analysis fills the
`flags` column (roceview/analysis/packet_flags.py) when asked for (`dissect`,
`read_packets(analysis=True)`, `analyze(packets=True)`); a Batch without it fails a filter
on a flag with a clear message (roceview.filter), except the two flags the packets table
decides by itself (bad ICRC, truncated), which the filter reads from their columns.

Like Wireshark's `tcp.analysis.*` fields, a flag is present or absent on a packet: a filter
`roceview.gap` matches packets with the bit set, `!roceview.gap` the others. A flag may name a
`value_column` (e.g. how many PSNs are missing): when the Batch has that column the filter
compares it (`roceview.gap > 8`); otherwise a flag's value is 1.

The bit numbers are documented in docs/columns.md: add-never-renumber.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Flag(enum.IntFlag):
    """One bit per kind of per-packet analysis finding."""
    GAP = 1 << 0                     # PSNs missing before this packet
    RETRANSMISSION = 1 << 1          # a PSN carried again
    TIMEOUT_RETRANSMISSION = 1 << 2  # ... after the local ACK timeout, no NAK
    PSN_REUSE = 1 << 3               # a PSN reused for another message
    DUPLICATE = 1 << 4               # duplicate / old PSN
    NAK = 1 << 5                     # AETH NAK (PSN sequence error, other codes)
    RNR_NAK = 1 << 6                 # AETH RNR NAK
    ECN_CE = 1 << 7                  # IP ECN = CE (RFC 3168)
    CNP = 1 << 8                     # RoCEv2 congestion notification packet (A17.9.2)
    ICRC_BAD = 1 << 9                # ICRC does not match (IBTA 7.8.1)
    TRUNCATED = 1 << 10              # frame cut before its end
    PFC_PAUSE = 1 << 11              # PFC / 802.3x frame pausing at least one priority
    PFC_RESUME = 1 << 12             # PFC / 802.3x frame with quanta 0 (XON)
    RTT_ACK = 1 << 13                # the ACK that closes an RTT sample


@dataclass(frozen=True)
class FlagField:
    """A display filter field `roceview.<name>` over one flag bit."""
    name: str
    flag: Flag
    meaning: str
    value_column: str | None = None     # the packets-table column a comparison reads, if any
    column: str | None = None           # decided by this packets-table bool column, no flags needed
    column_value: bool = True           # ... where the column has this value


FLAG_FIELDS: tuple[FlagField, ...] = (
    FlagField("gap", Flag.GAP, "PSNs missing before this packet", value_column="missing_psns"),
    FlagField("retransmission", Flag.RETRANSMISSION, "retransmission of a PSN already seen"),
    FlagField("timeout_retransmission", Flag.TIMEOUT_RETRANSMISSION, "retransmission after a timeout"),
    FlagField("psn_reuse", Flag.PSN_REUSE, "PSN reused for another message"),
    FlagField("duplicate", Flag.DUPLICATE, "duplicate or old PSN"),
    FlagField("nak", Flag.NAK, "NAK"),
    FlagField("rnr_nak", Flag.RNR_NAK, "RNR NAK"),
    FlagField("ecn_ce", Flag.ECN_CE, "ECN congestion experienced"),
    FlagField("cnp", Flag.CNP, "congestion notification packet"),
    FlagField("icrc_bad", Flag.ICRC_BAD, "ICRC does not match", column="icrc_ok", column_value=False),
    FlagField("truncated", Flag.TRUNCATED, "frame cut before its end", column="truncated"),
    FlagField("pfc_pause", Flag.PFC_PAUSE, "PFC/PAUSE frame pausing a priority"),
    FlagField("pfc_resume", Flag.PFC_RESUME, "PFC/PAUSE frame resuming a priority"),
    FlagField("rtt_ack", Flag.RTT_ACK, "ACK closing an RTT sample (value: the RTT in ns)", value_column="rtt_ns"),
)
FILTER_PREFIX = "roceview."

# `roceview.finding`: the finding kinds a packet is evidence for (docs/findings.md, "frames").
# Findings are known only once the whole capture is analyzed: `dissect` reads the capture twice
# to fill the `finding_kinds` column, bit i for FINDING_KINDS[i] (add-never-reorder; up to 64).
FINDING_FIELD = FILTER_PREFIX + "finding"
FINDING_COLUMN = "finding_kinds"
FINDING_KINDS = (
    "network_loss", "capture_loss", "timeout_retransmit", "unreliable_gap", "reordering",
    "rnr", "remote_error", "invalid_rd_request", "psn_reuse", "ack_unsent_psn", "pmtu_mismatch",
    "roce_version_mixed", "pfc_storm", "pfc_pause", "pfc_without_ecn", "slow_receiver",
    "priority_mismatch", "link_speed_mismatch", "ecn_congestion", "ecn_not_enabled", "cnp_missing",
    "incast", "duplicate_frames", "capture_points", "clock_skew", "bad_icrc", "truncated_frames",
    "timestamps_backwards", "decode_warnings", "read_depth_limited", "cm_reject", "cm_retry", "cm_slow_setup",
    "cnp_ignored", "cnp_excess", "pfc_before_ecn", "pfc_violation", "hol_victim")
