"""Findings in causal order, and advice filled with what the capture shows.

A finding that explains others (a wrong `--pmtu` makes gaps and PSN reuse appear; an incast
makes the CE marks of `ecn_congestion`; a PFC storm makes the pauses and timeouts around it)
is listed right before the first of them, and names them (`explains`: their kinds,
';'-joined): the engineer reads the cause before its effects, whatever their severities.

Advice written for any priority (`rx_prio<p>_discards`, `.../roce_np/enable/<p>`) names the
priority the finding's flows were seen on, when they were seen on one.
"""
from __future__ import annotations

# kind -> the kinds it explains: with a shared flow, or (an explainer about no flow: a port, an
# option) with overlapping time spans
EXPLAINS = {
    "pmtu_mismatch": ("capture_loss", "network_loss", "unreliable_gap", "psn_reuse", "timeout_retransmit"),
    "incast": ("ecn_congestion", "cnp_missing", "pfc_pause", "network_loss"),
    "pfc_storm": ("pfc_pause", "slow_receiver", "pfc_without_ecn", "timeout_retransmit"),
}


def order_by_cause(records: list[dict]) -> list[dict]:
    """Set each record's `explains`; move each explainer right before the first it explains."""
    for r in records:
        r["explains"] = ";".join(sorted({x["kind"] for x in records if x is not r and _explains(r, x)}))
    out = list(records)
    for r in records:
        if not r["explains"]:
            continue
        first = min(i for i, x in enumerate(out) if x is not r and _explains(r, x))
        at = out.index(r)
        if at > first:
            out.insert(first, out.pop(at))
    return out


def _explains(cause: dict, effect: dict) -> bool:
    if effect["kind"] not in EXPLAINS.get(cause["kind"], ()):
        return False
    mine = {f for f in str(cause["flows"]).split(";") if f}
    if mine:
        return bool(mine & {f for f in str(effect["flows"]).split(";") if f})
    return cause["start_ts"] <= effect["end_ts"] and effect["start_ts"] <= cause["end_ts"]


def fill_advice(records: list[dict], ctx) -> None:
    """`<p>` in advice becomes the one priority the finding's flows were seen on."""
    from roceview.diagnose.priority import flow_priorities

    for r in records:
        if "<p>" not in r["advice"]:
            continue
        seen: set[int] = set()
        for name in str(r["flows"]).split(";"):
            if name in ctx.flow:
                seen |= set(flow_priorities(ctx, name))
        if len(seen) == 1:
            r["advice"] = r["advice"].replace("<p>", str(seen.pop()))
