"""pfc_violation: a station kept sending on a priority its link partner had paused, later than a
PAUSE-conformant station may.

The analysis logs each RoCE frame captured toward a pausing MAC on a paused priority while the
pause held (events `sent_while_paused`, with `pause_delay_ns`: the time since the XOFF that began
the paused period). A station may still send for a while after the XOFF: IEEE 802.3 Annex 31B.3.7
bounds how long after receiving a PAUSE with a non-zero pause_time it may begin a new frame (in
pause_quanta of 512 bit times, measured at the MDI; PFC frames use the same MAC Control timing,
802.1Qbb), the frame already being sent is finished, and the capture point adds the link's
propagation both ways. A frame later than all of that was sent by a station that ignores the
pause, or obeys it too late: the pauser's headroom is sized for the bound, so such frames can
overflow it, and a lossless priority then drops.

Bound at the assumed link speed (--link-speed): RESPONSE_BITS's row for the fastest listed speed
not above it (a slower speed's bound is the longer time: lenient), plus two frames of
JUMBO_BYTES at the link speed (the frame in progress when the pause arrived, and the late frame
itself: a capture stamps a frame at its end), plus `pause_response_margin_us` (propagation to
the station and back to the capture point). Not judged when link_speed_mismatch fires: the
pause times are then doubtful; nor on a capture of two capture points (capture_points): each
point's copy of an XOFF starts a paused period of its own, into which the other point's frames
fall, sent after the first point's XON.
"""
from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from roceview.analysis.tables import format_ts
from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.diagnose.link_speed import link_speed, link_speed_findings, speed_note
from roceview.diagnose.pfc import link_senders, shared_pausers
from roceview.diagnose.psn_conformance import two_capture_points
from roceview.packets.names import mac_int
from roceview.units import duration, plural

KIND = "pfc_violation"
EVENT = "sent_while_paused"
SHOWN = 10
# IEEE 802.3 Annex 31B.3.7 / 31B.4.6 (802.3-2008, amended by 802.3ba-2010): the longest time after
# receiving a PAUSE with a non-zero pause_time a station may begin a new frame, in bit times at
# the MDI: <= 100 Mb/s pause_quantum + 64 (no exposed MII), 1 Gb/s 2 quanta, 10 Gb/s 60 quanta
# (74 for 10GBASE-T: the longer one here), 40 Gb/s 118, 100 Gb/s 394. No value for 25, 50, 200,
# 400 or 800 Gb/s was found in a source: those take the row below them (a longer time).
RESPONSE_BITS = ((0.1, 512 + 64), (1.0, 2 * 512), (10.0, 74 * 512), (40.0, 118 * 512), (100.0, 394 * 512))
JUMBO_BYTES = 9216                  # the largest frame a RoCE port commonly carries (MTU 9000 + headers)
_MAC = re.compile(r"(?:[0-9a-f]{2}:){5}[0-9a-f]{2}")


def response_bound_ns(gbps: float) -> tuple[float, float, float]:
    """(the 802.3 bound in ns, the speed of the table row used, its bit times) at `gbps`."""
    speed, bits = next(((s, b) for s, b in reversed(RESPONSE_BITS) if s <= gbps), RESPONSE_BITS[0])
    return bits / min(speed, gbps), speed, bits


def pfc_violation_findings(ctx) -> list[dict]:
    return given_frames(_records(ctx), SHOWN)


def frames_by_finding(ctx) -> dict[tuple, list[int]]:
    return frames_by_key(_records(ctx))


def _records(ctx) -> list[tuple[dict, list[int]]]:
    return ctx.once("_pfc_violation", _judge)


def _judge(ctx) -> list[tuple[dict, list[int]]]:
    flows = ctx.flows_with(EVENT)
    if not flows or link_speed_findings(ctx) or two_capture_points(ctx):
        return []
    gbps = link_speed(ctx)
    standard, _, _ = response_bound_ns(gbps)
    in_flight = 2 * JUMBO_BYTES * 8 / gbps
    bound = standard + in_flight + ctx.config.pause_response_margin_us * 1000.0
    late: dict[tuple, list] = defaultdict(list)      # (pauser, priority, sender) -> column parts
    hosts, shared = ctx.host_macs(), shared_pausers(ctx)
    for name in flows:
        ev = ctx.ev(EVENT, name)
        pausers = _pausers(ev.detail)
        delay = _delays(ctx, ev, pausers)
        hit = np.flatnonzero(delay > bound)
        if not len(hit):
            continue
        prio = np.asarray(ev.col("pfc_priority")).astype(str)[hit]
        cols = (np.asarray(ev.ts, np.int64)[hit], delay[hit], np.asarray(ev.col("frame"), np.int64)[hit],
                np.asarray(ev.col("related_frame"), np.int64)[hit])
        for pauser, p in sorted(set(zip(pausers[hit].tolist(), prio.tolist()))):
            if pauser in shared:
                continue
            mine = (pausers[hit] == pauser) & (prio == p)
            late[(pauser, p, _sender(ctx, name, pauser, hosts))].append((name, *(c[mine] for c in cols)))
    return [_finding(ctx, key, parts, (standard, in_flight, bound)) for key, parts in sorted(late.items())]


def _sender(ctx, name: str, pauser: str, hosts: dict) -> str:
    """Who sent the late frames on the paused link, by their source MACs: a host NIC is named by
    its address; another MAC sending toward a host NIC is the switch port on that host's link;
    without either, the flow's source."""
    macs = link_senders(ctx).get((mac_int(pauser), name), set())
    nics = sorted({ip for m in macs for ip in hosts.get(m, ())})
    if nics:
        return ", ".join(nics)
    ip = hosts.get(mac_int(pauser))
    if ip and macs:
        return f"the switch port toward {next(iter(ip))}"
    return ctx.flow[name]["src_ip"] if name in ctx.flow else "?"


def _pausers(details) -> np.ndarray:
    """The pausing MAC each event's detail names, read once per distinct detail."""
    uniq, inv = np.unique(np.asarray(details, dtype=str), return_inverse=True)
    macs = np.array([(_MAC.findall(u) or ["?"])[0] for u in uniq.tolist()], dtype=object)
    return macs[inv.reshape(-1)] if len(uniq) else np.zeros(0, dtype=object)


def _delays(ctx, ev, pausers: list) -> np.ndarray:
    """Each frame's time since the XOFF that began its paused period: the events' pause_delay_ns
    where the Context carries it, else its timestamp less its related frame's (that XOFF, among
    the pauser's pfc_pause events); -1 where neither is known."""
    given = np.asarray(ev.col("pause_delay_ns"), np.int64)
    if len(given) == len(ev.ts):
        return given
    out = np.full(len(ev.ts), -1, np.int64)
    related = np.asarray(ev.col("related_frame"), np.int64)
    for mac in set(pausers):
        xoff = ctx.ev("pfc_pause", mac)
        frames, ts = np.asarray(xoff.col("frame"), np.int64), np.asarray(xoff.ts, np.int64)
        if not len(frames):
            continue
        order = np.argsort(frames)
        mine = np.flatnonzero(np.asarray(pausers, object) == mac)
        at = np.minimum(np.searchsorted(frames[order], related[mine]), len(frames) - 1)
        found = frames[order][at] == related[mine]
        out[mine[found]] = np.asarray(ev.ts, np.int64)[mine[found]] - ts[order][at][found]
    return out


def _finding(ctx, key: tuple, parts: list, bounds: tuple) -> tuple[dict, list[int]]:
    """parts: (flow name, ts, delay, frame, related frame) of each flow's late frames."""
    pauser, prio, sender = key
    ts, delays, frame, related = (np.concatenate([p[i] for p in parts]) for i in range(1, 5))
    order = np.lexsort((frame, ts))
    ts, delays, frame, related = ts[order], delays[order], frame[order], related[order]
    standard, in_flight, bound = bounds
    _, speed, bits = response_bound_ns(link_speed(ctx))
    flows = sorted({p[0] for p in parts})
    what = "all priorities (802.3x PAUSE)" if prio == "all" else f"priority {prio}"
    summary = (f"{sender} kept sending on {what} while {pauser} paused it: {plural(len(ts), 'frame')} "
               f"up to {duration(int(delays.max()))} after the XOFF, beyond the {duration(int(bound))} a PAUSE-"
               "conformant station takes to stop; frames past the pauser's headroom are dropped on a lossless "
               "priority.")
    evidence = [f"{plural(len(ts), 'RoCE frame')} of {plural(len(flows), 'flow')} from {sender} toward {pauser} "
                f"on {what} inside its paused periods, {duration(int(np.median(delays)))} median and "
                f"{duration(int(delays.max()))} at most after the XOFF that began the period (first at "
                f"{format_ts(int(ts[0]))})",
                f"bound {duration(int(bound))}: {bits / 512:g} pause_quanta (IEEE 802.3 Annex 31B.3.7, the "
                f"{speed:g} Gb/s row) = {duration(int(standard))}, two {JUMBO_BYTES:,}-byte frames in flight "
                f"{duration(int(in_flight))}, margin {ctx.config.pause_response_margin_us:g} us "
                "(pause_response_margin_us: propagation to the station and back to the capture point)",
                speed_note(ctx)]
    dropped = (ctx.summary.get("events_not_listed") or {}).get(EVENT)
    if dropped:
        evidence.append(f"{dropped:,} more frames sent while paused were past the event log's budget: not judged")
    advice = _advice(sender, "<p>" if prio == "all" else prio)
    record = finding("critical", KIND, summary, flows, int(ts[0]), int(ts[-1]), evidence, advice)
    return record, np.union1d(frame, related[related > 0]).tolist()


def _advice(sender: str, p: str) -> str:
    """What to check where the late frames came from: the switch port toward a host NIC that
    paused, or the NIC of a host a switch port paused."""
    if sender.startswith("the switch port"):
        return (f"On {sender}: check that PFC is enabled for priority {p} on that port and that its priority map "
                "(trust, DSCP to priority) is the host's, and read the port's per-priority PFC counters (pause "
                "frames received on that priority; none while this capture shows them means the port ignores "
                f"them). On the host, `ethtool -S <if>` tx_prio{p}_pause / tx_prio{p}_pause_duration (mlx5: pauses "
                f"its NIC sent) and rx_prio{p}_discards (what it dropped once its headroom was full); "
                "`dcb pfc show dev <if> prio-pfc delay requests` (iproute2: requests, the PFC frames sent per "
                "priority).")
    return (f"On {sender}'s NIC check that PFC is on for priority {p} and honoured: `dcb pfc show dev <if> "
            "prio-pfc delay indications` (iproute2; indications: PFC frames received per priority) or "
            f"`mlnx_qos -i <if>`, and `ethtool -S <if>` rx_prio{p}_pause / rx_prio{p}_pause_duration (mlx5: "
            "pauses it received; flat while this capture shows pauses means its PFC is off for that priority or "
            "its priority map differs from the switch's). On the pausing side read the lossless priority "
            "group's headroom and its discards (`ethtool -S` rx_prio<p>_discards on a host; the switch's "
            "ingress drop counters), and the link's delay allowance (`dcb pfc set dev <if> delay <bits>`).")
