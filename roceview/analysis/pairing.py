"""peer_qp: pair the two directions of a queue pair from the traffic.

Flow A->B (dest QP qB) and flow B->A (dest QP qA) are the two directions of one QP pair. Without
RDMA CM in the Batch (the CM MAD payload is not a column), pairs come from the traffic:
  1. lone pairing: exactly one open connected-mode flow A->B and one B->A: they pair, but stay
     open (a "lone" pair);
  2. PSN following: the ACK/response PSNs of a B->A flow equal request PSNs of an A->B flow in the
     same chunk; a pair is taken when each is the other's unique best match.
A flow is open while it is unpaired or lone-paired. Pairs from PSN evidence (and CM) are sticky.
A lone pair keeps gathering PSN evidence: evidence confirms it, or pairs its flows otherwise; lone
pairing runs again among the flows the evidence leaves open. So a second QP between the same two
hosts that starts chunks later finds the first pair confirmed rather than resting on the chunk
boundary: the pairs are those of the capture read as one chunk (given chunks that can hold a
request and its response). UD flows, QP1 (GSI) and CNP-only flows never pair.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.opcode_classes import TRANSPORT_CNP, TRANSPORT_UD


class Pairing:
    def __init__(self):
        self.peer = np.zeros(0, dtype=np.int64)
        self.lone = np.zeros(0, dtype=bool)      # paired only because each was alone so far

    def grow(self, n: int) -> None:
        if n > len(self.peer):
            self.peer = np.concatenate([self.peer, np.full(n - len(self.peer), -1, dtype=np.int64)])
            self.lone = np.concatenate([self.lone, np.zeros(n - len(self.lone), dtype=bool)])

    def unconfirmed_lone(self, registry, transport) -> np.ndarray:
        """At the end of the capture: flows paired as lone partners whose endpoint pair later
        showed another flow (not paired by evidence) in either direction. Such a pair rested on the chunk boundary, not on
        evidence: the caller unpairs them (and drops their RTT samples)."""
        flows = np.flatnonzero(self.lone[: registry.n] & (self.peer[: registry.n] >= 0))
        if len(flows) == 0:
            return flows
        t = transport[: registry.n]
        confirmed = (self.peer[: registry.n] >= 0) & ~self.lone[: registry.n]     # CM or PSN evidence
        conn = np.flatnonzero((t >= 0) & (t != TRANSPORT_UD) & (t != TRANSPORT_CNP) & (t < 6)
                              & (registry.qp != 1) & ~confirmed)
        pair_id, direction = self._endpoint_pairs(registry, conn)
        counts = np.bincount(pair_id * 2 + direction, minlength=2 * (pair_id.max() + 1)).reshape(-1, 2)
        still_lone = np.zeros(registry.n, dtype=bool)
        still_lone[conn] = (counts == 1).all(axis=1)[pair_id]
        bad = flows[~still_lone[flows]]
        self.peer[bad] = -1
        self.lone[bad] = False
        return bad

    def open(self) -> np.ndarray:
        """Flows still open to PSN evidence: unpaired, or paired only as lone partners."""
        return (self.peer < 0) | self.lone

    def candidates(self, registry, transport: np.ndarray) -> np.ndarray:
        t = transport[: registry.n]
        ok = self.open()[: registry.n] & (t >= 0) & (t != TRANSPORT_UD) & (t != TRANSPORT_CNP) & (t < 6)
        ok &= registry.qp != 1
        return np.flatnonzero(ok)

    def update(self, registry, transport, req_flow, req_psn, resp_flow, resp_psn, sent=None) -> np.ndarray:
        """Lone pairs, PSN evidence over the open flows, then lone pairs again among the flows
        the evidence left open (so that the pairs are those of reading the capture as one
        chunk, whichever chunk each flow first shows up in). Returns the flows whose lone pair
        the evidence broke (RTT samples taken through it are void)."""
        cand = self.candidates(registry, transport)
        if len(cand) < 2:
            return _NONE
        pair_id, direction = self._endpoint_pairs(registry, cand)
        self._lone(cand, pair_id, direction)
        cand_mask = np.zeros(len(self.peer), dtype=bool)
        cand_mask[cand] = True
        pid = np.full(len(self.peer), -1, dtype=np.int64)
        pid[cand] = pair_id * 2 + direction
        broken = self._psn_following(pid, cand_mask, req_flow, req_psn, resp_flow, resp_psn, sent)
        still = self.candidates(registry, transport)
        if 2 <= len(still) < len(cand):                   # evidence closed some: lone again
            self._lone(still, *self._endpoint_pairs(registry, still))
        return broken

    @staticmethod
    def _endpoint_pairs(registry, cand):
        ep = _row_ranks(np.concatenate([registry.src[cand], registry.dst[cand]]))
        a, b = ep[: len(cand)], ep[len(cand):]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        _, pair_id = np.unique(lo * (ep.max() + 1) + hi, return_inverse=True)
        return pair_id.reshape(-1), (a > b).astype(np.int64)

    def _lone(self, cand, pair_id, direction) -> None:
        key = pair_id * 2 + direction
        counts = np.bincount(key, minlength=2 * (pair_id.max() + 1)).reshape(-1, 2)
        lone = (counts == 1).all(axis=1)
        pick = lone[pair_id] & (self.peer[cand] < 0)      # (a lone pair already made stays)
        if not pick.any():
            return
        flows, keys = cand[pick], key[pick]
        order = np.argsort(keys, kind="stable")
        flows = flows[order].reshape(-1, 2)
        self.peer[flows[:, 0]] = flows[:, 1]
        self.peer[flows[:, 1]] = flows[:, 0]
        self.lone[flows.reshape(-1)] = True

    def _psn_following(self, pid, cand_mask, req_flow, req_psn, resp_flow, resp_psn, sent=None) -> np.ndarray:
        rq = cand_mask[req_flow]
        rs = cand_mask[resp_flow]
        if not rq.any() or not rs.any():
            return _NONE
        req_key = pid[req_flow[rq]] * (1 << 24) + req_psn[rq]
        resp_key = (pid[resp_flow[rs]] ^ 1) * (1 << 24) + resp_psn[rs]  # the reverse direction
        keys, first, inv = np.unique(req_key, return_index=True, return_inverse=True)
        owner = req_flow[rq][first]
        ambiguous = np.bincount(inv.reshape(-1), req_flow[rq] != owner[inv.reshape(-1)], len(keys)) > 0
        pos = np.minimum(np.searchsorted(keys, resp_key), len(keys) - 1)
        hit = (keys[pos] == resp_key) & ~ambiguous[pos]
        if sent is not None and hit.any():
            hit[hit] = ~_sent_by_another(pid, cand_mask, owner[pos[hit]], resp_psn[rs][hit], sent)
        if not hit.any():
            return _NONE
        return self._mutual_best(owner[pos[hit]], resp_flow[rs][hit])

    def _mutual_best(self, f: np.ndarray, r: np.ndarray) -> np.ndarray:
        n = len(self.peer)
        pairs, counts = np.unique(f * n + r, return_counts=True)
        pf, pr = pairs // n, pairs % n
        best_f = self._unique_best(pf, pr, counts)
        best_r = self._unique_best(pr, pf, counts)
        broken = []
        for a, b in best_f.items():
            if best_r.get(b) != a or a == b:
                continue
            if self.peer[a] == b:                        # evidence confirms a lone pair
                self.lone[a] = self.lone[b] = False
            elif (self.peer[a] < 0 or self.lone[a]) and (self.peer[b] < 0 or self.lone[b]):
                for x in (a, b):                         # evidence overrides lone pairs
                    old = self.peer[x]
                    if old >= 0:
                        self.peer[old], self.lone[old] = -1, False
                        broken += [x, int(old)]
                self.peer[a], self.peer[b] = b, a
                self.lone[a] = self.lone[b] = False
        return np.array(broken, dtype=np.int64)

    @staticmethod
    def _unique_best(x, y, counts) -> dict[int, int]:
        best: dict[int, tuple[int, int, bool]] = {}
        for xi, yi, c in zip(x.tolist(), y.tolist(), counts.tolist()):
            cur = best.get(xi)
            if cur is None or c > cur[1]:
                best[xi] = (yi, c, True)
            elif c == cur[1]:
                best[xi] = (cur[0], c, False)
        return {k: v[0] for k, v in best.items() if v[2]}


_NONE = np.zeros(0, dtype=np.int64)
_PSN_MOD = 1 << 24


def _sent_by_another(pid, cand_mask, owner, psn, sent) -> np.ndarray:
    """Whether each matched PSN also lies in the PSN range (first..highest, 24-bit serial
    arithmetic, IBTA 9.7.5.1.1) that another candidate flow of the owner's direction and endpoints
    has sent so far, in any chunk: such a match is no evidence. Two QPs between the same hosts
    whose PSN ranges overlap (both crossing 2^24, say) would otherwise pair crosswise whenever a
    chunk holds the requests of one and the ACKs of the other."""
    seen, first, high = sent
    cand = np.flatnonzero(cand_mask)
    order = np.argsort(pid[cand], kind="stable")
    members, keys = cand[order], pid[cand][order]
    lo = np.searchsorted(keys, pid[owner], side="left")
    count = np.searchsorted(keys, pid[owner], side="right") - lo
    out = np.zeros(len(owner), dtype=bool)
    for j in range(int(count.max(initial=0))):
        has = j < count
        other = members[np.minimum(lo + j, len(members) - 1)]
        has &= (other != owner) & seen[other]
        length = high[other] - first[other]
        inside = ((psn - first[other]) % _PSN_MOD <= length) | (length >= _PSN_MOD - 1)
        out |= has & inside
    return out


def _row_ranks(words: np.ndarray) -> np.ndarray:
    """Dense rank of each (n, 2) row in lexicographic order: np.unique(axis=0, return_inverse)
    without its structured-dtype sort (5x slower)."""
    order = np.lexsort((words[:, 1], words[:, 0]))
    w = words[order]
    new = np.ones(len(w), dtype=bool)
    new[1:] = (w[1:, 0] != w[:-1, 0]) | (w[1:, 1] != w[:-1, 1])
    ranks = np.empty(len(w), dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


class CmPairs:
    """peer_qp from RDMA CM (IBTA 12.6): a REQ carries the requester's QPN, the REP that
    answers it (its remote communication id is the REQ's local one) the responder's. Flow
    requester->responder has dest QP = the REP's QPN and pairs with responder->requester whose
    dest QP is the REQ's QPN. CM pairs are authoritative: they override pairs from traffic."""

    def __init__(self):
        # (local comm id, src words, dst words) -> QPN: a comm id is unique per CM node only,
        # so two host pairs may both use one (a REP matched to another pair's REQ was lost)
        self._req: dict[tuple, int] = {}
        self.pairs: list[tuple] = []          # ((src, dst, qp), (src, dst, qp)) flow keys

    def feed(self, batch) -> None:
        valid = batch.valid.get("cm_local_qpn")
        if "cm_local_qpn" not in batch.cols or (valid is not None and not valid.any()):
            return                                       # no CM MAD in this chunk
        rows = np.flatnonzero(batch.mask("cm_local_qpn") & (batch.cols["mad_class"] == 0x07))
        if len(rows) == 0:
            return
        src = np.ascontiguousarray(batch.cols["_src_addr"][rows]).view("<u8").reshape(-1, 2)
        dst = np.ascontiguousarray(batch.cols["_dst_addr"][rows]).view("<u8").reshape(-1, 2)
        for k, r in enumerate(rows.tolist()):
            self._one(batch, r, tuple(src[k].tolist()), tuple(dst[k].tolist()))

    def _one(self, batch, r: int, src: tuple, dst: tuple) -> None:
        attr, qpn = int(batch.cols["mad_attr_id"][r]), int(batch.cols["cm_local_qpn"][r])
        if attr == 0x0010:
            self._req[(int(batch.cols["cm_local_comm_id"][r]), src, dst)] = qpn
        elif attr == 0x0013 and batch.mask("cm_remote_comm_id")[r]:
            req_qpn = self._req.get((int(batch.cols["cm_remote_comm_id"][r]), dst, src))   # the REP goes back
            if req_qpn is not None:
                self.pairs.append(((dst, src, qpn), (src, dst, req_qpn)))

    def apply(self, registry, pairing: Pairing) -> np.ndarray:
        """Pair the flows of every CM handshake whose two directions have been seen. Returns the
        flows whose pairing it changed (RTT samples taken through the old one are void)."""
        if not self.pairs or registry.n == 0:
            return _NONE
        keys = [k for pair in self.pairs for k in pair]
        src = np.array([k[0] for k in keys], dtype=np.uint64)
        dst = np.array([k[1] for k in keys], dtype=np.uint64)
        qp = np.array([k[2] for k in keys], dtype=np.uint32)
        ids = registry.find(src, dst, qp).reshape(-1, 2)
        pairing.grow(registry.n)
        changed = []
        for a, b in ids[(ids >= 0).all(axis=1)].tolist():
            if pairing.peer[a] != b:
                changed += [a, b] + [int(o) for o in (pairing.peer[a], pairing.peer[b]) if o >= 0]
            for old in (pairing.peer[a], pairing.peer[b]):
                if old >= 0 and pairing.peer[old] in (a, b):
                    pairing.peer[old], pairing.lone[old] = -1, False
            pairing.peer[a], pairing.peer[b] = b, a
            pairing.lone[a] = pairing.lone[b] = False
        return np.array(changed, dtype=np.int64)
