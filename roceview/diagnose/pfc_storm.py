"""pfc_storm: a (source MAC, priority) paused for so long that a PFC watchdog would act.

Two rules, as NIC and switch watchdogs apply them (docs/findings.md): one continuous paused
period of at least `storm_ms` (each XOFF refreshed before the previous one ran out), or a share
of at least `storm_share` of some `storm_window_ms` window (XOFFs that lapse for a moment between
refreshes still starve the queue). The finding says which rule fired, with the paused share, and
spans the whole episode: the merged windows and periods that met a rule, from the first pause
to the end of the last.
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding
from roceview.units import duration, plural


def window_shares(periods: np.ndarray, window_ns: int) -> np.ndarray:
    """Per period start s: the paused share of [s, s + window_ns) (the best window of any length
    starts at a period start)."""
    s, e = periods[:, 0], periods[:, 1]
    cum = np.r_[0, np.cumsum(e - s)]
    j = np.searchsorted(s, s + window_ns, side="left") - 1
    covered = cum[j + 1] - cum[np.arange(len(s))] - np.maximum(0, e[j] - (s + window_ns))
    return covered / float(window_ns)


def episodes(periods: np.ndarray, storm_ns: int, window_ns: int, share: float) -> list[tuple[int, int, bool]]:
    """Storm episodes [(start, end, continuous rule met)], merged where they overlap; empty when
    neither rule is met. A window that meets the share rule ends at the end of the last period
    starting inside it."""
    if len(periods) == 0:
        return []
    s, e = periods[:, 0], periods[:, 1]
    long_ = (e - s) >= storm_ns
    dense = window_shares(periods, window_ns) >= share
    if not (long_.any() or dense.any()):
        return []
    last_in = np.searchsorted(s, s + window_ns, side="left") - 1      # last period in each window
    ends = np.where(dense, np.maximum(e[last_in], e), e)
    hit = np.flatnonzero(long_ | dense)
    hs, he = s[hit], ends[hit]
    reach = np.maximum.accumulate(he)                      # a hit starting before it overlaps
    heads = np.flatnonzero(np.r_[True, hs[1:] > reach[:-1]])
    return list(zip(hs[heads].tolist(), np.maximum.reduceat(he, heads).tolist(),
                    np.logical_or.reduceat(long_[hit], heads).tolist()))


def _paused_in(periods: np.ndarray, start: int, end: int) -> tuple[int, int, int]:
    """(paused ns, periods, longest lapse ns between them) within [start, end)."""
    s, e = np.clip(periods[:, 0], start, end), np.clip(periods[:, 1], start, end)
    inside = e > s
    s, e = s[inside], e[inside]
    lapses = s[1:] - e[:-1]
    return int((e - s).sum()), int(len(s)), int(lapses.max()) if len(lapses) else 0


def storm_finding(ctx: Context, row: dict, per: np.ndarray, frames: np.ndarray, who: str, prio: str,
                  host, note: str) -> dict | None:
    cfg = ctx.config
    storm_ns, window_ns = int(cfg.storm_ms * 1e6), int(cfg.storm_window_ms * 1e6)
    found = episodes(per, storm_ns, window_ns, cfg.storm_share)
    if not found:
        return None
    start, end = found[0][0], found[-1][1]
    continuous = any(c for *_, c in found)
    paused, n_periods, lapse = _paused_in(per, start, end)
    length = max(end - start, 1)
    worst = float(window_shares(per, window_ns).max())
    longest = int((per[:, 1] - per[:, 0]).max())
    ts, q = frames[:, 0], frames[:, 1]
    xoffs = int(np.count_nonzero((q > 0) & (ts >= start) & (ts < end)))
    if continuous:
        rule = f"paused continuously for {duration(longest)} (watchdog threshold {cfg.storm_ms:g} ms)"
        how = f"{plural(xoffs, 'pause frame')} in the episode, each refreshed before the previous one ran out" \
            if n_periods == 1 else f"{plural(xoffs, 'pause frame')} in {plural(n_periods, 'paused period')}"
    else:
        rule = (f"paused {paused / length:.1%} of {duration(length)} (at least {cfg.storm_share:.0%} of a "
                f"{cfg.storm_window_ms:g} ms window; longest continuous pause {duration(longest)})")
        how = (f"{plural(xoffs, 'pause frame')} in {plural(n_periods, 'paused period')}: the pauses lapsed "
               f"for up to {duration(lapse)} between XOFF refreshes")
    cut = _not_listed(ctx)
    if cut:   # the periods come from the event log, which keeps the first MAX_PER_KIND of a kind
        rule += (f" in the first {plural(len(frames), 'pause/resume frame')} of this source "
                 f"(to {duration(int(ts[-1]) - start)} "
                 f"after the first); {cut:,} later pause/resume frames of the capture were not kept as events, so "
                 "the storm may go on longer")
    summary = f"PFC storm: {who} kept {prio} {rule}; {note}."
    evidence = [f"rule: {'continuous pause' if continuous else 'paused share of a window'}",
                f"episode {duration(length)}, paused {paused / length:.1%} of it" +
                (f" ({len(found)} episodes)" if len(found) > 1 else ""),
                f"worst {cfg.storm_window_ms:g} ms window paused {worst:.1%}", how, note]
    return finding("critical", "pfc_storm", summary, [], start, end, evidence, _advice(row["priority"], host))


def _not_listed(ctx: Context) -> int:
    """PFC pause/resume frames of the capture past the event log's budget (summary events_not_listed)."""
    cut = ctx.summary.get("events_not_listed") or {}
    return int(cut.get("pfc_pause", 0)) + int(cut.get("pfc_resume", 0))


def _advice(p: str, host) -> str:
    # mlx5 counter names: Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst;
    # the tunable: ethtool(8) --set-tunable pfc-prevention-tout (net/ethtool/common.c tunable_strings)
    counter = "tx_global_pause_duration" if p == "all" else f"tx_prio{p}_pause_duration"
    nic = ("`ethtool -S <if>` tx_pause_storm_warning_events / tx_pause_storm_error_events and "
           f"{counter} on the NIC that sends the pauses; let the NIC stop pausing after a timeout "
           "(`ethtool --set-tunable <if> pfc-prevention-tout <ms>`, or the MLNX_OFED sysfs "
           "`pfc_stall_prevention`)")
    if host:
        return (f"A host NIC that keeps pausing cannot drain its receive buffers (hung receive pipeline, host "
                f"not consuming): read {nic}, and enable the switch PFC watchdog so the port falls back to lossy "
                "instead of blocking upstream queues.")
    return ("A switch port that keeps pausing is stuck behind a receiver that does not drain, or a pause loop: "
            "enable the switch PFC watchdog on the RoCE priority (it drops to lossy after ~100 ms) and find the "
            f"port the pauses come from; on mlx5 hosts read {nic}.")
