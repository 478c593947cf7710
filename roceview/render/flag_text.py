"""A packet's analysis flags (roceview.packets.flags, packets-table columns flags / missing_psns /
rel_frame / rtt_ns) in words: the bracketed tags of a `dissect` line (like tshark's
`[TCP Retransmission]`), the sentences of the `-V` "Analysis" subtree, the names of `--jsonl`."""
from __future__ import annotations

from dissectors.ib import NAK_CODES, RNR_TIMER_MS
from roceview.packets.flags import FLAG_FIELDS, Flag
from roceview.units import duration, plural

ANALYSIS_NAMES = ("flags", "missing_psns", "rel_frame", "rtt_ns")
# shown by the line itself already ([bad ICRC], [truncated]): not repeated as tags
TAGGED = int(~(Flag.ICRC_BAD | Flag.TRUNCATED) & 0xFFFFFFFF)
# plain ints: an IntFlag operation costs a Python call per packet
GAP, RETRANSMISSION, TIMEOUT, PSN_REUSE, DUPLICATE, NAK, RNR_NAK, ECN_CE, CNP, ICRC_BAD, TRUNCATED, \
    PFC_PAUSE, PFC_RESUME, RTT_ACK = (int(f) for f in Flag)
_COLOUR = {"error": "\x1b[31m", "warn": "\x1b[33m", "note": "\x1b[36m"}


_NAMED = tuple((f.name, int(f.flag)) for f in FLAG_FIELDS)


def flag_names(flags: int) -> list[str]:
    """The filter names (roceview.<name>) of the bits set."""
    return [name for name, bit in _NAMED if flags & bit] if flags else []


def _frame(rel) -> str:
    return f"frame {rel}" if rel is not None else ""


def _pause(row: dict, quanta: list, gbps: float) -> str:
    """Priorities paused and for how long at the link speed (quanta x 512 bit times, 802.1Qbb),
    the time as the report writes one (units.duration: '335.539 us', '1.342 ms')."""
    ns = lambda q: duration(q * 512 / gbps)      # noqa: E731 (ns per quantum: 512 / Gb/s)
    if row.get("pause_quanta") is not None and row.get("proto") == "pause":
        return f"all {ns(row['pause_quanta'])}"
    en = row.get("pfc_enable") or 0
    return " ".join(f"P{p} {ns(quanta[p])}" for p in range(8) if en >> p & 1 and quanta[p])


def _resumed(row: dict, quanta: list) -> str:
    if row.get("proto") == "pause":
        return "all"
    en = row.get("pfc_enable") or 0
    return " ".join(f"P{p}" for p in range(8) if en >> p & 1 and not quanta[p])


def tags(row: dict, quanta: list, gbps: float = 100.0) -> list[tuple[str, str]]:
    """(text, severity) of each flag, in bit order; severity: error, warn or note."""
    flags = row.get("flags") or 0
    rel, out = row.get("rel_frame"), []
    if flags & GAP:
        out.append((f"PSN gap: {row.get('missing_psns')} missing", "error"))
    if flags & TIMEOUT:
        out.append((f"Timeout retransmission of {_frame(rel)}" if rel else "Timeout retransmission", "error"))
    elif flags & RETRANSMISSION:
        out.append((f"Retransmission of {_frame(rel)}" if rel else "Retransmission", "error"))
    if flags & PSN_REUSE:
        out.append(("PSN reuse", "error"))
    if flags & DUPLICATE:
        out.append(("Duplicate frame", "warn"))
    if flags & NAK:
        text = f"NAK {NAK_CODES.get(row.get('aeth_code'), row.get('aeth_code'))}"
        out.append((text + (f", gap at {_frame(rel)}" if rel else ""), "error"))
    if flags & RNR_NAK:
        code = row.get("aeth_code")
        out.append((f"RNR NAK: retry in {RNR_TIMER_MS[code]:g} ms" if code is not None else "RNR NAK", "error"))
    if flags & ECN_CE:
        out.append(("ECN CE", "warn"))
    if flags & CNP:
        out.append((f"CNP for CE {_frame(rel)}" if rel else "CNP", "warn"))
    if flags & PFC_PAUSE:
        out.append((f"Pause {_pause(row, quanta, gbps)}".rstrip(), "warn"))
    if flags & PFC_RESUME:
        out.append((f"Resume {_resumed(row, quanta)}".rstrip(), "note"))
    if flags & RTT_ACK:
        ns = row.get("rtt_ns")
        out.append((f"RTT {duration(ns)} to {_frame(rel)}" if ns is not None and rel else "RTT sample", "note"))
    return out


def tag_text(row: dict, quanta: list, gbps: float = 100.0, colour: bool = False) -> str:
    """`[PSN gap: 9 missing] [Retransmission of frame 41]`, ANSI-coloured when asked."""
    parts = []
    for text, severity in tags(row, quanta, gbps):
        parts.append(f"{_COLOUR[severity]}[{text}]\x1b[0m" if colour else f"[{text}]")
    return " ".join(parts)


def _missing(n) -> tuple[str, str]:
    """('the PSN', 'was'), ('the 9 PSNs', 'were'); the count unknown: ('the PSNs', 'were')."""
    if n is None:
        return "the PSNs", "were"
    return ("the PSN", "was") if int(n) == 1 else (f"the {plural(n, 'PSN')}", "were")


def sentences(row: dict, quanta: list, flow: str, gbps: float = 100.0) -> list[str]:
    """One sentence per flag for `dissect -V`, naming the related frame and the flow."""
    flags = row.get("flags") or 0
    rel, psn, out = row.get("rel_frame"), row.get("psn"), []
    if flags & GAP:
        what, verb = _missing(row.get("missing_psns"))
        out.append(f"PSN gap: {what} before PSN {psn} of {flow} {verb} not seen "
                   "(lost in the network, or by the capture).")
    if flags & RETRANSMISSION:
        kind = "timeout retransmission (no NAK since the previous resend)" \
            if flags & TIMEOUT else "retransmission"
        first = f"first carried by frame {rel}" if rel else "first send not captured"
        out.append(f"A {kind} of PSN {psn} on {flow}: {first}.")
    if flags & PSN_REUSE:
        out.append(f"PSN {psn} on {flow} was already consumed by an earlier READ request of the requester.")
    if flags & DUPLICATE:
        out.append(f"The same frame as the previous packet of {flow}: the capture saw it twice.")
    if flags & (NAK | RNR_NAK):
        what = next(t for t, _ in tags(dict(row, rel_frame=None), quanta, gbps) if "NAK" in t)
        gap = f"; the gap it reports was opened by frame {rel}" if rel and flags & NAK else ""
        out.append(f"{what} from {flow} refusing PSN {psn}{gap}.")
    if flags & ECN_CE:
        out.append(f"A switch marked this packet of {flow} Congestion Experienced (ECN CE, RFC 3168).")
    if flags & CNP:
        answer = f"the last CE-marked packet before it is frame {rel}" if rel else "no CE-marked packet it answers was seen"
        out.append(f"A congestion notification packet to {flow}: {answer}.")
    if flags & PFC_PAUSE:
        out.append(f"Pauses {_pause(row, quanta, gbps)} at {gbps:g} Gb/s (quanta x 512 bit times).")
    if flags & PFC_RESUME:
        out.append(f"Resumes {_resumed(row, quanta)} (quanta 0).")
    if flags & ICRC_BAD:
        out.append("The ICRC does not match the packet (IBTA 7.8.1): corrupted on the wire or in the capture path.")
    if flags & TRUNCATED:
        out.append("The frame was cut before its end (snaplen): headers past the cut are absent.")
    if flags & RTT_ACK and row.get("rtt_ns") is not None:
        out.append(f"Closes an RTT sample of {duration(row['rtt_ns'])} on {flow}: the request was frame {rel}.")
    return out
