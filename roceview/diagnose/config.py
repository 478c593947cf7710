"""Diagnoser thresholds: documented defaults, overridable from a TOML file (`--config FILE.toml`).

The file holds a `[diagnose]` table (or the keys at top level) with any of the fields below:

    [diagnose]
    storm_ms = 100.0          # PFC watchdog: continuous pause that is a storm
    pause_warning_share = 0.05

Every field has a rule in RANGES (a test checks it); its type comes from its default. Unknown
keys, wrong types, values out of range, and files that are not a table of settings (not UTF-8,
over 1 MiB, nested too deep, an integer too long to read, `diagnose` not a table) are a BadInput:
one line naming the key or the problem, so a typo never silently keeps a default and nothing
reaches the rules that could crash them.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import reprlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

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
    congestion_gap_us: float = 100.0    # pfc_before_ecn: congestion episodes of a priority are split
                                        # where nothing (pause, CE mark, CNP) happens this long
    ce_evidence_lag_us: float = 1.0     # ... a CE mark reaches the capture point up to its flow's RTT
                                        # p99 + this after the switch marked it (a CNP: + the NP spacing)
    pause_response_margin_us: float = 1.0  # pfc_violation: on top of 802.3's response bound and two
                                        # frames in flight, the propagation to the station and back
    victim_paused_us: float = 5.0       # hol_victim: a flow a switch's pauses held at least this long
                                        # inside its active span (its first to last frame) ...
    victim_paused_share: float = 0.05   # ... and at least this share of that span (brief pauses of a
                                        # healthy fabric make no victim)
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
    cnp_ignored_min: int = 3            # cnp_ignored: at least this many CNPs a sender ignored ...
    cnp_ignored_share: float = 0.5      # ... and at least this share of those judged (analysis/cc.py)
    min_time_between_cnps_us: float = 0.0  # cnp_excess: the NPs' minimum CNP spacing (mlx5
                                        # np_min_time_between_cnps; 0, upstream's default: not judged)
    cnp_excess_min: int = 5             # ... at least this many CNPs to one QP closer than it
    # --- incast --------------------------------------------------------------------------------
    incast_senders: int = 4             # distinct senders to one destination in one window
    incast_window_us: float = 1000.0    # the window (rounded up to the timeline bucket)
    # --- loss ----------------------------------------------------------------------------------
    nak_window_us: float = 100_000.0    # a NAK / retransmission this long after a gap answers it
    read_rerequest_span: int = 4096     # PSNs before a lost READ response a re-read may start at
    ack_timeout_floor_us: float = 100.0  # timeout_retransmit: the least delay from the original send
                                        # an ACK timeout takes (4.096 us x 2^timeout; NICs and rxe use
                                        # timeout >= 5 in practice, i.e. >= 131 us)
    # --- RDMA CM -------------------------------------------------------------------------------
    cm_setup_ms: float = 100.0          # cm_slow_setup: a connection's first REQ to RTU longer than this
                                        # (one switch: well under 1 ms; real mlx5 user-space set-ups
                                        # 0.3-32 ms; rdma_cm's own CM response timeout is 4.3 s)
    # --- reading the capture again when no facts were collected -------------------------------
    reread_capture: bool = True
    max_examples: int = 5               # PSNs / frames quoted in evidence

    def priority_of_dscp(self, dscp: int) -> int:
        mapped = self.dscp_to_priority.get(str(int(dscp)))
        return int(mapped) if mapped is not None else int(dscp) >> 3

    def priority_table(self):
        """The analysis's form of `trust` / `dscp_to_priority` (analysis.priorities.priority_table:
        int8 [PCP + 1, DSCP + 1] -> priority, -1 none), so that sent_while_paused, paused_flows
        and priorities.csv give a frame the priority priority.priority_of gives it."""
        from roceview.analysis.priorities import priority_table

        return priority_table(self.trust, [self.priority_of_dscp(d) for d in range(64)])


DEFAULTS = Config()


class Rule(NamedTuple):
    """What a setting takes: `text` completes "KEY must be ...", `test(value)` says whether a
    value of the right type is allowed, `clean(value)` is what Config then holds."""
    text: str
    test: Callable[[Any], bool]
    clean: Callable[[Any], Any] = lambda value: value


def _between(low, low_ok: bool, high, text: str) -> Rule:
    """A number from `low` (included or not) to `high` (always finite: a float() of any allowed
    value then neither overflows nor gives inf). Compared before any float(): an 80,000-bit
    TOML hex integer is simply out of range, not an OverflowError."""
    return Rule(text, lambda v: (v >= low if low_ok else v > low) and v <= high)


# Durations at most a year, so that in ns they stay in int64 (1e16 ms overflowed: a traceback),
# and at least 1 ns (the rules' unit: under it a window was 0 ns long, a division by zero).
# Counts at most a billion and rates at most 1 Pb/s: far past any real threshold, and bounded so
# that no rule meets a number numpy cannot hold.
YEAR_MS = 365 * 86_400_000
MAX_COUNT = 1_000_000_000
SHARE = _between(0.0, True, 1.0, "a share from 0 to 1")
COUNT = _between(1, True, MAX_COUNT, f"a count from 1 to {MAX_COUNT:,}")
COUNT_OR_0 = _between(0, True, MAX_COUNT, f"a count from 0 to {MAX_COUNT:,}")
FACTOR = _between(0.0, False, 1000.0, "a factor > 0 and at most 1,000")
RATE = _between(0.0, True, 1e6, "a rate >= 0 (Gb/s) and at most 1,000,000")
DURATION_MS = _between(1e-6, True, YEAR_MS,
                       f"a duration of at least 1 ns (1e-06 ms) and at most a year ({YEAR_MS:,} ms)")
DURATION_US = _between(1e-3, True, YEAR_MS * 1000,
                       f"a duration of at least 1 ns (0.001 us) and at most a year ({YEAR_MS * 1000:,} us)")
SPAN_US = _between(0.0, True, YEAR_MS * 1000, f"a duration >= 0 and at most a year ({YEAR_MS * 1000:,} us)")
# a re-read starts within half the 24-bit PSN space: past it PSN order wraps (IBTA 9.7.5.1.1)
PSN_SPAN = _between(1, True, 1 << 23, f"a PSN count from 1 to {1 << 23:,} (half the PSN space)")


def _is_priority(p) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 7


def _dscp_of(key) -> int | None:
    """A DSCP written as a TOML key ("26", "046") or an int (the Python API); else None. Only
    ASCII digits: '\u00b2' is a digit to str.isdigit, not to int()."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key if 0 <= key <= 63 else None
    if isinstance(key, str) and re.fullmatch(r"[0-9]{1,8}", key) and int(key) <= 63:
        return int(key)
    return None


def _dscp_map_ok(mapping: dict) -> bool:
    dscps = [_dscp_of(k) for k in mapping]
    return (None not in dscps and len(set(dscps)) == len(dscps)      # "46" and "046": one DSCP twice
            and all(_is_priority(p) for p in mapping.values()))


RANGES = {
    "storm_ms": DURATION_MS, "storm_window_ms": DURATION_MS, "storm_share": SHARE,
    "pause_warning_share": SHARE, "link_rate_window_ms": DURATION_MS, "link_rate_margin": FACTOR,
    "pause_only_min_gbps": RATE, "congestion_gap_us": DURATION_US, "ce_evidence_lag_us": SPAN_US,
    "pause_response_margin_us": SPAN_US, "victim_paused_us": SPAN_US, "victim_paused_share": SHARE,
    "trust": Rule("auto, pcp or dscp", lambda v: v in ("auto", "pcp", "dscp")),
    # keys as priority_of_dscp looks them up: "046" would never be asked for
    "dscp_to_priority": Rule('a table mapping DSCPs 0-63 to priorities 0-7, e.g. { "26" = 3 }', _dscp_map_ok,
                             lambda m: {str(_dscp_of(k)): p for k, p in m.items()}),
    "pfc_priorities": Rule("a list of priorities 0-7, e.g. [3]", lambda v: all(_is_priority(p) for p in v),
                           lambda v: sorted(set(v))),
    "ce_warning_share": SHARE, "not_ect_share": SHARE, "not_ect_min_packets": COUNT_OR_0,
    "cnp_wait_us": SPAN_US, "cnp_ignored_min": COUNT, "cnp_ignored_share": SHARE,
    "min_time_between_cnps_us": SPAN_US, "cnp_excess_min": COUNT, "incast_senders": COUNT, "incast_window_us": DURATION_US,
    "nak_window_us": DURATION_US, "read_rerequest_span": PSN_SPAN, "ack_timeout_floor_us": SPAN_US,
    "cm_setup_ms": DURATION_MS,
    "reread_capture": Rule("true or false", lambda v: True),
    "max_examples": COUNT,
}
# a field with no rule yet is still type-checked and a float finite; a test requires a rule
_ANY = Rule("a finite value of its type", lambda v: not isinstance(v, float) or math.isfinite(v))
MAX_BYTES = 1 << 20     # a config is a page of thresholds; /dev/zero is refused, not read to the end


def load_config(path=None, **overrides) -> Config:
    """Defaults, then the TOML file's `[diagnose]` table (or top-level keys), then `overrides`."""
    values: dict = {}
    if path is not None:
        values.update(_settings_in(_read_toml(path), _where(path)))
    values.update(overrides)
    return _build(values, path)


def _read_toml(path) -> dict:
    """The parsed file; anything that keeps it from being TOML is one BadInput line."""
    import tomllib  # only with --config: its import (regexes compiled) costs ~3 ms per run

    where = _where(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"cannot read config {_path_text(path)}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise BadInput(f"{where}larger than {MAX_BYTES >> 20} MiB: not a file of settings")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{where}not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start:,})") from None
    try:
        return tomllib.loads(text)
    except RecursionError:      # tomllib recurses once per level: [[[[... 2,000 deep
        raise BadInput(f"{where}arrays or tables nested too deep") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}{_one_line(str(exc))}") from None
    except ValueError as exc:   # an integer literal past Python's int-string limit (4,300 digits)
        if "integer string conversion" in str(exc):
            raise BadInput(f"{where}an integer longer than {sys.get_int_max_str_digits():,} digits") from None
        raise BadInput(f"{where}{_one_line(str(exc))}") from None


def _settings_in(data: dict, where: str) -> dict:
    """The `[diagnose]` table when the file has that key, else the file's top level. Other
    tools' tables may sit beside `[diagnose]`, but not a setting: written above the table's
    line it would be silently ignored."""
    if "diagnose" not in data:
        return data
    table = data["diagnose"]
    if not isinstance(table, dict):     # `diagnose = 5`, `[[diagnose]]` (a list of tables)
        raise BadInput(f"{where}diagnose must be a table, [diagnose] (got {_shown(table)})")
    stray = sorted(set(data) & {f.name for f in dataclasses.fields(Config)})
    if stray:
        raise BadInput(f"{where}{stray[0]} is outside the [diagnose] table: move it below [diagnose]")
    return table


def _type_ok(default, value) -> bool:
    """The value has its default's type: a bool for a bool, an int (not a bool, not 2.5) for a
    count, an int or float for a float (nan and inf fail every number's range), a str, a dict,
    a list (or tuple, from Python)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, list):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def _build(values: dict, path) -> Config:
    fields = {f.name for f in dataclasses.fields(Config)}
    where = _where(path)
    clean = {}
    for key, value in values.items():
        if key not in fields:
            raise BadInput(f"{where}unknown setting {_shown(key)} (known: {', '.join(sorted(fields))})")
        default = getattr(DEFAULTS, key)
        if not _type_ok(default, value):
            raise BadInput(f"{where}{key} must be {article(type(default).__name__)} (got {_shown(value)})")
        rule = RANGES.get(key, _ANY)
        if not rule.test(value):
            raise BadInput(f"{where}{key} must be {rule.text} (got {_shown(value)})")
        value = rule.clean(value)
        clean[key] = float(value) if isinstance(default, float) else value
    return Config(**clean)


def _where(path) -> str:
    return f"config {_path_text(path)}: " if path else "config: "


def _path_text(path) -> str:
    """The path as typed, quoted when it holds a newline or other control character (one line)."""
    text = os.fsdecode(path)
    return text if text.isprintable() else repr(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _ShortRepr(reprlib.Repr):
    """repr cut short: a 100,000-character string or a list nested 900 deep would make the one
    line unreadable, and repr() of an int past 4,300 digits raises."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlist, self.maxdict = 3, 60, 60, 8, 8

    def repr_int(self, x, level):
        return repr(x) if x.bit_length() <= 128 else f"<an integer of {x.bit_length():,} bits>"


def _shown(value) -> str:
    try:
        return _one_line(_ShortRepr().repr(value))
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"
