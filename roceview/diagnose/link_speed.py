"""link_speed_mismatch: the capture contradicts the link speed pause times are computed at.

A pause of q quanta lasts q x 512 bit times: 65535 quanta are 335 us at 100 Gb/s but 335 ms at
100 Mb/s. The speed is `--link-speed` (default 100 Gb/s); nothing in a capture states it. Two
signs that it is wrong, checked only when the capture has PFC/PAUSE frames (only pause times
depend on it):

* the traffic's own bit rate: the frame bytes into or out of one host over a window of at least
  `link_rate_window_ms` (whole timeline buckets) exceed the assumed speed by more than
  `link_rate_margin`, so that host's link is faster. The margin absorbs software timestamps: a
  capture thread that stalls for 60 us stamps the packets it then catches up on in the next
  window, 6 % more than the wire carried in 1 ms; Ethernet speeds one step apart differ by at
  least 1.25x (40 -> 50 Gb/s), 2x at 100 Gb/s and above, so a wrong speed still shows. A capture
  that holds frames twice (a mirror of both directions, two mirror ports merged) doubles the
  rate: the summary says so;
* a PAUSE-only capture: 802.3x PAUSE frames, no PFC and no RoCE at all, at an assumed speed of
  `pause_only_min_gbps` or more. Nothing in such a capture supports the assumed speed: global
  PAUSE is sent at every speed where flow control is on and DCB is not (the real example: an
  ASIX USB NIC at 100 Mb/s; mlx5 ports too, whose pause is on by default without PFC), so the
  finding asks for the speed rather than guessing a slow link.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.tables import Coded, format_ts
from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding
from roceview.units import gbps as fmt_gbps


def link_speed(ctx: Context) -> float:
    return float(ctx.summary.get("link_speed_gbps") or 100.0)


def speed_note(ctx: Context) -> str:
    """Every PFC/PAUSE finding says at which speed its pause times were computed."""
    return f"pause times at an assumed {link_speed(ctx):g} Gb/s link (--link-speed)"


def link_speed_findings(ctx: Context) -> list[dict]:
    if not any(r["pause_frames"] for r in ctx.pfc):
        return []
    speed = link_speed(ctx)
    fast = _fastest_host(ctx)
    if fast is not None and fast[1] > speed * ctx.config.link_rate_margin:
        host, gbps, start, width, side = fast
        summary = (f"Pause times assume a {speed:g} Gb/s link (--link-speed), but the traffic {side} {host} reached "
                   f"{fmt_gbps(gbps)} Gb/s over {width / 1e6:g} ms: its link is faster (unless the capture holds "
                   "each frame twice: a mirror of both directions or two mirror ports merged), so every pause time "
                   "here may be too long; give --link-speed with the port speed.")
        evidence = [f"{fmt_gbps(gbps)} Gb/s of RoCE frames {side} {host} in the {width / 1e6:g} ms from {format_ts(start)}",
                    f"assumed {speed:g} Gb/s; a mismatch needs more than {ctx.config.link_rate_margin:g}x that "
                    "(software timestamp jitter)"]
        return [finding("info", "link_speed_mismatch", summary, [], start, start + width, evidence, _ADVICE)]
    prios = {r["priority"] for r in ctx.pfc if r["pause_frames"]}
    if prios == {"all"} and not ctx.summary.get("roce_packets") and speed >= ctx.config.pause_only_min_gbps:
        q_time = 65535 * 512 / (speed * 1e9)
        summary = (f"Only 802.3x PAUSE frames and no RoCE traffic: nothing here shows the link speed, yet pause "
                   f"times assume {speed:g} Gb/s (--link-speed). Global PAUSE comes from any port with flow control "
                   "on and no DCB, USB adapters included: at 1 Gb/s a 65535-quanta pause lasts 33.6 ms, at 100 Mb/s "
                   f"335.5 ms, not {q_time * 1e6:.1f} us; give --link-speed with the port speed.")
        evidence = ["802.3x PAUSE (priority all) only, no PFC frame, no RoCE packet", f"assumed {speed:g} Gb/s"]
        return [finding("info", "link_speed_mismatch", summary, [], ctx.start_ns, ctx.end_ns, evidence, _ADVICE)]
    return []


_ADVICE = ("`ethtool <if>` shows the port speed (Speed: ...) on each host; rerun with `--link-speed <Gb/s>` so "
           "pause times, paused shares and the storm rule use it.")


def _fastest_host(ctx: Context):
    """(host, Gb/s, window start ns, window ns, "out of"/"into") of the host whose frames in or out in one window
    of at least `link_rate_window_ms` (and one timeline bucket) have the highest bit rate."""
    tl = ctx.timeline
    if not len(tl.get("flow", [])):
        return None
    bucket = int(float(ctx.summary.get("timeline_bucket_ms") or ctx.summary.get("bucket_ms") or 1.0) * 1e6)
    # whole buckets: a window keyed by bucket start that holds a bucket more than its length
    # overstates the rate (0.7 ms buckets in 1 ms windows: 1.4 ms of traffic in one window)
    width = bucket * max(1, -(-int(ctx.config.link_rate_window_ms * 1e6) // bucket))
    flows = Coded.of(tl["flow"])
    rows = ctx.flow.rows(flows.names).tolist()          # -1: not in the flows table
    src_ip, dst_ip = ctx.flow.column("src_ip"), ctx.flow.column("dst_ip")
    hosts = sorted({h for r in rows if r >= 0 for h in (src_ip[r], dst_ip[r])})
    if not hosts:
        return None
    code = {h: i for i, h in enumerate(hosts)}
    src = np.array([code[src_ip[r]] if r >= 0 else -1 for r in rows], np.int64)
    dst = np.array([code[dst_ip[r]] if r >= 0 else -1 for r in rows], np.int64)
    nbytes = np.asarray(tl["bytes"], np.float64)
    start = np.asarray(tl["bucket_start"], np.int64)
    windows, win = np.unique(start // width, return_inverse=True)
    best = None
    for side, label in ((src, "out of"), (dst, "into")):
        host = side[flows.codes]
        ok = host >= 0
        key = host[ok] * len(windows) + win.reshape(-1)[ok]
        sums = np.bincount(key, nbytes[ok], minlength=len(hosts) * len(windows))
        i = int(np.argmax(sums))
        gbps = sums[i] * 8.0 / width
        if best is None or gbps > best[1]:
            best = (hosts[i // len(windows)], gbps, int(windows[i % len(windows)] * width), width, label)
    return best
