"""clock_skew: responses stamped before the requests they answer (analysis: the
`response_before_request` events, roceview/analysis/causality.py)."""
from __future__ import annotations

import numpy as np

from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding
from roceview.units import duration, plural

MIN_EARLY = 3          # one early response may be a timestamping glitch; three are a pattern


def clock_findings(ctx: Context) -> list[dict]:
    flows = ctx.flows_with("response_before_request")
    evs = {name: ctx.ev("response_before_request", name) for name in flows}
    total = sum(len(e.ts) for e in evs.values())
    if total < MIN_EARLY:
        return []
    early = np.concatenate([e.col("early_ns") for e in evs.values()])
    most = int(early.max())
    evidence = []
    for name, ev in sorted(evs.items(), key=lambda kv: -len(kv[1].ts))[:5]:
        ns = ev.col("early_ns")
        frames = ev.cols.get("frame", np.zeros(0, np.int64))
        related = ev.cols.get("related_frame", np.zeros(0, np.int64))
        first = f"; first: frame {int(frames[0])} answers frame {int(related[0])}" if len(frames) and len(related) else ""
        evidence.append(f"{name}: {plural(len(ns), 'response')} stamped before their request, by "
                        f"{duration(int(ns.min()))} to {duration(int(ns.max()))} (median "
                        f"{duration(int(np.median(ns)))}){first}")
    if len(evs) > 5:
        evidence.append(f"{len(evs) - 5} more flows")
    evidence.append("a response acknowledges requests already received (IBTA 9.7.5): on one clock it comes after "
                    "them, so the clock that stamped these responses is behind the requests' by at least "
                    f"{duration(most)} plus the round trip")
    pairs = sorted(set(flows) | {p for p in (ctx.peer(n) for n in flows) if p})
    summary = (f"{plural(total, 'response')} on {plural(len(flows), 'flow')} are stamped before the request they "
               f"answer, by up to {duration(most)}: the capture's two directions are stamped by clocks at least "
               f"{duration(most)} apart (a TAP with two capture ports, two interfaces or capture points, or a capture "
               "on a host that stamps the frames it sends at another point than those it receives). RTT and "
               "NAK-to-resend figures of these queue pairs are off by that offset.")
    advice = ("The capture, not the fabric: stamp both directions with one clock (both directions mirrored to one "
              "capture port, or a TAP aggregator that stamps them), or synchronise the capture ports' clocks "
              "(PTP: linuxptp's ptp4l and phc2sys). Until then, read these flows' RTTs and delays as off by at least "
              f"{duration(most)}.")
    starts = [int(e.ts.min()) for e in evs.values()]
    ends = [int(e.ts.max()) for e in evs.values()]
    return [finding("info", "clock_skew", summary, pairs, min(starts), max(ends), evidence, advice)]
