"""Frame and capture-quality findings: bad_icrc, truncated_frames, timestamps_backwards,
decode_warnings, clock_skew (clocks.py), and capture_loss as loss.py finds it."""
from __future__ import annotations

from roceview.diagnose.clocks import clock_findings
from roceview.diagnose.context import PSN_MOD, Context
from roceview.diagnose.finding import finding, psn_list
from roceview.units import count, duration, plural


def capture_findings(ctx: Context) -> list[dict]:
    out = _bad_icrc(ctx) + clock_findings(ctx)
    f = ctx.facts
    if f is not None and f.truncated_frames:
        out.append(finding(
            "info", "truncated_frames",
            f"{plural(f.truncated_frames, 'frame')} were cut before their end (snaplen, mirror truncation): "
            "sizes still come from the length fields, ICRCs of cut frames are not checked.",
            [], ctx.start_ns, ctx.end_ns, [f"{plural(f.truncated_frames, 'truncated frame')}, first: frame {', '.join(map(str, f.truncated_first))}"],
            "Fine for PSN analysis; capture with a larger snaplen to verify ICRCs or payloads."))
        out[-1]["frames_given"] = (f.truncated_first, f.truncated_frames)     # no event: the facts' examples
    if f is not None and f.ts_backwards:
        out.append(finding(
            "info", "timestamps_backwards",
            f"Timestamps go backwards {plural(f.ts_backwards, 'time')} "
            f"(by up to {duration(f.ts_backwards_max_ns)}): "
            "merged or multi-queue captures; delays measured across them are approximate.",
            [], ctx.start_ns, ctx.end_ns, [f"frames {', '.join(map(str, f.ts_backwards_frames))}"],
            "Capture on one queue or with hardware timestamps (`tcpdump -j adapter_unsynced`), or merge files with mergecap."))
        out[-1]["frames_given"] = (f.ts_backwards_frames, f.ts_backwards)
    n = int(ctx.summary.get("decode_warnings") or 0)
    if n:
        warnings = ctx.summary.get("warnings") or []
        out.append(finding("info", "decode_warnings", f"The reader reported {plural(n, 'warning')} (damaged or cut records).",
                           [], ctx.start_ns, ctx.end_ns, warnings[:3] or [plural(n, "warning")],
                           "Check the capture file (e.g. `capinfos`, `editcap`); numbers near the damage may be off."))
    return out


def _bad_icrc(ctx: Context) -> list[dict]:
    """bad_icrc, split by what the endpoints did. A NIC drops a packet whose ICRC fails (IBTA
    9.6.1.3, mlx5 counts it in rx_icrc_encapsulated), so an RC receiver that acknowledged such a
    packet with nothing resent and no NAK got it intact: the capture path (mirror, ERSPAN, capture
    NIC or tool) changed or lost the ICRC. An RC responder acknowledges PSN n only once it has
    every PSN up to n (IBTA 9.7.5.1.1), and with nothing resent the copies it has are the captured
    ones: an ACK after the last packet of a request class that covers that packet's PSN proves
    the class's bad-ICRC packets arrived intact, however few of them failed."""
    bad = ctx.flow_facts.nonzero("bad_icrc")
    if not bad:
        return []
    accepted = {n for n in bad if _acknowledged(ctx, n)}
    accepted |= {n for n in bad if (p := _peer(ctx, n)) is not None and p in accepted}   # their ACKs
    out = []
    if accepted:
        out.append(_icrc_finding(ctx, {n: bad[n] for n in accepted}, True))
    if set(bad) - accepted:
        out.append(_icrc_finding(ctx, {n: c for n, c in bad.items() if n not in accepted}, False))
    return out


def _peer(ctx: Context, name: str) -> str | None:
    return ctx.peer(name) if name in ctx.flow else None


def _acknowledged(ctx: Context, name: str) -> bool:
    """The receiver acknowledged a bad-ICRC request of this RC flow, which was never resent or NAKed."""
    ff, peer = ctx.flow_facts[name], _peer(ctx, name)
    if not ff.bad_requests or peer is None or ctx.flow[name]["transport"] not in ("RC", "XRC"):
        return False   # UC/UD have no ACKs; the RD range is ConnectX DC, whose ICRC use is vendor-defined
    if ctx.flow[name]["retransmitted_packets"] or ctx.flow[peer]["naks_seq"] or ctx.flow[peer]["naks_other"]:
        return False
    acks = ctx.flow_facts.get(peer)
    return acks is not None and any(ack_ts > ts and 0 <= (ack - psn) % PSN_MOD < PSN_MOD // 2
                                    for ts, psn in ff.bad_requests for ack_ts, ack in acks.response_last)


def _icrc_finding(ctx: Context, bad: dict, accepted: bool) -> dict:
    total = sum(bad.values())
    frames = ", ".join(map(str, ctx.facts.bad_icrc_frames))
    evidence = [f"{c:,} bad ICRC on {n}" for n, c in sorted(bad.items())[:5]] + [f"first frames {frames}"]
    if accepted:
        summary = (f"{plural(total, 'RoCE frame')} in {plural(len(bad), 'flow')} fail the ICRC check as captured, "
                   "yet the receivers acknowledged them and nothing was resent: the NICs got them intact, the "
                   "corruption is in the capture path (mirror, ERSPAN, capture NIC or tool), not on the wire.")
        evidence.append("ACKs cover the bad-ICRC requests; no retransmission, no NAK")
        advice = ("The endpoints are fine (their rx_icrc_encapsulated stays flat). Check the capture path: a mirror "
                  "or tunnel that rewrites fields the ICRC covers, a capture NIC or tool that does not keep the "
                  "ICRC; ICRC-based findings from this capture are void, the rest stands.")
    else:
        summary = (f"{plural(total, 'RoCE frame')} in {plural(len(bad), 'flow')} fail the ICRC check: corrupted on "
                   "the way, rewritten by a device in the path or capture point, or not standard RoCE.")
        advice = ("Read the receiver's RDMA hw counter rx_icrc_encapsulated (mlx5) and the port's `ethtool -S` "
                  "rx_crc_errors_phy, rx_symbol_err_phy, rx_pcs_symbol_err_phy and rx_corrected_bits_phy. A NIC drops "
                  "a bad-ICRC packet: on RC the sender resends it after a NAK or a timeout, on UC/UD it is lost. If "
                  "every frame fails, suspect the capture path (a mirror/tunnel rewriting invariant fields) or a "
                  "vendor transport (e.g. DC) before the wire.")
    flows = list(bad)
    known = [n for n in flows if n in ctx.flow]
    start = min(ctx.flow[n]["first_ts"] for n in known) if known else ctx.start_ns
    end = max(ctx.flow[n]["last_ts"] for n in known) if known else ctx.end_ns
    record = finding("info" if accepted else "warning", "bad_icrc", summary, flows, start, end, evidence, advice)
    # the facts' first bad-ICRC frames are of any flow: listed where every bad one is this finding's
    mine = total == sum(ctx.flow_facts.nonzero("bad_icrc").values())
    record["frames_given"] = (ctx.facts.bad_icrc_frames if mine else [], total)
    return record


def capture_loss_finding(captured: dict[str, list], host_drops: int | None = None) -> dict:
    """One finding for the capture: the mirror's drops are one cause, whatever flows they hit.
    When the capture tool counted drops of its own (live: tcpdump's "dropped by kernel" and
    "by interface"), those explain it first: the capture host, not the mirror."""
    gaps = [g for v in captured.values() for g in v]
    psns = sum(c for *_, c in gaps)
    worst = sorted(captured.items(), key=lambda kv: -sum(c for *_, c in kv[1]))
    evidence = [f"{name}: {plural(len(v), 'gap')} of {plural(sum(c for *_, c in v), 'PSN')} from PSN "
                f"{psn_list([f for _, f, _ in v], 3)}" for name, v in worst[:5]]
    if len(worst) > 5:
        evidence.append(plural(len(worst) - 5, "more flow"))
    evidence.append("no NAK from the receivers and no retransmission by the senders: the endpoints never missed them")
    evidence.append("RTTs of these flows are unreliable: the capture may also have missed ACKs, so a later ACK "
                    "covers requests whose own ACK was not captured (RTT samples spanning a gap are not taken)")
    if host_drops:
        evidence.insert(0, f"the capture tool counted {plural(host_drops, 'packet')} dropped by the kernel or "
                           "interface of the capture host during this capture")
    who = (f"the capture host dropped them ({count(host_drops)} kernel drops), not the network" if host_drops
           else "the mirror or capture host dropped them, not the network")
    summary = (f"The capture missed {plural(psns, 'packet')} in {plural(len(gaps), 'gap')} on "
               f"{plural(len(captured), 'flow')} that the endpoints never noticed: {who}.")
    host = ("The capture host dropped packets: give tcpdump a bigger buffer (`-B`), a snaplen of 128 (`-s 128`), "
            "capture on a CPU not busy with the analysis, or write with `tcpdump -w` and analyze the file after. "
            if host_drops else "")
    advice = (host + "Counts from this capture are lower bounds. Check the SPAN/ERSPAN session for oversubscription "
              "(both directions of a 100G link into one 100G port overflow it), the switch mirror drop "
              "counters, and the capture host (`ethtool -S` rx_discards_phy / rx_out_of_buffer, "
              "`tcpdump -B` buffer); mirror one direction, truncate frames (snaplen 128) or sample.")
    times = [t for t, *_ in gaps]
    return finding("warning", "capture_loss", summary, list(captured), min(times), max(times), evidence, advice)
