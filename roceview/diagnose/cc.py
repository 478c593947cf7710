"""cnp_ignored, cnp_excess: how the two ends of DCQCN behave, read from cc.csv (analysis/cc.py:
one row per CNP a sender received, judged from the spacing of the sender's own packets).

* cnp_ignored: a sender whose rate limiter did not cut its rate after the CNPs it got. A CNP is
  judged ignored only when the sender was sending at its limiter's rate before it and kept
  sending inside messages, unchanged, over the window after it (analysis/cc.py); CNPs in the
  DCQCN rate-reduce period after a cut, senders that stopped or sent below their limit are not
  judged. Only CNPs that found the sender at LINE_SHARE of its link (`--link-speed`) count: a QP
  sharing its link with others, or held below its limit by anything else, keeps its spacing when
  its limiter is cut to a rate still above it. And the rate before those CNPs must stay flat
  (within FLAT): with a small DCQCN alpha each cut is a few % (below what the analysis calls a
  cut) but the rate still falls from one CNP to the next. Rule: at least `cnp_ignored_min` such
  CNPs ignored and at least `cnp_ignored_share` of those judged. The DCQCN reaction point (Zhu et al., SIGCOMM 2015, section 3.2) cuts the rate on
  every CNP outside that period, so a sender that keeps its rate has its reaction point off for
  that priority (or does not take the CNPs as its own: a wrong destination QP).
* cnp_excess: CNPs to one QP closer together than the notification point's minimum spacing
  (`min_time_between_cnps_us`; mlx5 `np_min_time_between_cnps`, "minimum time between sending
  CNPs from the port", default 0 upstream: then nothing is judged). Only the user knows the
  value their NICs run: set it to judge. Rule: at least `cnp_excess_min` such CNPs.

Each lists its CNPs' frames (`frames_given`); `frames_by_finding` gives them all for
`roceview.finding` (evidence_frames.py).
"""
from __future__ import annotations

import numpy as np

from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.units import duration, plural

CC_KINDS = ("cnp_ignored", "cnp_excess")
LINE_SHARE = 0.8                # cnp_ignored: a CNP counts when the sender ran at this share of its link ...
FLAT = 0.05                     # ... and its rate before those CNPs stayed within this share of the highest
SHOWN = 10                      # frames listed besides the first and last
_HW = "/sys/class/infiniband/<dev>/ports/<port>/hw_counters"


def cc_findings(ctx, result) -> list[dict]:
    """The two kinds' findings over the result's cc.csv, each with its CNP frames."""
    return given_frames(_records(ctx, result), SHOWN)


def frames_by_finding(ctx, result) -> dict[tuple, list[int]]:
    """Every frame of each finding, as `roceview.finding` selects them (evidence_frames.py)."""
    return frames_by_key(_records(ctx, result))


def _records(ctx, result) -> list[tuple[dict, list[int]]]:
    table = getattr(result, "cc_table", None)
    if table is None or not len(table):
        return []
    columns = {k: np.asarray(list(v), dtype=object) if k in ("flow", "ignored") else np.asarray(v)
               for k, v in table.data.items()}       # once, not per flow
    names, group = np.unique(columns["flow"], return_inverse=True)
    out = []
    for g, name in enumerate(names.tolist()):
        if name:                                  # "": a CNP whose data flow is not known
            rows = {k: v[group == g] for k, v in columns.items()}
            out += [r for r in (_ignored(ctx, name, rows), _excess(ctx, name, rows)) if r is not None]
    return out


def _ignored(ctx, name: str, rows: dict) -> tuple[dict, list[int]] | None:
    verdict = np.asarray(rows["ignored"], dtype=object)
    rate = np.asarray(rows["rate_before_gbps"], dtype=np.float64)
    judged = np.isin(verdict, ("true", "false"))
    # only CNPs that found the sender filling its link alone: a QP sharing its link with others,
    # or held below its limit, keeps its spacing whatever its limiter does
    ignored = (verdict == "true") & (rate >= LINE_SHARE * float(ctx.summary.get("link_speed_gbps") or 100.0))
    n, m = int(ignored.sum()), int(judged.sum())
    if n < ctx.config.cnp_ignored_min or n < ctx.config.cnp_ignored_share * m:
        return None
    before = rate[ignored]
    if before.max() - before.min() > FLAT * before.max():
        return None        # cuts below what one CNP shows (a small DCQCN alpha): its rate still fell
    reacted = judged & ~ignored
    evidence = [f"{plural(len(verdict), 'CNP')} received, {m} judged: after {n} the sender kept sending at its "
                f"rate ({np.nanmedian(before):.1f} Gb/s median before the CNP, unchanged over the window after)"]
    if reacted.any():
        reaction = np.asarray(rows["reaction_us"], dtype=np.float64)[reacted]
        cut = np.asarray(rows["cut_pct"], dtype=np.float64)[reacted]
        evidence.append(f"it cut its rate after {plural(int(reacted.sum()), 'other CNP')} (reaction p50 "
                        f"{duration(np.nanmedian(reaction) * 1000)}, cut p50 {np.nanmedian(cut):.0f}%)")
    summary = (f"The sender of {name} did not slow down for {n} of the {m} CNPs judged: its DCQCN reaction point "
               "ignores them.")
    advice = ("On the sender, compare the mlx5 hw counters rp_cnp_handled (CNPs its reaction point acted on) and "
              f"rp_cnp_ignored (CNPs it ignored) in {_HW}: ignored CNPs mean the reaction point is off for the "
              "priority the CNPs arrive on; a NIC with no DCQCN reaction point at all counts neither. Enable it for the RoCE priority (MLNX_OFED / DOCA: "
              "`echo 1 > /sys/class/net/<if>/ecn/roce_rp/enable/<prio>`) and send the CNPs on a priority it is "
              "enabled for. A sender that ignores CNPs keeps the congestion on and leaves the others to slow "
              "down for it, or PFC to pause everyone.")
    ts = np.asarray(rows["cnp_ts"], dtype=np.int64)[ignored]
    frames = sorted(int(f) for f in np.asarray(rows["cnp_frame"])[ignored].tolist())
    record = finding("warning", "cnp_ignored", summary, [name, *_peer(ctx, name)], int(ts.min()), int(ts.max()),
                     evidence, advice)
    return record, frames


def _excess(ctx, name: str, rows: dict) -> tuple[dict, list[int]] | None:
    least_us = ctx.config.min_time_between_cnps_us
    if least_us <= 0:
        return None
    spacing = np.asarray(rows["spacing_us"], dtype=np.float64)
    close = spacing < least_us                       # NaN (the QP's first CNP) is never close
    n = int(close.sum())
    if n < ctx.config.cnp_excess_min:
        return None
    peer = _peer(ctx, name)
    summary = (f"{plural(n, 'CNP')} to the sender of {name} came closer together than the notification point's "
               f"minimum spacing of {duration(least_us * 1000)}.")
    evidence = [f"{plural(len(spacing), 'CNP')} to that QP, {n} of them sooner than "
                f"{duration(least_us * 1000)} (min_time_between_cnps_us) after the one before; the closest "
                f"{duration(float(np.nanmin(spacing)) * 1000)} apart, median {duration(float(np.nanmedian(spacing)) * 1000)}"]
    advice = ("The receiver's notification point sends more CNPs than configured: check "
              "`/sys/class/net/<if>/ecn/roce_np/min_time_between_cnps` (MLNX_OFED / DOCA) or debugfs cc_params "
              "np_min_time_between_cnps (upstream mlx5) on the receiver, and its np_cnp_sent against "
              f"np_ecn_marked_roce_packets in {_HW}. Each CNP cuts the sender's rate: too many over-throttle it. "
              "If the NICs really run with no minimum spacing, set min_time_between_cnps_us to 0.")
    ts = np.asarray(rows["cnp_ts"], dtype=np.int64)[close]
    frames = sorted(int(f) for f in np.asarray(rows["cnp_frame"])[close].tolist())
    record = finding("warning", "cnp_excess", summary, [name, *peer], int(ts.min()), int(ts.max()), evidence, advice)
    return record, frames


def _peer(ctx, name: str) -> list[str]:
    """The CNPs' own flow (receiver to the sender's QP): the data flow's peer."""
    peer = ctx.peer(name)
    return [peer] if peer else []
