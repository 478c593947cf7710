"""Frame and capture-quality findings: bad_icrc, truncated_frames, timestamps_backwards,
decode_warnings."""
from __future__ import annotations

from roceview.diagnose.context import Context, span
from roceview.diagnose.finding import finding, plural


def capture_findings(ctx: Context) -> list[dict]:
    out = _bad_icrc(ctx)
    f = ctx.facts
    if f is not None and f.truncated_frames:
        out.append(finding(
            "info", "truncated_frames",
            f"{plural(f.truncated_frames, 'frame')} were cut before their end (snaplen, mirror truncation): "
            "sizes still come from the length fields, ICRCs of cut frames are not checked.",
            [], ctx.start_ns, ctx.end_ns, [f"{plural(f.truncated_frames, 'truncated frame')}, first: frame {', '.join(map(str, f.truncated_first))}"],
            "Fine for PSN analysis; capture with a larger snaplen to verify ICRCs or payloads."))
    if f is not None and f.ts_backwards:
        out.append(finding(
            "info", "timestamps_backwards",
            f"Timestamps go backwards {plural(f.ts_backwards, 'time')} (by up to {span(f.ts_backwards_max_ns)}): "
            "merged or multi-queue captures; delays measured across them are approximate.",
            [], ctx.start_ns, ctx.end_ns, [f"frames {', '.join(map(str, f.ts_backwards_frames))}"],
            "Capture on one queue or with hardware timestamps (`tcpdump -j adapter_unsynced`), or merge files with mergecap."))
    n = int(ctx.summary.get("decode_warnings") or 0)
    if n:
        warnings = ctx.summary.get("warnings") or []
        out.append(finding("info", "decode_warnings", f"The reader reported {plural(n, 'warning')} (damaged or cut records).",
                           [], ctx.start_ns, ctx.end_ns, warnings[:3] or [plural(n, "warning")],
                           "Check the capture file (e.g. `capinfos`, `editcap`); numbers near the damage may be off."))
    return out


def _bad_icrc(ctx: Context) -> list[dict]:
    bad = {n: ff.bad_icrc for n, ff in ctx.flow_facts.items() if ff.bad_icrc}
    if not bad:
        return []
    total = sum(bad.values())
    frames = ", ".join(map(str, ctx.facts.bad_icrc_frames))
    summary = (f"{plural(total, 'RoCE frame')} in {plural(len(bad), 'flow')} fail the ICRC check: corrupted on the way, "
               "rewritten by a device in the path or capture point, or not standard RoCE.")
    evidence = [f"{c:,} bad ICRC on {n}" for n, c in sorted(bad.items())[:5]] + [f"first frames {frames}"]
    advice = ("Read the receiver's RDMA hw counter rx_icrc_encapsulated and the port's FCS/symbol error counters; a "
              "NIC drops bad-ICRC packets, so the sender will retransmit them. If every frame fails, suspect the "
              "capture path (a mirror/tunnel rewriting invariant fields) or a vendor transport (e.g. DC) before the wire.")
    flows = list(bad)
    return [finding("warning", "bad_icrc", summary, flows, min(ctx.flow[n]["first_ts"] for n in flows if n in ctx.flow)
                    if any(n in ctx.flow for n in flows) else ctx.start_ns,
                    max(ctx.flow[n]["last_ts"] for n in flows if n in ctx.flow) if any(n in ctx.flow for n in flows)
                    else ctx.end_ns, evidence, advice)]
