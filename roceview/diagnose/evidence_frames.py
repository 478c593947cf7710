"""The frames a finding rests on: what Wireshark's Expert Info gives, a way from the claim to
the packets.

A finding's evidence frames are the frames of the events (analysis/events.py) that its rule
counted: events of the kinds EVIDENCE names, of the finding's flows and their peers (a NAK or
a CNP travels the other way), inside the finding's time window. PFC frames belong to no flow:
a PFC finding takes the pauses of its window. `frames` lists the first, the last and up to
TELLING others, taken in turn from each kind (the NAK, the retransmission, the gap, the pause);
`frame_count` counts them all. The kinds judged from per-packet facts (bad_icrc,
truncated_frames, timestamps_backwards: PACKET_KINDS) list the facts' first examples and count
them all; `roceview.finding` marks each such packet (dissect, from its own columns). Kinds no
packet shows by itself (pmtu_mismatch, roce_version_mixed, ecn_not_enabled,
link_speed_mismatch, decode_warnings) list no frame. The RDMA CM kinds (cm_reject, cm_retry,
cm_slow_setup) list the CM MADs of their handshakes, read_depth_limited the first frames of the
READs that waited for a place (ops.csv rows), cnp_ignored / cnp_excess their CNPs (cc.csv): their
rules give them (diagnose/cm.py, read_depth.py, cc.py). pfc_before_ecn's rule picks its own among
its events (RULE_PICKED: the XOFFs before each episode's first CE evidence, and that; pfc_order.py),
pfc_violation the frames sent while paused past the response bound and their XOFFs (pfc_violation.py),
hol_victim the pause frames of its victims' paused periods and what they sent in them (pfc_victims.py).
"""
from __future__ import annotations

import numpy as np

from roceview.arrays import sorted_distinct

TELLING = 10

# finding kind -> the event kinds whose frames show it, the most telling first
EVIDENCE = {
    "network_loss": ("nak_seq", "retransmit", "gap", "timeout_retransmit", "nak_other"),
    "timeout_retransmit": ("timeout_retransmit",),
    "reordering": ("gap", "nak_seq", "retransmit"),
    "capture_loss": ("gap",),
    "unreliable_gap": ("gap",),
    "rnr": ("nak_rnr", "retransmit"),
    "remote_error": ("nak_other",),
    "invalid_rd_request": ("nak_other",),
    "psn_reuse": ("psn_reuse",),
    "ack_unsent_psn": ("ack_unsent_psn",),
    "duplicate_frames": ("duplicate",),
    "capture_points": ("duplicate",),
    "clock_skew": ("response_before_request", "timeout_retransmit"),
    "ecn_congestion": ("ecn_ce", "cnp"),
    "cnp_missing": ("ecn_ce",),
    "incast": ("ecn_ce", "cnp"),
    "pfc_storm": ("pfc_pause",),
    "pfc_pause": ("pfc_pause", "pfc_resume"),
    "slow_receiver": ("pfc_pause", "pfc_resume"),
    "pfc_without_ecn": ("pfc_pause",),
    "priority_mismatch": ("pfc_pause",),
    "pfc_before_ecn": ("pfc_pause", "cnp", "ecn_ce"),
    "pfc_violation": ("sent_while_paused", "pfc_pause"),
    "hol_victim": ("pfc_pause", "pfc_resume", "sent_while_paused"),
}
# kinds whose rule picks its frames among those events itself (the XOFFs before the first CE
# evidence, and that): `roceview.finding` takes the rule's frames, not every event of the kinds
RULE_PICKED = ("pfc_before_ecn", "pfc_violation", "hol_victim")
# kinds whose frames are mostly PFC frames (no BTH) though they name flows: filtered by the kind alone
KIND_FILTER_ONLY = ("hol_victim", "pfc_violation")
PACKET_KINDS = ("bad_icrc", "truncated_frames", "timestamps_backwards")
PFC_EVENTS = ("pfc_pause", "pfc_resume")     # flow: the pausing MAC, not a queue pair
WINDOWED = {"incast", "cnp_missing", "pfc_storm", "pfc_pause", "slow_receiver", "pfc_without_ecn",
            "priority_mismatch"}


def attach_frames(records: list[dict], ctx) -> None:
    """Set each record's `frames` (';'-separated, ascending) and `frame_count`."""
    for r in records:
        given = r.pop("frames_given", None)      # a rule over per-packet facts: its examples, its count
        frames, total = (sorted(given[0]), int(given[1])) if given is not None else evidence_frames(ctx, r)
        r["frames"] = ";".join(str(f) for f in frames)
        r["frame_count"] = total


def evidence_frames(ctx, record: dict) -> tuple[list[int], int]:
    per_kind = _per_kind(ctx, record)
    every = sorted_distinct(np.concatenate(per_kind)) if per_kind else np.zeros(0, np.int64)
    if not len(every):
        return [], 0
    return sorted({int(every[0]), int(every[-1]), *_in_turn(per_kind, TELLING)}), len(every)


def kinds_by_frame(result, config=None) -> tuple[np.ndarray, np.ndarray, "PacketKinds"]:
    """(frames, bits, packet kinds), frames ascending: every evidence frame of `result`'s
    findings and the finding kinds it shows (bit i: packets.flags.FINDING_KINDS[i]), for
    `roceview.finding`; and a PacketKinds over the PACKET_KINDS among the findings, which each
    packet shows by its own columns (one per pass over the capture: it carries the last stamp)."""
    from roceview.diagnose.config import DEFAULTS
    from roceview.diagnose.context import Context
    from roceview.packets.flags import FINDING_KINDS

    ctx = Context(result, config or DEFAULTS, getattr(result, "facts", None))
    frames, bits = [np.zeros(0, np.int64)], [np.zeros(0, np.uint64)]
    d = result.findings_table.data                       # start_ts, end_ts as int ns (records(): text)
    given = _given_frames(ctx, result, set(d["kind"]) if "kind" in d else set())
    for i in range(len(result.findings_table)):
        record = {k: d[k][i] for k in ("kind", "flows", "start_ts", "end_ts", "evidence")}
        if record["kind"] in FINDING_KINDS:
            per_kind = _per_kind(ctx, record) if record["kind"] not in RULE_PICKED else []
            every = np.concatenate([np.zeros(0, np.int64), *per_kind,
                                    np.asarray(given.get((record["kind"], record["flows"], record["evidence"]), ()),
                                               np.int64)])
            frames.append(every)
            bits.append(np.full(len(every), 1 << FINDING_KINDS.index(record["kind"]), np.uint64))
    frames, bits = np.concatenate(frames), np.concatenate(bits)
    order = np.argsort(frames, kind="stable")
    frames, bits = frames[order], bits[order]
    starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]]) if len(frames) else np.zeros(0, np.int64)
    packet_kinds = PacketKinds(tuple(k for k in PACKET_KINDS if k in set(d["kind"])))
    return frames[starts], np.bitwise_or.reduceat(bits, starts) if len(starts) else bits, packet_kinds


def _given_frames(ctx, result, kinds: set) -> dict:
    """(kind, flows, evidence) -> every frame of the findings whose rules give their frames
    rather than events: the RDMA CM kinds (their handshakes' MADs, diagnose/cm.py) and
    read_depth_limited (the READs that waited, diagnose/read_depth.py)."""
    from roceview.diagnose import cc, cm, pfc_order, pfc_victims, pfc_violation, read_depth

    out = cm.frames_by_finding(result, ctx.config) if kinds & set(cm.CM_KINDS) else {}
    if "read_depth_limited" in kinds:
        out.update(read_depth.frames_by_finding(ctx, result))
    if kinds & set(cc.CC_KINDS):
        out.update(cc.frames_by_finding(ctx, result))
    if pfc_order.KIND in kinds:
        out.update(pfc_order.frames_by_finding(ctx))
    if pfc_violation.KIND in kinds:
        out.update(pfc_violation.frames_by_finding(ctx))
    if pfc_victims.KIND in kinds:
        out.update(pfc_victims.frames_by_finding(ctx))
    return out


def _per_kind(ctx, record: dict) -> list[np.ndarray]:
    """The frames of each evidence kind of the finding, each ascending and distinct."""
    kinds = EVIDENCE.get(record["kind"], ())
    flows = _flows_and_peers(ctx, record["flows"])
    window = (int(record["start_ts"]), int(record["end_ts"])) if record["kind"] in WINDOWED else (0, 0)
    return [sorted_distinct(ctx.event_frames(k, None if k in PFC_EVENTS else flows, window)) for k in kinds]


def _flows_and_peers(ctx, flows: str) -> list[str]:
    names = [f for f in str(flows).split(";") if f]
    return sorted({p for name in names if name in ctx.flow for p in ctx.pair(name)} | set(names))


def _in_turn(per_kind: list[np.ndarray], limit: int) -> list[int]:
    """Up to `limit` frames, the first of each kind, then the second of each, ..."""
    out: list[int] = []
    depth = 0
    while len(out) < limit and any(depth < len(a) for a in per_kind):
        out += [int(a[depth]) for a in per_kind if depth < len(a)]
        depth += 1
    return out[:limit]


class PacketKinds:
    """The PACKET_KINDS bits of each batch of a capture read in order (timestamps going
    backwards need the packet before the batch)."""

    def __init__(self, kinds: tuple):
        from roceview.packets.flags import FINDING_KINDS

        self.bit = {k: np.uint64(1 << FINDING_KINDS.index(k)) for k in kinds}
        self.last_ts = None

    def bits(self, batch) -> np.ndarray:
        out = np.zeros(batch.n, np.uint64)
        ts = batch.cols["ts_ns"]
        if "timestamps_backwards" in self.bit and batch.n:
            from roceview.diagnose.facts import steps_back

            out[steps_back(ts, self.last_ts)[0]] |= self.bit["timestamps_backwards"]
        if batch.n:
            self.last_ts = int(ts[-1])
        for kind, column, bad in (("bad_icrc", "icrc_ok", False), ("truncated_frames", "truncated", True)):
            if kind in self.bit and column in batch.cols:
                hit = batch.mask(column) & (batch.cols[column] == bad)
                out[hit] |= self.bit[kind]
        return out


def add_finding_kinds(batch, frames, bits, packet_kinds: PacketKinds) -> None:
    """Add the `finding_kinds` column (roceview.finding) to a batch: by frame number (the
    findings' events), and by the packet's own columns for the kinds judged per packet (a bad
    ICRC, a cut frame, a step back in time). `frames`, `bits`: kinds_by_frame's."""
    from roceview.packets.flags import FINDING_COLUMN

    at = np.minimum(np.searchsorted(frames, batch.cols["frame"]), max(len(frames) - 1, 0))
    hit = frames[at] == batch.cols["frame"] if len(frames) else np.zeros(batch.n, bool)
    own = np.where(hit, bits[at] if len(bits) else 0, 0).astype(np.uint64)
    batch.cols[FINDING_COLUMN] = own | packet_kinds.bits(batch)


def finding_filter(record: dict) -> str | None:
    """The display filter that shows a finding's frames: its kind, and where it is about queue
    pairs, their destination QPs (two findings of one kind on other QPs stay apart). None when
    the finding lists no frame."""
    if not str(record.get("frames") or ""):
        return None
    text = f'roceview.finding == "{record["kind"]}"'
    if record["kind"] in KIND_FILTER_ONLY:
        return text
    qps = sorted({name.rpartition(":")[2] for name in str(record.get("flows") or "").split(";")
                  if name.rpartition(":")[2].startswith("0x")})
    return f"{text} && infiniband.bth.destqp in {{{', '.join(qps)}}}" if qps else text
