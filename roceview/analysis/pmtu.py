"""Path MTU per path, from the traffic, and the PSN span of READ requests.

A fabric can mix MTUs (a 4096 storage network beside 1024 legacy hosts), so the evidence is
kept per pair of endpoints, either direction: READ responses travel back over the READ's path.

- A FIRST or MIDDLE packet carries exactly one path MTU of payload (IBTA 9.7.7): the largest such
  payload that is an IBTA MTU (256..4096) seen so far on the path is its path MTU ("exact"). Rows
  before the first such packet of their path use the path's first one in the chunk (the Analyzer
  holds chunks back until it shows up, so that does not depend on chunking).
- An ONLY or LAST packet (RC, UC, RD, XRC) carries at most one path MTU: its payload, rounded up to an IBTA MTU, is
  a lower bound (a 4096-byte READ at path MTU 4096 is answered by one READ RESPONSE ONLY).
A READ request's span is then ceil(DMA length / exact MTU) when the path's MTU is known; else it
is only known to lie between ceil(length / 4096) and ceil(length / lower bound): the READ is
given the smallest span, never one larger than the responses seen allow, and the requester's
next PSN decides within that range (psn.py `slack`). Only per-path maxima cross chunks.

A CM REQ (RDMA CM, IBTA 12.6.5) names the connection's path MTU: it is exact evidence for its
two endpoints from the chunk it arrives in (`from_cm`, before the chunk may be held back).

`--pmtu` is taken as given, but the evidence is still gathered: a capture that contradicts it
(a FIRST/MIDDLE payload of another size, a payload larger than it) is reported (`contradiction`).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.segments import group_bounds, seg_running_max

FALLBACK_PMTU = 1024  # the summary's path MTU when nothing shows one (RoCE default on 1500-byte links)
MIN_PMTU, MAX_PMTU = 256, 4096


def is_pmtu(payload: np.ndarray) -> np.ndarray:
    """256, 512, 1024, 2048 or 4096 (IBTA path MTUs)."""
    return (payload >= 256) & (payload <= 4096) & ((payload & (payload - 1)) == 0)


def mtu_at_least(payload: np.ndarray) -> np.ndarray:
    """The smallest IBTA MTU that holds `payload` bytes (0 for payloads no MTU holds or none)."""
    p = np.asarray(payload, dtype=np.int64)
    out = np.full(len(p), MIN_PMTU, dtype=np.int64)
    for mtu in (512, 1024, 2048, 4096):
        out[p > mtu // 2] = mtu
    out[(p <= 0) | (p > MAX_PMTU)] = 0
    return out


def _only_or_last() -> np.ndarray:
    t = np.zeros(256, dtype=bool)
    for base in (0x00, 0x20, 0x40, 0xA0):
        for low in (0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0A, 0x0B, 0x0F, 0x10, 0x16, 0x17):
            t[base | low] = op.OPCLASS[base | low] in (op.REQUEST, op.READ_RESPONSE)
    return t


ONLY_OR_LAST = _only_or_last()


def path_keys(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """One uint64 per unordered endpoint pair ((n, 2) uint64 address words each)."""
    swap = (src[:, 0] > dst[:, 0]) | ((src[:, 0] == dst[:, 0]) & (src[:, 1] > dst[:, 1]))
    lo, hi = np.where(swap[:, None], dst, src), np.where(swap[:, None], src, dst)
    with np.errstate(over="ignore"):
        h = lo[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ lo[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= hi[:, 0] * np.uint64(0x165667B19E3779F9) ^ hi[:, 1] * np.uint64(0xD6E8FEB86659FD93)
        h ^= h >> np.uint64(29)
    return h


class PathMtu:
    def __init__(self, given: int | None = None):
        self.given = given
        self.by_path: dict[int, int] = {}               # exact (FIRST/MIDDLE) per path
        self.lower_by_path: dict[int, int] = {}         # lower bound (ONLY/LAST) per path
        self.seen = 0                                   # largest exact anywhere (0: none yet)
        self.largest_payload = 0                        # largest ONLY/LAST bound anywhere
        self.pending: set[int] = set()                  # paths of held READs still without evidence
        self.other_sizes: set[int] = set()              # FIRST/MIDDLE sizes other than `given`
        self._changed: set[int] = set()                 # paths whose evidence grew (flow_bounds)
        self._flow_exact = np.zeros(0, dtype=np.int64)
        self._flow_lower = np.zeros(0, dtype=np.int64)

    def hold(self, batch, opcode_col: str, roce: np.ndarray, holding: bool) -> bool:
        """Whether the Analyzer must hold this chunk (and those before it) until a later chunk
        shows the path MTU of a READ request's path: a READ's PSN span depends on it."""
        if self.given or opcode_col not in batch.cols:
            return holding
        opcode = batch.cols[opcode_col]
        if not self.pending and not op.may_be_read_request(opcode).any():
            return holding                              # the usual case: a cheap test suffices
        reads = op.OPCLASS[opcode] == op.READ_REQUEST
        if not self.pending and not reads.any():
            return holding
        valid = batch.mask(opcode_col) & roce[batch.cols["_proto"]]
        payload = batch.cols.get("payload_len")
        fm = valid & op.FIRST_OR_MIDDLE[opcode]
        fm = fm & batch.mask("payload_len") & is_pmtu(payload.astype(np.int64)) if payload is not None else fm & False
        reads &= valid
        keys = self._keys(batch, reads | fm)
        self.pending |= set(keys[reads[reads | fm]].tolist()) - set(self.by_path)
        self.pending -= set(keys[fm[reads | fm]].tolist())
        return holding or bool(self.pending)

    def from_cm(self, batch) -> None:
        """Path MTUs of the CM REQs in this batch (column cm_path_mtu: 1..5 = 256..4096)."""
        valid = batch.valid.get("cm_path_mtu")
        if "cm_path_mtu" not in batch.cols or (valid is not None and not valid.any()):
            return
        code = batch.cols["cm_path_mtu"].astype(np.int64)
        rows = np.flatnonzero(batch.mask("cm_path_mtu") & (code >= 1) & (code <= 5))
        if len(rows) == 0:
            return
        mtus = 128 << code[rows]
        if self.given:
            self.other_sizes |= set(mtus.tolist()) - {int(self.given)}
            return
        for key, mtu in zip(self._keys(batch, rows).tolist(), mtus.tolist()):
            self.by_path[key] = max(self.by_path.get(key, 0), mtu)
            self._changed.add(key)
            self.pending.discard(key)
            self.seen = max(self.seen, mtu)

    @staticmethod
    def _keys(batch, rows: np.ndarray) -> np.ndarray:
        words = [np.ascontiguousarray(batch.cols[c][rows]).view("<u8").reshape(-1, 2) for c in ("_src_addr", "_dst_addr")]
        return path_keys(*words)

    @staticmethod
    def flow_paths(registry) -> np.ndarray:
        """The path key of every registered flow."""
        return path_keys(np.asarray(registry.src, dtype=np.uint64).reshape(-1, 2),
                          np.asarray(registry.dst, dtype=np.uint64).reshape(-1, 2))

    def per_row(self, path: np.ndarray, payload: np.ndarray, opcode: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(exact path MTU or 0 when unknown, lower bound or 0) for every row, from the rows
        given in capture order (FIRST/MIDDLE, ONLY/LAST with payload, READ requests)."""
        exact_ev = np.where(op.FIRST_OR_MIDDLE[opcode] & is_pmtu(payload), payload, 0)
        lower_ev = np.where(ONLY_OR_LAST[opcode], mtu_at_least(payload), 0)
        exact = self._running(path, exact_ev, self.by_path, True, self._changed)
        lower = self._running(path, lower_ev, self.lower_by_path, False, self._changed)
        self.largest_payload = max(self.largest_payload, int(lower_ev.max(initial=0)))
        if self.given:              # evidence kept only to check it (and for flow_bounds)
            self.other_sizes |= set(np.unique(exact_ev[exact_ev > 0]).tolist()) - {int(self.given)}
            n = len(payload)
            return np.full(n, int(self.given), dtype=np.int64), np.zeros(n, dtype=np.int64)
        self.seen = max(self.seen, int(exact_ev.max(initial=0)))
        return exact, lower

    @staticmethod
    def _running(path: np.ndarray, ev: np.ndarray, carried: dict, fill_ahead: bool, changed: set) -> np.ndarray:
        """Per row the largest evidence of its path so far (carried from earlier chunks, this
        row included); with fill_ahead, rows before their path's first evidence take it."""
        ev = ev.astype(np.int64)
        paths, inv = np.unique(path, return_inverse=True)
        inv = inv.reshape(-1)
        order = np.argsort(inv, kind="stable")
        starts, lengths, gid = group_bounds(inv[order])
        init = np.array([carried.get(int(p), 0) for p in paths], dtype=np.int64)
        before, final = seg_running_max(ev[order], starts, lengths, gid, init)
        running = np.empty_like(ev)
        running[order] = np.maximum(before, ev[order])
        for p, m, i in zip(paths.tolist(), final.tolist(), init.tolist()):
            if m > i:
                carried[p] = m
                changed.add(p)
        if not fill_ahead:
            return running
        first = np.zeros(len(paths), dtype=np.int64)      # the path's first evidence in the chunk
        has = np.flatnonzero(ev[order] > 0)
        first[gid[has[::-1]]] = ev[order][has[::-1]]
        return np.where(running > 0, running, first[inv])

    def flow_bounds(self, flow_paths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per flow the carried exact MTU and lower bound of its path: rows whose payload does not
        exceed them cannot change any evidence, so the caller looks only at the others."""
        n_old = len(self._flow_exact)
        if len(flow_paths) > n_old:
            new = flow_paths[n_old:].tolist()
            self._flow_exact = np.concatenate([self._flow_exact, [self.by_path.get(p, 0) for p in new]]).astype(np.int64)
            self._flow_lower = np.concatenate([self._flow_lower, [self.lower_by_path.get(p, 0) for p in new]]).astype(np.int64)
        if self._changed:
            keys = np.fromiter(self._changed, dtype=np.uint64, count=len(self._changed))
            for f in np.flatnonzero(np.isin(flow_paths[:n_old], keys)).tolist():
                p = int(flow_paths[f])
                self._flow_exact[f] = self.by_path.get(p, 0)
                self._flow_lower[f] = self.lower_by_path.get(p, 0)
            self._changed.clear()
        return self._flow_exact, self._flow_lower

    def read_spans(self, dmalen: np.ndarray, exact: np.ndarray, lower: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(span, slack) of READ requests: ceil(length / MTU) where the MTU is known, else the
        smallest span any MTU allows and how many PSNs more the largest would take."""
        dmalen = dmalen.astype(np.int64)
        known = exact > 0
        smallest = np.maximum(1, -(-dmalen // MAX_PMTU))
        largest = np.maximum(1, -(-dmalen // np.maximum(lower, MIN_PMTU)))
        span = np.where(known, np.maximum(1, -(-dmalen // np.maximum(exact, 1))), smallest)
        return span, np.where(known, 0, largest - smallest)

    def contradiction(self) -> str | None:
        """Why the capture contradicts `--pmtu`, or None."""
        if not self.given:
            return None
        why = []
        if self.other_sizes:
            why.append(f"FIRST/MIDDLE packets or CM REQs show path MTU {', '.join(map(str, sorted(self.other_sizes)))}")
        if self.largest_payload > int(self.given):
            why.append(f"a packet carries more than {self.given} bytes of payload (needs path MTU >= "
                       f"{self.largest_payload})")
        return "; ".join(why) or None
