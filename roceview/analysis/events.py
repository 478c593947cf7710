"""The anomaly log: one row per gap, retransmission, NAK, CNP, CE mark, PFC pause/resume, frame
sent while its destination paused its priority (pause_watch.py).

Rows are kept as numpy columns per chunk (kind code, two integer details) and turned into text
only once, at the end.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.opcode_classes import NAK_CODE_NAMES
from roceview.analysis.tables import EVENT_COLUMNS, Table

EVENT_KINDS = ("gap", "retransmit", "nak_seq", "nak_rnr", "nak_other", "timeout_retransmit", "cnp",
               "ecn_ce", "pfc_pause", "pfc_resume", "psn_reuse",
               "duplicate", "ack_unsent_psn", "response_before_request", "sent_while_paused")
KIND_CODE = {k: i for i, k in enumerate(EVENT_KINDS)}
_PFC_KINDS = (KIND_CODE["pfc_pause"], KIND_CODE["pfc_resume"])
_PAUSED = KIND_CODE["sent_while_paused"]      # a: the pause's MAC index * 9 + priority slot, b: its delay in ns


MAX_PER_KIND = 250_000   # a congested capture can CE-mark millions of packets: memory stays bounded


class EventLog:
    """One row per anomaly, the first MAX_PER_KIND of each kind; later ones are only counted
    (`dropped`), the per-flow counters in qps.csv stay exact."""

    def __init__(self, max_per_kind: int = MAX_PER_KIND):
        self._parts: list[tuple[np.ndarray, ...]] = []
        self.sink = None         # packet_flags.FlagSink of the chunk being analyzed, when flags are asked for
        self.max_per_kind = max_per_kind
        self.kept = {k: 0 for k in EVENT_KINDS}
        self.dropped = {k: 0 for k in EVENT_KINDS}

    def add(self, kind: str, ts, idx, flow, psn=None, a=None, b=None, rank=None, rel=None) -> None:
        """`flow` is a flow id (or, for PFC kinds, a MAC table index); psn -1 = none; rel: the row
        index of the related packet (-1 = none). The table is sorted at the end, so only the
        rows dropped past the budget depend on the order given: with `rank`, the kept ones are
        the first in stable order of rank. The per-packet flags see every event, past the budget
        too."""
        if self.sink is not None:
            self.sink.mark(kind, idx, a, rel)
        n = len(ts)
        room = max(0, self.max_per_kind - self.kept[kind])
        if n > room:
            if rank is not None and room:
                o = np.argsort(rank, kind="stable")[:room]
                ts, idx, flow = ts[o], idx[o], flow[o]
                psn, a, b, rel = (None if x is None else x[o] for x in (psn, a, b, rel))
            self.dropped[kind] += n - room
            n = room
        if n == 0:
            return
        self.kept[kind] += n
        zeros = np.zeros(n, dtype=np.int64)
        self._parts.append((np.asarray(ts[:n], np.int64), np.asarray(idx[:n], np.int64),
                            np.asarray(flow[:n], np.int64), np.full(n, KIND_CODE[kind], np.int8),
                            zeros - 1 if psn is None else np.asarray(psn[:n], np.int64),
                            zeros if a is None else np.asarray(a[:n], np.int64),
                            zeros if b is None else np.asarray(b[:n], np.int64),
                            zeros - 1 if rel is None else np.asarray(rel[:n], np.int64)))

    def count(self, kind: str) -> int:
        return self.kept[kind] + self.dropped[kind]

    def table(self, flow_names: list[str], mac_names: list[str]) -> Table:
        if not self._parts:
            return Table.empty(EVENT_COLUMNS)
        ts, idx, flow, kind, psn, a, b, rel = (np.concatenate(c) for c in zip(*self._parts))
        order = np.lexsort((kind, idx, ts))
        ts, idx, flow, kind, psn, a, b, rel = (x[order] for x in (ts, idx, flow, kind, psn, a, b, rel))
        is_pfc = np.isin(kind, _PFC_KINDS)
        names = np.empty(len(flow), dtype=object)         # no per-event Python: 250 k events a kind
        if len(flow_names):
            names[~is_pfc] = np.asarray(flow_names, dtype=object)[flow[~is_pfc]]
        if len(mac_names):
            names[is_pfc] = np.asarray(mac_names, dtype=object)[flow[is_pfc]]
        names = names.tolist()
        # many rows say the same (a capture of two points: one offset): each distinct
        # (kind, a, b) is put in words once (a frame sent while paused: its delay is a column)
        said = np.where(kind == _PAUSED, 0, b)
        by = np.lexsort((said, a, kind))
        new = np.ones(len(by), bool)
        new[1:] = (np.diff(kind[by]) != 0) | (np.diff(a[by]) != 0) | (np.diff(said[by]) != 0)
        first = by[new]
        words = np.array([_detail(*t, mac_names) for t in zip(kind[first].tolist(), a[first].tolist(),
                                                              said[first].tolist())], dtype=object)
        which = np.empty(len(by), np.int64)
        which[by] = np.cumsum(new) - 1
        details = words[which].tolist()
        data = {"ts": ts, "flow": names, "kind": [EVENT_KINDS[k] for k in kind.tolist()], "psn": psn,
                "detail": details, "frame": idx + 1, "related_frame": np.where(rel >= 0, rel + 1, -1)}
        data.update(structured(kind, a, b))
        return Table(EVENT_COLUMNS, data)


def structured(kind: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict:
    """The numbers `detail` says in words, one column each (-1 / "" where a kind has none)."""
    def where(kinds, values):
        m = np.isin(kind, [KIND_CODE[k] for k in kinds])
        return np.where(m, values, -1)
    pfc = np.isin(kind, _PFC_KINDS)
    paused = kind == _PAUSED
    slot = np.where(pfc, np.clip(a, 0, 8), np.where(paused, a % 9, 9))
    prio = np.array([str(p) for p in range(8)] + ["all", ""], dtype=object)
    return {"psn_count": where(("gap",), a), "first_missing_psn": where(("gap",), b),
            "aeth_syndrome": where(("nak_seq", "nak_rnr", "nak_other"), a),
            "rnr_timer": where(("nak_rnr",), a & 0x1F),
            "pfc_priority": prio[slot].tolist(),
            "pfc_quanta": where(("pfc_pause", "pfc_resume"), b),
            "resend_delay_ns": np.where((kind == KIND_CODE["timeout_retransmit"]) & (a >= 0), a, -1),
            "copy_delay_ns": where(("duplicate",), a),
            "early_ns": where(("response_before_request",), a),
            "sent_beyond": where(("timeout_retransmit",), b), "pause_delay_ns": np.where(paused, b, -1)}


def nak_meaning(syndrome: int) -> str:
    """What a NAK's AETH syndrome means in words (IBTA Table 44)."""
    if (syndrome >> 5) & 3 == 3:
        return NAK_CODE_NAMES.get(syndrome & 0x1F, "reserved code")
    return "reserved syndrome"


def _detail(kind: int, a: int, b: int, mac_names=()) -> str:
    name = EVENT_KINDS[kind]
    if name == "gap":
        return f"{a} PSN{'s' if a != 1 else ''} skipped from {b}"
    if name in ("nak_seq", "nak_other"):
        return f"AETH syndrome 0x{a:02x}: {nak_meaning(a)}"
    if name == "nak_rnr":
        return f"AETH syndrome 0x{a:02x}: RNR NAK, timer code {a & 0x1F}"
    if name == "timeout_retransmit":
        after = f"{a / 1000:.3f} us after the original send" if a >= 0 else "original send not captured"
        return f"retransmission with no NAK from the peer since the previous one, {after}"
    if name == "psn_reuse":
        return ("request PSN already consumed by the requester's READ request: the responder takes it for a "
                "duplicate, ACKs it again and does not execute it")
    if name == "ack_unsent_psn":
        return f"response to a PSN the requester never sent (it sent {a}..{b})"
    if name == "duplicate":
        return f"the same frame captured again, {a / 1000:.3f} us after the first capture (related frame)"
    if name == "response_before_request":
        return f"stamped {a / 1000:.3f} us before the request it answers (related frame): the capture's clocks disagree"
    if name in ("pfc_pause", "pfc_resume"):
        prio = "all" if a == 8 else str(a)
        return f"priority {prio} quanta {b}"
    if name == "sent_while_paused":
        mac, prio = mac_names[a // 9] if a // 9 < len(mac_names) else "?", a % 9
        held = "every priority (802.3x PAUSE)" if prio == 8 else f"priority {prio}"
        return f"sent toward {mac} while it paused {held} (related frame: the XOFF that began the pause)"
    return ""
