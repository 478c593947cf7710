"""priority_mismatch: RoCE traffic or CNPs on a priority PFC does not protect.

Which priorities have PFC enabled is known only from an LLDP DCBX PFC configuration TLV in the
capture (IEEE 802.1Qaz D.2.10, or CEE DCBX), or from `pfc_priorities` (--pfc-priorities), which overrides them. A PFC
frame's class-enable vector says which priorities that frame pauses (802.1Qbb 36.1.3), not
which have PFC enabled: a fabric that pauses priority 5 may protect priority 3 as well, so PFC
frames alone never make a mismatch. A frame's priority is its VLAN PCP when tagged, else its
DSCP mapped to a priority (config `trust`, `dscp_to_priority`; default DSCP >> 3, the usual
`mlnx_qos --trust dscp` map: DSCP 26 -> 3, 48 -> 6).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from roceview.diagnose.context import Context
from roceview.diagnose.flow_arrays import any_of, run_starts
from roceview.diagnose.finding import finding
from roceview.units import plural


def priority_of(ctx: Context, pcp: int, dscp: int) -> int | None:
    trust = ctx.config.trust
    if trust == "pcp" or (trust == "auto" and pcp >= 0):
        return pcp if pcp >= 0 else None
    return ctx.config.priority_of_dscp(dscp) if dscp >= 0 else None


def flow_priorities(ctx: Context, name: str, cnp: bool = False) -> dict[int, int]:
    """priority -> packets of the flow (data and ACKs, or its CNPs)."""
    ff = ctx.flow_facts.get(name)
    out: dict[int, int] = defaultdict(int)
    if ff is None:
        return out
    for (pcp, dscp), n in (ff.cnp_priorities if cnp else ff.priorities).items():
        p = priority_of(ctx, pcp, dscp)
        if p is not None:
            out[p] += n
    return out


def class_priorities(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Per packet class (FlowFactsTable), the flows-table row of its flow (-1: none) and its
    priority (-1: none); built once per Context."""
    return ctx.once("_class_priorities", _class_priorities)


def _class_priorities(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    facts, a = ctx.flow_facts, ctx.arrays
    fact_row, prio = facts.class_priorities(lambda pcp, dscp: priority_of(ctx, pcp, dscp))
    table_row = np.full(len(facts), -1, np.int64)
    known = np.flatnonzero(a.fact >= 0)
    table_row[a.fact[known]] = known
    return table_row[fact_row], prio


def priority_rows(ctx: Context, cnp: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flows-table row, priority, packets) of the data+ACK classes (or the CNP classes) that
    have a priority and a flow in the table: flow_priorities for every flow at once."""
    row, prio = class_priorities(ctx)
    keep = (ctx.flow_facts.class_cnp == cnp) & (prio >= 0) & (row >= 0)
    return row[keep], prio[keep], ctx.flow_facts.class_packets[keep]


def flows_on(ctx: Context, rows: np.ndarray, prio: int) -> np.ndarray:
    """Which of the flows `rows` have a data or ACK packet on `prio`, or on no priority at all
    (no facts): `not prios or prio in prios` of flow_priorities, per flow."""
    row, p, _ = priority_rows(ctx)
    any_prio, on = np.zeros(len(ctx.flow_names), bool), np.zeros(len(ctx.flow_names), bool)
    any_prio[row] = True
    on[row[p == prio]] = True
    return ~any_prio[rows] | on[rows]


def protected_priorities(ctx: Context) -> tuple[set[int], list[str]]:
    """Priorities with PFC enabled, and where that was read: --pfc-priorities when given (it
    overrides the capture: the user knows the fabric's configuration), else LLDP DCBX TLVs."""
    if ctx.config.pfc_priorities:
        prios = set(ctx.config.pfc_priorities)
        return prios, [f"PFC on priority {', '.join(map(str, sorted(prios)))} (--pfc-priorities / pfc_priorities)"]
    prios, sources = set(), []
    for mac, bits in (ctx.facts.lldp_pfc.items() if ctx.facts else []):
        enabled = [p for p in range(8) if bits >> p & 1]
        prios.update(enabled)
        sources.append(f"LLDP DCBX from {_mac(mac)} enables PFC on {enabled or 'no priority'}")
    return prios, sources


def paused_priorities(ctx: Context) -> set[int]:
    """Priorities some PFC frame of the capture paused: PFC is on there, whatever DCBX says."""
    return {int(r["priority"]) for r in ctx.pfc if r["priority"] != "all" and r["pause_frames"]}


def pfc_vector(prios) -> str:
    """`mlnx_qos --pfc` form: eight 0/1 for priorities 0-7."""
    return ",".join("1" if p in prios else "0" for p in range(8))


def dcb_map(prios) -> str:
    """`dcb pfc set dev <if> prio-pfc` form: `3:on 5:on`."""
    return " ".join(f"{p}:on" for p in sorted(prios))


def keep_on(ctx: Context, protected: set[int]) -> set[int]:
    """The priorities advice must leave PFC on: the protected ones and every one seen paused
    (advice that turns PFC off on a class in use would make that class lossy)."""
    return set(protected) | paused_priorities(ctx)


def _mac(mac: int) -> str:
    from roceview.packets.names import mac_text

    return mac_text(mac)


def priority_findings(ctx: Context) -> list[dict]:
    return _mismatch(ctx) + version_findings(ctx)


def _mismatch(ctx: Context) -> list[dict]:
    protected, sources = protected_priorities(ctx)
    if not protected or not ctx.flow_facts:
        return []
    out, a = [], ctx.arrays
    for cnp in (False, True):
        wrong: dict[tuple[str, int], list] = defaultdict(list)
        row, p, n = priority_rows(ctx, cnp)
        off = np.flatnonzero(~any_of(p, tuple(protected)))
        off = off[np.lexsort((p[off], row[off]))]          # flow order, then priority: one sum each
        starts = run_starts(row[off], p[off])
        packets = np.add.reduceat(n[off], starts) if len(starts) else n[:0]
        for r, q, count in zip(row[off][starts].tolist(), p[off][starts].tolist(), packets.tolist()):
            wrong[(a.hosts[a.src[r]], q)].append((ctx.flow_names[r], count))
        out += [_finding(ctx, src, p, flows, protected, sources, cnp) for (src, p), flows in sorted(wrong.items())]
    return out


def _finding(ctx, src, prio, flows, protected, sources, cnp: bool) -> dict:
    n = sum(c for _, c in flows)
    marks = _codepoints(ctx, [f for f, _ in flows], cnp)
    what = "CNP" if cnp else "RoCE packet"
    want = ", ".join(str(p) for p in sorted(protected))
    summary = (f"{src} sends {plural(n, what)} on priority {prio} ({marks}) but PFC protects "
               f"only priority {want}: {'congestion notifications may be dropped' if cnp else 'this traffic is lossy'}.")
    evidence = [f"{plural(len(flows), 'flow')} from {src}: {marks}, {plural(n, 'packet')}", *sources[:3],
                f"priority from {'PCP when VLAN-tagged, else DSCP' if ctx.config.trust == 'auto' else ctx.config.trust.upper()}"]
    keep = sorted(keep_on(ctx, protected))
    advice = (f"Give {src}'s NIC the fabric QoS: `mlnx_qos -i <if> --trust dscp --pfc {pfc_vector(keep)}` (or `dcb pfc "
              f"set dev <if> prio-pfc {dcb_map(keep)}`) with the RoCE traffic class set for the RDMA device (RDMA-CM: "
              "`/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos`; the application's, e.g. NCCL_IB_TC) "
              f"so RoCE rides the protected priority {want}; compare `ethtool -S` rx_prio<p>_discards on the wrong "
              "priority.")
    if cnp:
        advice = ("Set the CNP DSCP/priority on the receivers (mlx5: `mlxconfig` CNP_DSCP_P1 / CNP_802P_PRIO_P1, or "
                  "debugfs cc_params np_cnp_dscp / np_cnp_prio) to a class that is never dropped (a strict-priority "
                  "queue, or the PFC-protected one); CNPs lost in a lossy queue leave DCQCN blind. Compare the RDMA "
                  "hw counters np_cnp_sent on the receiver with rp_cnp_handled on the sender.")
    return finding("info" if cnp else "warning", "priority_mismatch", summary, [f for f, _ in flows],
                   min(ctx.flow[f]["first_ts"] for f, _ in flows), max(ctx.flow[f]["last_ts"] for f, _ in flows),
                   evidence, advice)


def _codepoints(ctx: Context, names: list[str], cnp: bool) -> str:
    seen = set()
    for name in names:
        ff = ctx.flow_facts.get(name)
        seen.update((ff.cnp_priorities if cnp else ff.priorities).keys() if ff else ())
    return ", ".join(f"PCP {pcp if pcp >= 0 else 'untagged'} / DSCP {dscp if dscp >= 0 else '-'}"
                     for pcp, dscp in sorted(seen))


VERSION = {"roce_v1": "RoCEv1", "roce_v2": "RoCEv2"}


def version_findings(ctx: Context) -> list[dict]:
    """roce_version_mixed: the two directions of one QP pair (or one flow) use different RoCE
    versions. Each side sends with the type of the source GID it picked (RoCEv1: Ethertype 0x8915,
    RoCEv2: UDP 4791), so one host on a RoCEv1 GID and the other on a RoCEv2 GID is a GID-index /
    RDMA-CM default mismatch. It works on one L2 segment, but the RoCEv1 half is not routable, is
    never ECN-marked (no DCQCN for it) and ignores DSCP-based priority: one finding per host pair."""
    facts = ctx.flow_facts
    if not (len(facts) and facts.v1.any() and facts.v2.any()):
        return []      # both versions on one QP pair needs a RoCEv1 and a RoCEv2 flow somewhere
    pairs: dict[tuple, list] = defaultdict(list)
    seen: set[str] = set()
    for name in sorted(ctx.flow):
        peer = ctx.peer(name)
        f = ctx.flow[name]
        if name in seen or f["transport"] in ("UD", "CNP", "") or f["dest_qp"] in (0, 1):
            continue   # datagram / management QPs: many senders share one key
        seen.update((name, peer))
        mine, theirs = _versions(ctx, name), (_versions(ctx, peer) if peer else set())
        if len(mine | theirs) > 1:      # both versions on one flow, or one on each side
            pairs[tuple(sorted((f["src_ip"], f["dst_ip"])))].append((name, peer, mine, theirs))
    return [_mixed(ctx, hosts, rows) for hosts, rows in sorted(pairs.items())]


def _versions(ctx: Context, name: str) -> set[str]:
    ff = ctx.flow_facts.get(name)
    return {VERSION[p] for p in ff.protos if p in VERSION} if ff else set()


def _mixed(ctx: Context, hosts: tuple, rows: list) -> dict:
    sides: dict[str, set] = defaultdict(set)
    for name, peer, mine, theirs in rows:
        sides[ctx.flow[name]["src_ip"]] |= mine
        if peer:
            sides[ctx.flow[peer]["src_ip"]] |= theirs
    said = "; ".join(f"{h} sends {'+'.join(sorted(v))}" for h, v in sorted(sides.items()))
    flows = sorted({n for r in rows for n in r[:2] if n})
    summary = (f"{hosts[0]} and {hosts[1]} speak different RoCE versions on the same "
               f"{plural(len(rows), 'QP pair')} ({said}): a GID-index / RoCE mode mismatch.")
    evidence = [f"{name}: {'+'.join(sorted(mine))}" + (f", its peer {peer}: {'+'.join(sorted(theirs))}" if peer else "")
                for name, peer, mine, theirs in rows[:5]]
    evidence.append("RoCEv1 (Ethertype 0x8915) is not routable, never ECN-marked and has no DSCP")
    advice = ("Make both ends use a RoCEv2 GID: `cat /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index>` "
              "shows each GID's type (IB/RoCE v1 or RoCE v2); pick the RoCEv2 index in the application (e.g. "
              "perftest -x, NCCL_IB_GID_INDEX) and set the RDMA-CM default on every host "
              "(`/sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_mode` = RoCE v2).")
    ts = [ctx.flow[n]["first_ts"] for n in flows]
    te = [ctx.flow[n]["last_ts"] for n in flows]
    return finding("warning", "roce_version_mixed", summary, flows, min(ts), max(te), evidence, advice)
