"""hol_victim: a flow held by a switch's pauses that were meant for another receiver's
congestion (head-of-line blocking).

A PFC pause stops a whole priority on a link, not a flow: when a switch port pauses a host
because the host's traffic toward one congested receiver fills the switch's buffer, the host's
other flows on that priority wait too, although their receivers are idle. The analysis counts,
per (pausing MAC, priority, flow), the flow's frames addressed to the pauser on that priority
(paused_flows.csv: a routed ToR's port MAC is the host's next hop and the source of its pauses).

A flow is a victim of the pauses of (M, p) when
* M is no RoCE host NIC (ctx.host_macs(): a switch port; a host pauses only what comes to it)
  and RoCE frames from only one source MAC go to it (pfc.shared_pausers: a MAC on several links,
  as a router MAC on every routed port, leaves unknown which link a pause held),
* its destination is not congested: it draws no CE mark, sends no CNP, is named by no `incast`
  finding and does not pause the fabric itself,
* the same pauses held flows to a congested destination while they held this one (the pauses
  were for that congestion: without it nothing says whose congestion they were), and
* the paused periods of (M, p) (pfc.pause_periods) inside the flow's active span (its first to
  last frame to M on p) add up to at least `victim_paused_us` and `victim_paused_share` of that
  span: a healthy fabric pauses briefly now and then, that makes no victim.

Not judged on a capture of two capture points (psn_conformance.two_capture_points): each
point's copy of an XOFF would begin a paused period of its own, doubling the time paused.

The throughput lost is the flow's rate outside the pauses times the time paused, less what it
still sent while paused (the frames a NIC may send in its response time).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from roceview.diagnose.finding import finding, frames_by_key, given_frames
from roceview.diagnose.link_speed import speed_note
from roceview.diagnose.pfc import pause_periods, shared_pausers
from roceview.diagnose.psn_conformance import two_capture_points
from roceview.packets.names import mac_int
from roceview.units import duration, gbps, plural

KIND = "hol_victim"
SHOWN = 10
EVENT = "sent_while_paused"
_NONE = np.zeros((0, 2), np.int64)


def pfc_victim_findings(ctx) -> list[dict]:
    """One finding per (pausing switch MAC, priority) that held victims, with its frames."""
    return given_frames(_records(ctx), SHOWN)


def frames_by_finding(ctx) -> dict[tuple, list[int]]:
    """Every frame of each finding, as `roceview.finding` selects them (evidence_frames.py)."""
    return frames_by_key(_records(ctx))


def _records(ctx) -> list[tuple[dict, list[int]]]:
    return ctx.once("_pfc_victims", _judge)


def _judge(ctx) -> list[tuple[dict, list[int]]]:
    rows = _switch_rows(ctx)
    if rows is None or two_capture_points(ctx):     # each point's copy of an XOFF pauses again
        return []
    periods = pause_periods(ctx)
    congested = Congestion(ctx)
    out = []
    for key in sorted(set(zip(rows["src_mac"], rows["priority"]))):
        mine = np.flatnonzero((rows["src_mac"] == key[0]) & (rows["priority"] == key[1]))
        per = periods.get(key, _NONE)
        if len(per):
            victims = _victims(ctx, rows, mine, per, congested)
            if victims:
                out.append(_finding(ctx, key, victims, congested))
    return out


def _switch_rows(ctx) -> dict | None:
    """paused_flows' rows of pausers that are no RoCE host NIC, of flows the flows table has, as
    arrays (with each row's flows-table row `at`); None when there are none."""
    table = ctx.paused_flows
    if table is None or not len(table):
        return None
    d = table.data
    macs = np.asarray(list(d["src_mac"]), object)
    hosts, shared = ctx.host_macs(), shared_pausers(ctx)
    switch = np.fromiter((mac_int(m) not in hosts and m not in shared for m in macs.tolist()), bool, len(macs))
    at = ctx.flow.rows(list(d["flow"]))
    keep = switch & (at >= 0)
    if not keep.any():
        return None
    rows = {c: np.asarray(list(d[c]), object)[keep] for c in ("src_mac", "priority", "flow")}
    rows.update({c: np.asarray(d[c], np.int64)[keep] for c in ("bytes", "first_ts", "last_ts", "paused_bytes")})
    rows["at"] = at[keep]
    return rows


class Congestion:
    """Which destinations are congested, and why: CE marks on the data into them, CNPs they
    sent, pauses from their own NIC; the `incast` rule's receivers are asked for only when a
    victim would otherwise be named (the rule reads the whole timeline)."""

    def __init__(self, ctx):
        self.ctx, a = ctx, ctx.arrays
        self.why: dict[str, list[str]] = defaultdict(list)
        for code in np.unique(a.dst[a.data_flow & (a.ce > 0)]).tolist():
            self.why[a.hosts[code]].append("CE-marked data")
        for host in a.hosts:
            if ctx.cnps_from(host):
                self.why[host].append(f"{plural(ctx.cnps_from(host), 'CNP')} sent")
        owners = ctx.host_macs()
        for row in ctx.pfc:
            for ip in sorted(owners.get(mac_int(row["src_mac"]), ())) if row["pause_frames"] else ():
                self.why[ip].append("pauses from its own NIC")
        self._incast_asked = False

    def reasons(self, host: str, ask_incast: bool = False) -> list[str]:
        if ask_incast and not self._incast_asked:
            self._add_incasts()
        return self.why.get(host, [])

    def _add_incasts(self) -> None:
        from roceview.diagnose.ecn import incast_findings      # the incast rule's own findings

        self._incast_asked = True
        for record in incast_findings(self.ctx):
            for name in {f for f in record["flows"].split(";") if f in self.ctx.flow}:
                dst = self.ctx.flow[name]["dst_ip"]
                if "incast receiver" not in self.why[dst]:
                    self.why[dst].append("incast receiver")


def paused_within(per: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each span [lo, hi], the time of the paused periods `per` ([start, end), sorted, not
    overlapping) inside it: O(log periods) a span."""
    if not len(per):
        return np.zeros(len(lo), np.int64)
    starts, lengths = per[:, 0], per[:, 1] - per[:, 0]
    before = np.r_[0, np.cumsum(lengths)]           # before[k]: the paused time of periods 0..k-1

    def upto(t: np.ndarray) -> np.ndarray:          # the paused time up to t
        i = np.searchsorted(starts, t, "right")
        k = np.maximum(i - 1, 0)
        return np.where(i > 0, before[k] + np.clip(t - starts[k], 0, lengths[k]), 0)

    return upto(hi) - upto(lo)


def _victims(ctx, rows: dict, mine: np.ndarray, per: np.ndarray, congested: Congestion) -> list[dict]:
    """The victims among rows `mine` of one (pauser, priority), each a dict of its numbers."""
    lo, hi = rows["first_ts"][mine], rows["last_ts"][mine]
    dst = np.asarray(ctx.arrays.hosts, object)[ctx.arrays.dst[rows["at"][mine]]]
    paused, span, cfg = paused_within(per, lo, hi), hi - lo, ctx.config
    held = (span > 0) & (paused >= cfg.victim_paused_us * 1000.0) & (paused >= cfg.victim_paused_share * span)
    if not held.any():
        return []
    hot = np.fromiter((bool(congested.reasons(h, ask_incast=True)) for h in dst.tolist()), bool, len(dst))
    out = []
    for k in np.flatnonzero(held & ~hot).tolist():
        # the congested rows whose frames the same pauses held while they held this flow
        common = paused_within(per, np.maximum(lo[hot], lo[k]), np.minimum(hi[hot], hi[k]))
        behind = sorted(set(dst[hot][common > 0].tolist()))
        if behind:
            out.append(_numbers(rows, int(mine[k]), _overlapping(per, int(lo[k]), int(hi[k])), behind, dst[k]))
    return out


def _overlapping(per: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The paused periods that reach into [lo, hi], clipped to it."""
    part = per[np.searchsorted(per[:, 1], lo, "right"):np.searchsorted(per[:, 0], hi, "left")]
    return np.stack([np.maximum(part[:, 0], lo), np.minimum(part[:, 1], hi)], axis=1) if len(part) else _NONE


def _numbers(rows: dict, i: int, periods: np.ndarray, behind: list, dst: str) -> dict:
    span = int(rows["last_ts"][i] - rows["first_ts"][i])
    paused = int((periods[:, 1] - periods[:, 0]).sum())
    size, during = int(rows["bytes"][i]), int(rows["paused_bytes"][i])
    free = span - paused
    rate = (size - during) / free if free > 0 else float("nan")          # bytes per ns outside the pauses
    lost = max(0.0, rate * paused - during) if free > 0 else float("nan")
    return {"flow": str(rows["flow"][i]), "dst": dst, "span": span, "paused": paused, "periods": periods,
            "rate": rate, "average": size / span, "lost": lost, "behind": behind}


def _finding(ctx, key: tuple, victims: list[dict], why: Congestion) -> tuple[dict, list[int]]:
    mac, prio = key
    what = "all priorities (802.3x PAUSE)" if prio == "all" else f"priority {prio}"
    victims.sort(key=lambda v: (-v["paused"], v["flow"]))
    worst = victims[0]
    behind = sorted({h for v in victims for h in v["behind"]})
    lost = f", about {_kb(worst['lost'])} it could have sent" if worst["lost"] == worst["lost"] else ""
    summary = (f"The switch {mac} paused {what} for congestion toward {_hosts(behind)} and held "
               f"{plural(len(victims), 'flow')} to {_hosts(sorted({v['dst'] for v in victims}))}, not congested, "
               f"with it (head-of-line blocking): {worst['flow']} waited {duration(worst['paused'])} "
               f"({worst['paused'] / worst['span']:.0%} of its active time){lost}.")
    periods = np.concatenate([v["periods"] for v in victims])
    record = finding("warning", KIND, summary, [v["flow"] for v in victims], int(periods[:, 0].min()),
                     int(periods[:, 1].max()), _evidence(ctx, mac, what, victims, behind, why), _advice(prio, behind))
    return record, _frames(ctx, mac, prio, victims)


def _evidence(ctx, mac: str, what: str, victims: list[dict], behind: list, why: Congestion) -> list[str]:
    shown = ctx.config.max_examples
    out = [_victim_text(v) for v in victims[:shown]]
    if len(victims) > shown:
        out.append(f"{len(victims) - shown:,} more victim flows")
    out.append("the same pauses held flows to " + ", ".join(f"{h} ({', '.join(why.reasons(h, True))})"
                                                             for h in behind[:shown])
               + (f" and {len(behind) - shown:,} more congested receivers" if len(behind) > shown else ""))
    out.append(f"a victim is paused at least {ctx.config.victim_paused_us:g} us (victim_paused_us) and "
               f"{ctx.config.victim_paused_share:.0%} (victim_paused_share) of its active span, its first to last "
               f"frame to {mac} on {what}")
    dropped = ctx.summary.get("events_not_listed") or {}
    if dropped.get("pfc_pause") or dropped.get("pfc_resume"):
        out.append("the event log's budget cut the pause frames: paused times are lower bounds")
    return out + [speed_note(ctx)]


def _hosts(hosts: list, shown: int = 3) -> str:
    return ", ".join(hosts[:shown]) + (f" and {len(hosts) - shown:,} more" if len(hosts) > shown else "")


def _kb(n: float) -> str:
    return f"{n / 1000:,.1f} kB" if n >= 1000 else f"{n:,.0f} bytes"


def _victim_text(v: dict) -> str:
    rate = (f"; {gbps(v['rate'] * 8)} Gb/s while not paused, {gbps(v['average'] * 8)} Gb/s over its span: "
            f"about {_kb(v['lost'])} it could have sent in the paused time") if v["rate"] == v["rate"] else ""
    return (f"{v['flow']} (to {v['dst']}): paused {duration(v['paused'])} of its {duration(v['span'])} active "
            f"({v['paused'] / v['span']:.0%}) in {plural(len(v['periods']), 'paused period')}" + rate)


def _frames(ctx, mac: str, prio: str, victims: list[dict]) -> list[int]:
    """The pause frames (XOFFs, refreshes, XONs) of the victims' paused periods and the victims'
    frames sent while paused: `roceview.finding == "hol_victim"` shows the pause, what the
    victim still sent in it and its end."""
    periods = np.concatenate([v["periods"] for v in victims])
    frames: set[int] = set()
    for kind in ("pfc_pause", "pfc_resume"):
        ev = ctx.ev(kind, mac)
        ts = np.asarray(ev.ts, np.int64)
        mine = (np.asarray(ev.col("pfc_priority")).astype(str) == prio) & _inside(ts, periods)
        frames |= set(np.asarray(ev.col("frame"), np.int64)[mine].tolist())
    for v in victims:
        ev = ctx.ev(EVENT, v["flow"])
        mine = (np.asarray(ev.col("pfc_priority")).astype(str) == prio) & _inside(np.asarray(ev.ts, np.int64),
                                                                                 v["periods"])
        frames |= set(np.asarray(ev.col("frame"), np.int64)[mine].tolist())
    return sorted(frames)


def _inside(ts: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """Whether each time falls in one of the periods, ends included (the XON that ends one)."""
    if not len(periods) or not len(ts):
        return np.zeros(len(ts), bool)
    order = np.argsort(periods[:, 0])
    starts, ends = periods[order, 0], np.maximum.accumulate(periods[order, 1])
    i = np.searchsorted(starts, ts, "right") - 1
    return (i >= 0) & (ts <= ends[np.maximum(i, 0)])


def _advice(prio: str, behind: list) -> str:
    p = "<p>" if prio == "all" else prio
    return (f"Head-of-line blocking: PFC stops the whole priority, so the congestion toward {', '.join(behind)} "
            "held traffic to idle receivers. Let ECN act before PFC so DCQCN slows the senders into the congested "
            "receiver before the switch pauses their ports: the switch's RoCE queue with Kmin < Kmax well below the "
            "PFC XOFF threshold (SONiC: `ecnconfig -p <profile> -gmin <bytes> -gmax <bytes>`), DCQCN on the NICs "
            "(np_cnp_sent on the receivers, rp_cnp_handled on the senders). Keep traffic that must not wait on "
            "another class: a separate priority and lossless queue for it (`rdma_set_option(RDMA_OPTION_ID_TOS)` "
            "or configfs rdma_cm default_roce_tos for its DSCP, `dcb app add dev <if> dscp-prio <dscp>:<prio>`, "
            "the switch's DSCP-to-queue map). On the held host `ethtool -S <if>` "
            f"rx_prio{p}_pause_duration says how long it was paused; for pauses that do not end, the switch's PFC "
            "watchdog (SONiC: `pfcwd start --action drop ports all detection-time <ms>`) and the lossless headroom "
            "(`dcb pfc set dev <if> delay <bits>`).")
