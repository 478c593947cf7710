"""Diagnoser thresholds: documented defaults, overridable from a TOML file (`--config FILE.toml`).

The file holds a `[diagnose]` table (or the keys at top level) with any of the fields below:

    [diagnose]
    storm_ms = 100.0          # PFC watchdog: continuous pause that is a storm
    pause_warning_share = 0.05

Unknown keys, wrong types and values out of range (RANGES) are a BadInput (one line naming the
key), so a typo never silently keeps a default.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from roceview.errors import BadInput
from roceview.units import article


@dataclass(frozen=True)
class Config:
    # --- PFC / PAUSE (IEEE 802.1Qbb, 802.3x) ---------------------------------------------------
    storm_ms: float = 100.0             # continuous pause >= this is a storm (NIC/switch watchdog default)
    storm_window_ms: float = 100.0      # ... or paused >= storm_share of any window this long
    storm_share: float = 0.99
    pause_warning_share: float = 0.05   # pfc_pause is a warning when a (MAC, priority) is paused
                                        # for at least this share of the capture, else info
    link_rate_window_ms: float = 1.0    # link_speed_mismatch: a host's bit rate over this window (at
                                        # least one timeline bucket) above --link-speed ...
    link_rate_margin: float = 1.25      # ... times this (software timestamps bunch packets; Ethernet
                                        # speeds one step apart differ by >= 1.25x)
    pause_only_min_gbps: float = 10.0   # ... or PAUSE-only, no RoCE, at an assumed speed >= this
    # --- priorities ------------------------------------------------------------------------------
    trust: str = "auto"                 # how a switch maps a frame to a priority: "pcp", "dscp",
                                        # or "auto" (PCP when VLAN-tagged, else DSCP)
    dscp_to_priority: dict = field(default_factory=dict)  # {"26": 3}; default: DSCP >> 3
    pfc_priorities: list = field(default_factory=list)  # priorities PFC is enabled on (--pfc-priorities):
                                        # when given, instead of what LLDP DCBX TLVs in the capture say
    # --- ECN / DCQCN ---------------------------------------------------------------------------
    ce_warning_share: float = 0.2       # ecn_congestion is a warning above this CE share, else info
    not_ect_share: float = 0.5          # ecn_not_enabled when a source sends more Not-ECT data than this
    not_ect_min_packets: int = 100      # ... a warning from this many Not-ECT data packets, else info
    cnp_wait_us: float = 10.0           # CE marks this close to the capture end may still get a CNP
                                        # (NIC CNP latency + np_min_time_between_cnps are a few us)
    # --- incast --------------------------------------------------------------------------------
    incast_senders: int = 4             # distinct senders to one destination in one window
    incast_window_us: float = 1000.0    # the window (rounded up to the timeline bucket)
    # --- loss ----------------------------------------------------------------------------------
    nak_window_us: float = 100_000.0    # a NAK / retransmission this long after a gap answers it
    read_rerequest_span: int = 4096     # PSNs before a lost READ response a re-read may start at
    ack_timeout_floor_us: float = 100.0  # timeout_retransmit: the least delay from the original send
                                        # an ACK timeout takes (4.096 us x 2^timeout; NICs and rxe use
                                        # timeout >= 5 in practice, i.e. >= 131 us)
    # --- reading the capture again when no facts were collected -------------------------------
    reread_capture: bool = True
    max_examples: int = 5               # PSNs / frames quoted in evidence

    def priority_of_dscp(self, dscp: int) -> int:
        mapped = self.dscp_to_priority.get(str(int(dscp)))
        return int(mapped) if mapped is not None else int(dscp) >> 3


DEFAULTS = Config()
# (low, low_included, high) of each number; every float field is also checked finite
# durations at most a year, so that in ns they stay in int64 (1e16 ms overflowed: a traceback),
# and at least 1 ns (the rules' unit: under it a window was 0 ns long, a division by zero)
YEAR_MS = 365 * 86_400_000
SHARE, COUNT, FACTOR, RATE = (0.0, True, 1.0), (1, True, None), (0.0, False, None), (0.0, True, None)
DURATION_MS, DURATION_US, SPAN_US = (1e-6, True, YEAR_MS), (1e-3, True, YEAR_MS * 1000), (0.0, True, YEAR_MS * 1000)
RANGES = {"storm_ms": DURATION_MS, "storm_window_ms": DURATION_MS, "storm_share": SHARE,
          "link_rate_window_ms": DURATION_MS, "link_rate_margin": FACTOR, "pause_only_min_gbps": RATE,
          "pause_warning_share": SHARE, "ce_warning_share": SHARE, "not_ect_share": SHARE,
          "cnp_wait_us": SPAN_US, "incast_senders": COUNT, "incast_window_us": DURATION_US,
          "nak_window_us": DURATION_US, "read_rerequest_span": COUNT, "max_examples": COUNT}
_RANGE_TEXT = {SHARE: "a share from 0 to 1", COUNT: "a count >= 1", FACTOR: "a factor > 0",
               RATE: "a rate >= 0 (Gb/s)",
               DURATION_MS: f"a duration of at least 1 ns (1e-06 ms) and at most a year ({YEAR_MS:,} ms)",
               DURATION_US: f"a duration of at least 1 ns (0.001 us) and at most a year ({YEAR_MS * 1000:,} us)",
               SPAN_US: f"a duration >= 0 and at most a year ({YEAR_MS * 1000:,} us)"}


def load_config(path=None, **overrides) -> Config:
    """Defaults, then the TOML file's `[diagnose]` table (or top-level keys), then `overrides`."""
    values: dict = {}
    if path is not None:
        import tomllib  # only with --config: its import (regexes compiled) costs ~3 ms per run

        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise BadInput(f"cannot read config {path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"config {path}: {exc}") from None
        values.update(data.get("diagnose", data))
    values.update(overrides)
    return _build(values, path)


def _check_range(key: str, value, where: str) -> None:
    import math

    if key == "dscp_to_priority":
        for dscp, prio in value.items():
            if not (str(dscp).isdigit() and int(dscp) <= 63 and isinstance(prio, int)
                    and not isinstance(prio, bool) and 0 <= prio <= 7):
                raise BadInput(f"{where}dscp_to_priority maps a DSCP 0-63 to a priority 0-7 "
                               f"(got {dscp!r} = {prio!r})")
        return
    if key == "pfc_priorities":       # checked on the raw list, before it is sorted
        if not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 7 for p in value):
            raise BadInput(f"{where}pfc_priorities lists priorities 0-7, e.g. [3] (got {value!r})")
        return
    bounds = RANGES.get(key)
    if bounds is None:
        return
    low, low_ok, high = bounds
    ok = math.isfinite(value) and (value >= low if low_ok else value > low) and (high is None or value <= high)
    if not ok:
        raise BadInput(f"{where}{key} must be {_RANGE_TEXT[bounds]} (got {value!r})")


def _build(values: dict, path) -> Config:
    fields = {f.name: f for f in dataclasses.fields(Config)}
    where = f"config {path}: " if path else "config: "
    clean = {}
    for key, value in values.items():
        if key not in fields:
            raise BadInput(f"{where}unknown setting {key!r} (known: {', '.join(sorted(fields))})")
        default = getattr(DEFAULTS, key)
        if isinstance(default, bool) != isinstance(value, bool) or (
                isinstance(default, (int, float)) and not isinstance(value, (int, float))) or (
                isinstance(default, (str, dict)) and not isinstance(value, type(default))) or (
                isinstance(default, list) and not isinstance(value, (list, tuple))):
            raise BadInput(f"{where}{key} must be {article(type(default).__name__)} "
                           f"(got {value!r})")
        clean[key] = float(value) if isinstance(default, float) else value
    for key, value in clean.items():
        _check_range(key, value, where)
    if "pfc_priorities" in clean:
        clean["pfc_priorities"] = sorted(set(clean["pfc_priorities"]))
    if clean.get("trust", "auto") not in ("auto", "pcp", "dscp"):
        raise BadInput(f"{where}trust must be auto, pcp or dscp (got {clean['trust']!r})")
    return Config(**clean)
