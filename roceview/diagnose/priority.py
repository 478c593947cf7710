"""priority_mismatch: RoCE traffic or CNPs on a priority PFC does not protect.

The protected priorities are those whose class-enable bit is set in the PFC frames of the capture,
plus those an LLDP DCBX PFC configuration TLV enables. A frame's priority is its VLAN PCP when
tagged, else its DSCP mapped to a priority (config `trust`, `dscp_to_priority`; default DSCP >> 3,
the usual `mlnx_qos --trust dscp` map: DSCP 26 -> 3, 48 -> 6).
"""
from __future__ import annotations

from collections import defaultdict

from roceview.diagnose.context import Context
from roceview.diagnose.finding import finding, plural


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


def protected_priorities(ctx: Context) -> tuple[set[int], list[str]]:
    prios, sources = set(), []
    for row in ctx.pfc:
        if row["priority"] != "all":
            prios.add(int(row["priority"]))
            sources.append(f"PFC frames from {row['src_mac']} enable priority {row['priority']}")
    for mac, bits in (ctx.facts.lldp_pfc.items() if ctx.facts else []):
        enabled = [p for p in range(8) if bits >> p & 1]
        prios.update(enabled)
        sources.append(f"LLDP DCBX from {_mac(mac)} enables PFC on {enabled or 'no priority'}")
    return prios, sources


def _mac(mac: int) -> str:
    from roceview.diagnose.context import mac_text

    return mac_text(mac)


def priority_findings(ctx: Context) -> list[dict]:
    protected, sources = protected_priorities(ctx)
    if not protected or not ctx.flow_facts:
        return []
    out = []
    for cnp in (False, True):
        wrong: dict[tuple[str, int], list] = defaultdict(list)
        for name, f in ctx.flow.items():
            for p, n in flow_priorities(ctx, name, cnp).items():
                if p not in protected:
                    wrong[(f["src_ip"], p)].append((name, n))
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
    advice = (f"Give {src}'s NIC the fabric QoS: `mlnx_qos -i <if> --trust dscp --pfc 0,0,0,1,0,0,0,0` with the RoCE "
              "traffic class / DSCP set for the RDMA device (e.g. `cma_roce_tos`, NCCL_IB_TC) so RoCE rides the "
              f"protected priority {want}; compare rx_prio<p>_discards on the wrong priority.")
    if cnp:
        advice = ("Set the CNP priority/DSCP on the receivers (mlx5 `cnp_dscp` / `cnp_802p_prio`) to a class that is "
                  "never dropped (a strict-priority queue, or the PFC-protected one); CNPs lost in a lossy queue "
                  "leave DCQCN blind. Compare np_cnp_sent on the receiver with rp_cnp_handled on the sender.")
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
