"""PFC findings: pfc_storm, pfc_pause, pfc_without_ecn, slow_receiver.

Pause intervals are rebuilt from the pfc_pause / pfc_resume events exactly as the analysis accounts
them (analysis/pauses.py; 802.1Qbb: q x 512 bit times at the link speed, cut short by the next
frame from the same source for that priority; quanta 0 resumes). A pause refreshed before it ran
out continues the same paused period. Only enabled class slots ever become events (36.1.3).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from roceview.diagnose.context import Context, address_text
from roceview.diagnose.finding import finding
from roceview.diagnose.link_speed import link_speed, link_speed_findings, speed_note
from roceview.diagnose.pfc_storm import storm_finding
from roceview.diagnose.priority import (dcb_map, flows_on, keep_on, pfc_vector, priority_rows,
                                       protected_priorities)
from roceview.packets.names import flow_name, mac_int, mac_text
from roceview.units import duration, plural

def pause_frames(ctx: Context) -> dict[tuple[str, str], np.ndarray]:
    """(source MAC, priority) -> its pause and resume frames as rows [ts, quanta] in time order,
    from the events' pfc_priority / pfc_quanta columns. Built once per Context; the frames (up
    to the event log's 250,000 per kind) stay numpy."""
    return ctx.once("_pause_frames", _pause_frames)

def _pause_frames(ctx: Context) -> dict[tuple[str, str], np.ndarray]:
    parts: dict[tuple[str, str], list] = defaultdict(list)
    for kind in ("pfc_pause", "pfc_resume"):
        for mac in ctx.flows_with(kind):
            ev = ctx.ev(kind, mac)
            ts = np.asarray(ev.ts, np.int64)
            prio = np.asarray(ev.col("pfc_priority")).astype(str)
            quanta = np.asarray(ev.col("pfc_quanta"), np.int64)
            for p in np.unique(prio[prio != ""]).tolist():
                k = prio == p
                parts[(mac, p)].append(np.stack([ts[k], quanta[k]], axis=1))
    out = {}
    for key, rows in parts.items():
        rows = np.concatenate(rows)
        out[key] = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    return out

_NO_FRAMES = np.zeros((0, 2), dtype=np.int64)

def pause_periods(ctx: Context, frames: dict | None = None) -> dict[tuple[str, str], np.ndarray]:
    """(source MAC, priority) -> array of continuous paused periods [start, end) in ns, clipped
    to the end of the capture."""
    frames = pause_frames(ctx) if frames is None else frames
    ns_per_quantum = 512.0 / link_speed(ctx)
    return {k: _periods(v, ns_per_quantum, ctx.end_ns) for k, v in frames.items()}

def _periods(frames: np.ndarray, ns_per_quantum: float, end_ns: int) -> np.ndarray:
    ts, q = frames[:, 0], frames[:, 1]
    stop = ts + np.round(q * ns_per_quantum).astype(np.int64)
    stop[:-1] = np.minimum(stop[:-1], ts[1:])
    stop = np.minimum(stop, max(end_ns, int(ts.max())))
    keep = (q > 0) & (stop > ts)
    start, stop = ts[keep], stop[keep]
    if len(start) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    heads = np.flatnonzero(np.r_[True, start[1:] > stop[:-1]])  # a refresh before expiry continues
    return np.stack([start[heads], np.maximum.reduceat(stop, heads)], axis=1)

def shared_pausers(ctx: Context) -> set[str]:
    """Pausing MACs that are no RoCE host NIC and that RoCE frames from more than one MAC are
    addressed to: one MAC on several links (many switches put one router MAC on every routed
    port), so which link one of its pauses held cannot be told from the capture. Counted by the
    frames' source MACs, not addresses: a host with two addresses (VLAN subinterfaces, IPv4 and
    IPv6) is one NIC on one link."""
    return ctx.once("_shared_pausers", _shared_pausers)

def _shared_pausers(ctx: Context) -> set[str]:
    hosts, senders = ctx.host_macs(), defaultdict(set)
    for (dst, _), macs in link_senders(ctx).items():
        if dst not in hosts:
            senders[dst] |= macs
    return {mac_text(m) for m, macs in senders.items() if len(macs) > 1}

def link_senders(ctx: Context) -> dict[tuple[int, str], set[int]]:
    """(pausing MAC, flow name) -> the source MACs of the flow's RoCE frames addressed to that MAC
    (the packet classes): who transmitted them on the paused link. Built once."""
    return ctx.once("_link_senders", _link_senders)

def _link_senders(ctx: Context) -> dict[tuple[int, str], set[int]]:
    pausers = {mac_int(r["src_mac"]) for r in ctx.pfc if r["pause_frames"]}
    out: dict[tuple[int, str], set[int]] = defaultdict(set)
    for c in (ctx.facts.classes if ctx.facts and pausers else []):
        if c.dst_mac in pausers and c.src_mac >= 0:
            out[(c.dst_mac, flow_name(address_text(c.src), address_text(c.dst), c.qp))].add(c.src_mac)
    return out

def pfc_findings(ctx: Context) -> list[dict]:
    frames = pause_frames(ctx)
    periods = pause_periods(ctx, frames)
    hosts = ctx.host_macs()
    note = speed_note(ctx)
    speed = link_speed_findings(ctx)      # the capture contradicts the assumed speed: shares are doubtful
    out = []
    for row in ctx.pfc:
        if not row["pause_frames"]:
            continue
        key = (row["src_mac"], row["priority"])
        per = periods.get(key, np.zeros((0, 2), dtype=np.int64))
        host = hosts.get(mac_int(row["src_mac"]))
        out.append(_pause(ctx, row, host, note, trusted_speed=not speed))
        storm = storm_finding(ctx, row, per, frames.get(key, _NO_FRAMES), _who(row["src_mac"], host),
                              _prio_text(row["priority"]), host, note)
        if storm:
            out.append(storm)
        if host:
            out += _slow_receiver(ctx, row, host, note)
        else:
            out += _without_ecn(ctx, row, note)
    return out + speed

def _who(mac: str, host) -> str:
    return f"host NIC {mac} ({', '.join(sorted(host))})" if host else f"{mac}"

def _prio_text(p: str) -> str:
    return "all priorities (802.3x PAUSE)" if p == "all" else f"priority {p}"

def _counters(p: str, side: str) -> str:
    """mlx5 `ethtool -S` names for pauses on priority p ('all': 802.3x global pause), counters.rst."""
    return f"{side}_global_pause" if p == "all" else f"{side}_prio{p}_pause"

def _pause(ctx: Context, row: dict, host, note: str, trusted_speed: bool = True) -> dict:
    share = min(1.0, row["paused_us"] * 1000.0 / ctx.duration_ns())
    p = row["priority"]
    # a warning needs RoCE on the paused priority (a pause on a class without RoCE is someone
    # else's) and pause times the capture does not contradict (link_speed_mismatch)
    roce = _carries_roce(ctx, p)
    sev = "warning" if share >= ctx.config.pause_warning_share and roce and trusted_speed else "info"
    summary = (f"{_who(row['src_mac'], host)} paused {_prio_text(p)} with {plural(row['pause_frames'], 'pause frame')}: "
               f"{duration(row['paused_us'] * 1000)} in total ({share:.1%} of the capture), longest "
               f"{duration(row['longest_pause_us'] * 1000)}; {note}.")
    evidence = [f"{row['pause_frames']:,} pause / {row['resume_frames']:,} resume frames from {row['src_mac']} for {_prio_text(p)}",
                f"paused {duration(row['paused_us'] * 1000)} of {duration(ctx.duration_ns())} captured",
                f"longest continuous pause {duration(row['longest_pause_us'] * 1000)}", note]
    rx, tx = _counters(p, "rx"), _counters(p, "tx")
    if not roce:
        evidence.insert(1, f"no RoCE data, ACK or CNP was seen on {_prio_text(p)}")
    if p == "all":
        keep = _roce_pfc_priorities(ctx)
        advice = ("802.3x PAUSE stops every class on the link: on RoCE hosts use PFC on the RoCE priority instead "
                  f"(`dcb pfc set dev <if> prio-pfc {dcb_map(keep)}` or "
                  f"`mlnx_qos -i <if> --pfc {pfc_vector(keep)}`, then "
                  f"`ethtool -A <if> rx off tx off`). mlx5 counts these in `ethtool -S` {rx} / {tx} and "
                  f"{tx}_duration (only while global pause is on).")
    else:
        advice = (f"Compare `ethtool -S <if>` {rx} / {tx} and {tx}_duration (mlx5) on the hosts with the switch's "
                  "PFC counters; some pausing under load is normal, sustained pausing spreads congestion upstream "
                  "(head-of-line blocking): let ECN act first (Kmin < Kmax < PFC XOFF).")
    return finding(sev, "pfc_pause", summary, [], row["first_ts"], row["last_ts"], evidence, advice)

def _carries_roce(ctx: Context, p: str) -> bool:
    """Whether RoCE (data, ACKs or CNPs) travels on priority p; for 802.3x PAUSE ('all'),
    whether the capture has RoCE data at all."""
    if p == "all":
        return bool(ctx.arrays.data_flow.any())
    return bool(_flows_on(ctx, p)) or bool((priority_rows(ctx, cnp=True)[1] == int(p)).any())


def _roce_pfc_priorities(ctx: Context) -> list[int]:
    """Where PFC should be on: the priorities RoCE data uses, those DCBX / --pfc-priorities
    enable and those seen paused (3 when none is known)."""
    _, prio, _ = priority_rows(ctx)
    return sorted(keep_on(ctx, protected_priorities(ctx)[0]) | set(prio.tolist())) or [3]


def _flows_on(ctx: Context, prio: str, dst: str | None = None) -> list[str]:
    """Data flows whose packets travel on `prio` (all priorities for 'all'), optionally to `dst`."""
    a = ctx.arrays
    data = a.data_flow & (a.dst == (a.hosts.index(dst) if dst in a.hosts else -1)) if dst else a.data_flow
    rows = np.flatnonzero(data)
    if prio != "all":
        rows = rows[flows_on(ctx, rows, int(prio))]
    return [ctx.flow_names[i] for i in rows.tolist()]

def _marks(ctx: Context, flows: list[str]) -> tuple[int, int, int]:
    """(ECN-capable data packets, CE-marked, CNPs sent back by their receivers)."""
    a, rows = ctx.arrays, ctx.flow.rows(flows)
    known = a.has_facts[rows]
    # RoCEv1 excluded from the facts' ECT: switches do not mark it
    ect = np.where(known, a.fact_column("data_ect")[rows], np.maximum(0, a.packets[rows] - a.ecn_not_ect[rows]))
    ce = np.where(known, a.fact_column("data_ce")[rows], a.ecn_ce[rows])
    cnps = sum(ctx.cnps_from(a.hosts[rx]) for rx in set(a.dst[rows].tolist()))
    return int(ect.sum()), int(ce.sum()), cnps

def _without_ecn(ctx: Context, row: dict, note: str) -> list[dict]:
    p = row["priority"]
    flows = _flows_on(ctx, p)
    ect, ce, cnps = _marks(ctx, flows)
    if ect == 0 or ce or cnps:
        return []
    summary = (f"{row['src_mac']} paused {_prio_text(p)} {plural(row['pause_frames'], 'time')} while its "
               f"{plural(ect, 'ECN-capable RoCE data packet')} carried no CE mark and no CNP came back: "
               "the fabric back-pressures instead of rate-controlling.")
    evidence = [f"{plural(row['pause_frames'], 'pause frame')} from {row['src_mac']} (not a RoCE endpoint: a switch port)",
                f"{plural(ect, 'ECT data packet')} on {_prio_text(p)} in {plural(len(flows), 'flow')}, 0 CE, 0 CNP", note]
    advice = ("Enable ECN marking on the switch queue of the RoCE priority with Kmin < Kmax < PFC XOFF so marking "
              "starts before pausing; check DCQCN on the NICs (RDMA hw counters np_ecn_marked_roce_packets and "
              "np_cnp_sent on the receivers, rp_cnp_handled on the senders) and `ethtool -S` "
              f"{_counters(p, 'rx')} on the senders.")
    return [finding("warning", "pfc_without_ecn", summary, flows, row["first_ts"],
                    row["last_ts"], evidence, advice)]

def _slow_receiver(ctx: Context, row: dict, host: set, note: str) -> list[dict]:
    ip = next(iter(host))
    p = row["priority"]
    flows = _flows_on(ctx, p, dst=ip)
    if not flows:
        return []           # no RoCE into this host on the paused priority: not our traffic's receiver
    _, ce, cnps = _marks(ctx, flows)
    if ce or cnps:
        return []
    summary = (f"The receiver {ip} paused the link itself ({plural(row['pause_frames'], 'PFC pause')} on "
               f"{_prio_text(p)} from its NIC {row['src_mac']}) with no CE mark in the fabric: the host cannot "
               "drain what arrives, the network is not congested.")
    evidence = [f"pause source {row['src_mac']} sends RoCE traffic as {ip} (a host NIC, not a switch)",
                f"{duration(row['paused_us'] * 1000)} paused, longest {duration(row['longest_pause_us'] * 1000)}",
                f"{plural(len(flows), 'flow')} into {ip}: 0 CE, 0 CNP", note]
    tx = _counters(p, "tx")
    discards = "rx_discards_phy" if p == "all" else f"rx_prio{p}_discards"
    advice = (f"Look at the receiving host: `ethtool -S <if>` {tx} and {tx}_duration, {discards}, "
              "rx_buffer_passed_thres_phy and outbound_pci_buffer_overflow (mlx5), PCIe bandwidth/link width "
              "(`lspci -vv`), NUMA placement of the NIC and the buffers, host memory bandwidth, IOMMU; a NIC out "
              "of receive buffers pauses to stay lossless.")
    return [finding("warning", "slow_receiver", summary, flows, row["first_ts"],
                    row["last_ts"], evidence, advice)]
