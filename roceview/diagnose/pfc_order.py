"""pfc_before_ecn: a switch paused a priority before ECN marked its traffic.

ECN (with DCQCN) is meant to slow the senders while the switch queue grows (Kmin < Kmax), PFC
only to stop the last bytes before the buffer runs out (XOFF above Kmax): then in every
congestion episode the first CE mark comes before the first pause. A switch whose XOFF sits
below Kmin (or too close to it) pauses first, and the pauses spread the congestion upstream
(head-of-line blocking) while no sender is told to slow down.

Congestion episodes, per priority: the switches' paused periods on it (pauses from a MAC that is
not a RoCE host NIC, ctx.host_macs(); pause periods as pfc.pause_periods) and the CE evidence on
it (CE-marked packets of flows on that priority, and CNPs, counted on the priority of the data
flow they answer), split where nothing happens for `congestion_gap_us`. In each episode with a
switch pause:

* the first XOFF precedes the earliest time the first CE evidence can have been marked: a mark
  reaches the capture point up to one round trip after the switch marked it (its queue wait;
  the flow's RTT p99 bounds it) plus `ce_evidence_lag_us`; a CNP answers its mark a round trip
  later still, and the notification point may hold it back for `min_time_between_cnps_us`
  (a sender-side mirror sees no CE on the data: its only CE evidence is the CNPs coming back);
* or the episode has no CE evidence at all while the priority carries ECN-capable RoCE and CE
  evidence shows elsewhere in the capture (with none anywhere, pfc_without_ecn says it).

The event log keeps the first MAX_PER_KIND events of each kind: only episodes that ended (a
quiet gap included) before the end of what every kept kind covers are judged.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roceview.analysis.tables import format_ts
from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.diagnose.link_speed import speed_note
from roceview.diagnose.pfc import pause_periods
from roceview.diagnose.priority import priority_rows
from roceview.packets.names import mac_int
from roceview.units import duration, plural

KIND = "pfc_before_ecn"
SHOWN = 10                       # frames listed besides the first and last
EVENT_KINDS = ("ecn_ce", "cnp", "pfc_pause", "pfc_resume")


@dataclass
class Marks:
    """CE evidence, one row per CE-marked packet or CNP, in time order (ties as gathered: CE marks
    before CNPs, each kind in its groups' order): its time, the earliest time its mark can have
    been made (time - allowed lag), the priority of the data flow (-1: unknown), the data flow
    as a code and whether it is a CNP. A code is the flow's row in `names` (ctx.flow_names), or -1 - i for
    `unknown[i]` (an event's own flow when no known data flow stands for it): names are looked
    up only for the rows a finding shows, not for each of up to 2 x MAX_PER_KIND events."""
    ts: np.ndarray
    earliest: np.ndarray
    prio: np.ndarray
    flow: np.ndarray
    cnp: np.ndarray
    names: list
    unknown: list

    def take(self, m: np.ndarray) -> "Marks":
        idx = np.flatnonzero(m)
        return Marks(self.ts[idx], self.earliest[idx], self.prio[idx], self.flow[idx], self.cnp[idx], self.names,
                     self.unknown)

    def name(self, k: int) -> str:
        """The data flow's name of row k."""
        code = int(self.flow[k])
        return self.names[code] if code >= 0 else self.unknown[-1 - code]


def pfc_order_findings(ctx) -> list[dict]:
    """The findings, each with its frames (the XOFFs before the first CE evidence, and that)."""
    return given_frames(_records(ctx), SHOWN)


def frames_by_finding(ctx) -> dict[tuple, list[int]]:
    """Every frame of each finding, as `roceview.finding` selects them (evidence_frames.py)."""
    return frames_by_key(_records(ctx))


def _records(ctx) -> list[tuple[dict, list[int]]]:
    return ctx.once("_pfc_order", _judge_all)


def _judge_all(ctx) -> list[tuple[dict, list[int]]]:
    hosts = ctx.host_macs()
    periods = {k: v for k, v in pause_periods(ctx).items() if mac_int(k[0]) not in hosts and len(v)}
    if not periods:
        return []
    marks, cutoff = _marks(ctx), _covered_until(ctx)
    out = []
    for prio in sorted({p for _, p in periods}):
        mine = {mac: v for (mac, p), v in periods.items() if p == prio}
        on = marks.take(np.ones(len(marks.ts), bool) if prio == "all" else (marks.prio == int(prio)) | (marks.prio < 0))
        fired = [e for e in _episodes(ctx, prio, mine, on, cutoff) if e is not None]
        if fired:
            out.append(_finding(ctx, prio, fired, on))
    return out


def _covered_until(ctx) -> int:
    """The time up to which every kind this rule reads kept all its events (MAX_PER_KIND)."""
    dropped = ctx.summary.get("events_not_listed") or {}
    ends = []
    for kind in EVENT_KINDS:
        if dropped.get(kind):
            _, starts, stops, ts = ctx.kind_groups(kind)
            ends.append(max((int(ts[s:e].max()) for s, e in zip(starts.tolist(), stops.tolist()) if e > s),
                            default=ctx.start_ns))
    return min(ends) if ends else np.iinfo(np.int64).max


def _marks(ctx) -> Marks:
    """Every CE-marked packet and CNP of the event log as CE evidence, in time order."""
    prio_of, rtt = _dominant_priority(ctx), np.nan_to_num(np.asarray(ctx.flow.column("rtt_p99_us"), float))
    lag = ctx.config.ce_evidence_lag_us * 1000.0
    parts, unknown = [], []
    for kind, spacing in (("ecn_ce", 0.0), ("cnp", ctx.config.min_time_between_cnps_us * 1000.0)):
        flows, starts, ends, ts = ctx.kind_groups(kind)
        rows = ctx.flow.rows(flows) if kind == "ecn_ce" else np.fromiter(
            (_answered(ctx, f) for f in flows), np.int64, len(flows))
        # a group with no data flow row stands for itself: its own flow name, kept per group
        code = np.where(rows >= 0, rows, -1 - len(unknown) - np.arange(len(flows), dtype=np.int64))
        unknown += flows
        lengths = ends - starts
        at = _ranges(starts, lengths)
        row = np.repeat(rows, lengths)
        known = row >= 0
        lead = lag + spacing + np.where(known, rtt[np.maximum(row, 0)] * 1000.0, 0.0)
        parts.append((ts[at], ts[at] - lead.astype(np.int64), np.where(known, prio_of[np.maximum(row, 0)], -1),
                      np.repeat(code, lengths), np.full(len(at), kind == "cnp")))
    columns = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    order = np.argsort(columns[0], kind="stable")       # _episode's binary search; ties keep their order
    return Marks(*(c[order] for c in columns), ctx.flow_names, unknown)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices starts[i] .. starts[i] + lengths[i] - 1 of every i, concatenated."""
    total = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(offsets, lengths) + np.repeat(starts, lengths)


def _answered(ctx, name: str) -> int:
    """The flows-table row of the data flow a CNP flow answers: its peer QP's flow, else a data
    flow the other way; -1 when none is known."""
    peer = ctx.peer(name)
    candidates = [peer] if peer else (ctx.reverse_flows(name) if name in ctx.flow else [])
    rows = ctx.flow.rows(candidates)
    data = rows[(rows >= 0) & ctx.arrays.data_flow[np.maximum(rows, 0)]] if len(rows) else rows
    return int(data[0]) if len(data) else -1


def _dominant_priority(ctx) -> np.ndarray:
    """Per flows-table row, the priority most of its data and ACK packets took (-1: unknown)."""
    row, prio, n = priority_rows(ctx)
    out = np.full(len(ctx.flow_names), -1, np.int64)
    if len(row):
        order = np.lexsort((n, row))
        last = np.r_[row[order][1:] != row[order][:-1], True]
        out[row[order][last]] = prio[order][last]
    return out


def _episodes(ctx, prio: str, periods: dict, marks: Marks, cutoff: int) -> list:
    """Each congestion episode of the priority judged: a dict when a switch paused first, else None."""
    gap = int(ctx.config.congestion_gap_us * 1000)
    spans = np.concatenate([*periods.values(), np.stack([marks.ts, marks.ts], axis=1)]) if len(marks.ts) \
        else np.concatenate(list(periods.values()))
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])
    heads = np.flatnonzero(np.r_[True, spans[1:, 0] > reach[:-1] + gap])
    bounds = zip(spans[heads, 0].tolist(), np.append(reach[heads[1:] - 1], reach[-1]).tolist())
    xoffs = _xoffs(ctx, prio, periods)
    return [_episode(ctx, prio, start, end, xoffs, marks) for start, end in bounds if end + gap <= cutoff]


def _xoffs(ctx, prio: str, periods: dict) -> tuple[np.ndarray, np.ndarray, list]:
    """(ts, frame, MAC) of the switches' pause frames on the priority, in time order."""
    ts, frames, macs = [], [], []
    for mac in periods:
        ev = ctx.ev("pfc_pause", mac)
        keep = (np.asarray(ev.col("pfc_priority")).astype(str) == prio) & (np.asarray(ev.col("pfc_quanta")) > 0)
        ts.append(np.asarray(ev.ts)[keep])
        frames.append(np.asarray(ev.col("frame"), np.int64)[keep])
        macs += [mac] * int(keep.sum())
    ts, frames = np.concatenate(ts), np.concatenate(frames)
    order = np.argsort(ts, kind="stable")
    return ts[order], frames[order], [macs[i] for i in order.tolist()]


def _episode(ctx, prio: str, start: int, end: int, xoffs, marks: Marks) -> dict | None:
    ts, frames, macs = xoffs
    lo, hi = np.searchsorted(ts, start), np.searchsorted(ts, end, "right")
    if hi <= lo:
        return None               # paused before the episode (a pause still running): not its first
    first = int(ts[lo])
    k, stop = np.searchsorted(marks.ts, start), np.searchsorted(marks.ts, end, "right")   # marks in time order
    if stop > k:
        earliest = int(marks.earliest[k:stop].min())
        if first >= earliest:
            return None
        k = int(k)                # the episode's first mark (of a tie, the first listed)
        before = frames[lo:hi][ts[lo:hi] < int(marks.ts[k])]
        return {"start": start, "end": end, "xoff": first, "mac": macs[lo], "xoff_frames": before.tolist(),
                "mark": k, "earliest": earliest}
    if not len(marks.ts) or not _ecn_capable_during(ctx, prio, start, end):
        return None               # no CE anywhere: pfc_without_ecn's case; no ECN-capable RoCE then: not ours
    return {"start": start, "end": end, "xoff": first, "mac": macs[lo], "xoff_frames": frames[lo:hi].tolist(),
            "mark": None, "earliest": None}


def _ecn_capable_during(ctx, prio: str, start: int, end: int) -> bool:
    """Whether an ECN-capable RoCE data flow on the priority was sending in [start, end]."""
    a = ctx.arrays
    known = a.has_facts
    ect = np.where(known, a.fact_column("data_ect"), np.maximum(0, a.packets - a.ecn_not_ect))
    live = a.data_flow & (ect > 0) & (a.first_ts <= end) & (a.last_ts >= start)
    if prio != "all":
        p = _dominant_priority(ctx)
        live &= (p == int(prio)) | (p < 0)
    return bool(live.any())


def _finding(ctx, prio: str, fired: list, marks: Marks) -> tuple[dict, list[int]]:
    what = "all priorities (802.3x PAUSE)" if prio == "all" else f"priority {prio}"
    first = fired[0]
    macs = sorted({e["mac"] for e in fired})
    flows = sorted({marks.name(e["mark"]) for e in fired if e["mark"] is not None})
    late = [e for e in fired if e["mark"] is not None]
    summary = (f"The switch ({', '.join(macs)}) paused {what} before ECN marked its traffic in "
               f"{plural(len(fired), 'congestion episode')}: first at {format_ts(first['xoff'])}, "
               + (f"{duration(int(marks.ts[first['mark']]) - first['xoff'])} before the first CE evidence"
                  if first["mark"] is not None else "with no CE evidence in that episode")
               + "; its PFC XOFF threshold sits below (or too close to) its ECN marking threshold.")
    evidence = [_episode_text(e, marks) for e in fired[:ctx.config.max_examples]]
    if len(fired) > ctx.config.max_examples:
        evidence.append(f"{len(fired) - ctx.config.max_examples:,} more such episodes")
    if late and all(marks.cnp[e["mark"]] for e in late):
        evidence.append("CE evidence here is CNPs only (this capture point does not see the marks): each was "
                        "allowed a round trip (its flow's RTT p99) and the NP's CNP spacing after its mark")
    evidence += [f"episodes split by {ctx.config.congestion_gap_us:g} us without a pause or CE evidence "
                 "(congestion_gap_us); a mark may reach the capture point its flow's RTT p99 + "
                 f"{ctx.config.ce_evidence_lag_us:g} us (ce_evidence_lag_us) after it was made", speed_note(ctx)]
    frames = sorted({f for e in fired for f in e["xoff_frames"]}
                    | {f for e in late for f in _mark_frames(ctx, marks, e["mark"])})
    record = finding("warning", KIND, summary, flows, first["xoff"], fired[-1]["end"], evidence, _advice(prio))
    return record, frames


def _episode_text(e: dict, marks: Marks) -> str:
    if e["mark"] is None:
        return (f"episode {format_ts(e['start'])} - {format_ts(e['end'])}: {plural(len(e['xoff_frames']), 'XOFF')}"
                f" from {e['mac']}, no CE mark and no CNP on the priority while ECN-capable RoCE ran on it")
    k = e["mark"]
    what = "CNP" if marks.cnp[k] else "CE-marked packet"
    return (f"episode from {format_ts(e['start'])}: first XOFF from {e['mac']} at {format_ts(e['xoff'])}, first "
            f"{what} ({marks.name(k)}) {duration(int(marks.ts[k]) - e['xoff'])} later, its mark no earlier than "
            f"{duration(e['earliest'] - e['xoff'])} after the XOFF")


def _mark_frames(ctx, marks: Marks, k: int) -> list[int]:
    """The frame of CE evidence row k (the event at its time on its flow)."""
    t = int(marks.ts[k])
    kind = "cnp" if marks.cnp[k] else "ecn_ce"
    flows = None if marks.cnp[k] else [marks.name(k)]
    return ctx.event_frames(kind, flows, (t, t)).tolist()[:1]


def _advice(prio: str) -> str:
    p = "<p>" if prio == "all" else prio
    return ("Order the switch thresholds of the RoCE queue so that ECN marks before PFC pauses: Kmin < Kmax < the "
            "PFC XOFF threshold (the lossless priority group's headroom and shared-buffer limit). On the hosts "
            f"compare `ethtool -S <if>` rx_prio{p}_pause and rx_prio{p}_pause_duration (mlx5: pauses received) with "
            "the RDMA hw counters np_ecn_marked_roce_packets and np_cnp_sent on the receivers and rp_cnp_handled on "
            "the senders: pauses growing while the marks stay flat is this ordering.")
