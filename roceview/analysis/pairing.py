"""peer_qp: pair the two directions of a queue pair from the traffic.

Flow A->B (dest QP qB) and flow B->A (dest QP qA) are the two directions of one QP pair. Without
RDMA CM in the Batch (the CM MAD payload is not a column), pairs come from the traffic:
  1. PSN following: a response-space packet (ACK, NAK, READ response, ATOMIC ACK) of an unpaired
     B->A flow whose PSN lies in the request PSNs (first..highest, 24-bit serial arithmetic) that
     exactly one A->B flow has sent before it, in any chunk (or up to AHEAD beyond the highest when
     that flow is the only one A->B has sent from: a tap may stamp a response before its
     request), pairs the two when both are still
     unpaired. Evidence is taken row by row in capture order, so a pair is made at the same row
     however the capture is cut into chunks, and it holds from that row (`since`): what is read
     through a pairing (RTT, operations, timeouts) sees it from there on in one chunk as in many.
  2. lone pairing, at the end of the capture: exactly one unpaired connected-mode flow A->B and one
     B->A pair (UC, or RC without a response that is evidence). Made only at the end, where every
     flow is known: made earlier, on a chunk boundary, it paired flows that were not one QP
     whenever the other flows of the two hosts came chunks later.
Pairs are sticky (only RDMA CM overrides them). UD flows, QP1 (GSI) and CNP-only flows never pair.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.opcode_classes import TRANSPORT_CNP, TRANSPORT_UD

_NONE = np.zeros(0, dtype=np.int64)
_PSN_MOD = 1 << 24
_ALWAYS = -(1 << 62)             # `since` of a pair that holds from the start
# PSNs beyond the highest sent that a response stamped before its request may be, as evidence: a
# tap's clock a few microseconds off at 100 Gb/s (causality.py's EARLY_PSNS, 2^16, is the bound
# for judging a pair's responses; far less here, where another QP's responses may lie beyond)
AHEAD = 256


class Pairing:
    def __init__(self):
        self.peer = np.zeros(0, dtype=np.int64)
        self.since = np.zeros(0, dtype=np.int64)  # row index from which the pair holds
        self.lone = np.zeros(0, dtype=bool)       # paired at the end as lone partners
        self.direction = np.zeros(0, dtype=np.int64)   # id of the flow's (source, destination)
        self.reverse = np.zeros(0, dtype=np.int64)     # id of its (destination, source)
        self._ids: dict[tuple, int] = {}

    def grow(self, n: int) -> None:
        if n > len(self.peer):
            extra = n - len(self.peer)
            self.peer = np.concatenate([self.peer, np.full(extra, -1, dtype=np.int64)])
            self.since = np.concatenate([self.since, np.full(extra, _ALWAYS, dtype=np.int64)])
            self.lone = np.concatenate([self.lone, np.zeros(extra, dtype=bool)])

    def directions(self, registry) -> None:
        """Give the flows registered since the last call their endpoint-pair ids (a dict over the
        new flows' distinct endpoint pairs: work per new flow, not per packet)."""
        known = len(self.direction)
        if registry.n <= known:
            return
        words = np.concatenate([registry.src[known: registry.n], registry.dst[known: registry.n]], axis=1)
        uniq, inv = np.unique(words, axis=0, return_inverse=True)
        ids = self._ids
        fwd = [ids.setdefault(tuple(w), len(ids)) for w in uniq.tolist()]
        rev = [ids.setdefault(tuple(w[2:] + w[:2]), len(ids)) for w in uniq.tolist()]
        inv = inv.reshape(-1)
        self.direction = np.concatenate([self.direction, np.asarray(fwd, dtype=np.int64)[inv]])
        self.reverse = np.concatenate([self.reverse, np.asarray(rev, dtype=np.int64)[inv]])

    def peer_at(self, flow: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Each flow's peer as of row `idx` (-1: not paired yet then)."""
        peer = self.peer.take(flow)
        return np.where(self.since.take(flow) <= idx, peer, -1)

    def open(self) -> np.ndarray:
        """Flows still open to PSN evidence: unpaired."""
        return self.peer < 0

    def candidates(self, registry, transport: np.ndarray) -> np.ndarray:
        """Mask of the flows that may pair: a known connected-mode transport, not QP1."""
        t = transport[: registry.n]
        return (t >= 0) & (t != TRANSPORT_UD) & (t != TRANSPORT_CNP) & (t < 6) & (registry.qp != 1)

    def update(self, registry, transport, evidence) -> np.ndarray:
        """Pair flows from this chunk's PSN evidence (chunk_psn.pairing_evidence), in capture
        order: a pair is made at its first evidence row, when both flows are still unpaired.
        Returns the flows whose pairing changed to void (none: evidence pairs only unpaired flows)."""
        if evidence is None:
            return _NONE
        self.directions(registry)
        resp_flow, resp_psn, resp_idx = evidence.responses
        owner = self._owners(self.candidates(registry, transport), evidence, resp_flow, resp_psn, resp_idx)
        ok = (owner >= 0) & (owner != resp_flow)
        if not ok.any():
            return _NONE
        o, r, i = owner[ok], resp_flow[ok], resp_idx[ok]
        order = np.lexsort((i, r, o))
        first = np.ones(len(order), dtype=bool)          # each (owner, responder)'s first row
        first[1:] = (o[order][1:] != o[order][:-1]) | (r[order][1:] != r[order][:-1])
        at = order[first]
        at = at[np.argsort(i[at], kind="stable")]
        for a, b, row in zip(o[at].tolist(), r[at].tolist(), i[at].tolist()):   # few: one per pair made
            if self.peer[a] < 0 and self.peer[b] < 0:
                self.peer[a], self.peer[b] = b, a
                self.since[a] = self.since[b] = row
        return _NONE

    def _owners(self, cand, ev, flow, psn, idx) -> np.ndarray:
        """Per response row: the one candidate flow coming the other way whose request PSNs sent
        before the row contain its PSN; -1 when none or several do (two QPs between the same hosts
        whose PSN ranges overlap, both crossing 2^24 say, are no evidence there)."""
        members = np.flatnonzero(cand)
        members = members[np.argsort(self.direction[members], kind="stable")]
        keys = self.direction[members]
        want = self.reverse[flow]
        lo = np.searchsorted(keys, want, side="left")
        count = np.searchsorted(keys, want, side="right") - lo
        owner, near = np.full(len(flow), -1, dtype=np.int64), np.full(len(flow), -1, dtype=np.int64)
        found, senders = np.zeros(len(flow), dtype=np.int64), np.zeros(len(flow), dtype=np.int64)
        for j in range(int(count.max(initial=0))):
            m = members[np.minimum(lo + j, len(members) - 1)]
            seen, first, high = ev.range_at(m, idx)
            seen &= j < count
            ahead = (psn - first) % _PSN_MOD - (high - first)
            inside = seen & ((ahead <= 0) | (high - first >= _PSN_MOD - 1))
            found += inside
            senders += seen
            owner = np.where(inside, m, owner)
            near = np.where(seen & (ahead > 0) & (ahead <= AHEAD), m, near)
        owner[found != 1] = -1
        alone = (found == 0) & (senders == 1)       # a response stamped before its request (causality.py)
        owner[alone] = near[alone]
        return owner

    def lone_at_end(self, registry, transport) -> None:
        """Lone pairing over the whole capture: the unpaired candidate flows of two endpoints,
        exactly one each way, pair (peer_qp only: nothing was read through them)."""
        self.grow(registry.n)
        self.directions(registry)
        flows = np.flatnonzero(self.candidates(registry, transport) & self.open()[: registry.n])
        if len(flows) < 2:
            return
        d, r = self.direction[flows], self.reverse[flows]
        key = np.minimum(d, r) * 2 + (d > r)
        counts = np.bincount(key, minlength=2 * (int(key.max()) // 2 + 1)).reshape(-1, 2)
        pick = (counts == 1).all(axis=1)[key // 2]
        flows, key = flows[pick], key[pick]
        flows = flows[np.argsort(key, kind="stable")].reshape(-1, 2)
        self.peer[flows[:, 0]], self.peer[flows[:, 1]] = flows[:, 1], flows[:, 0]
        self.lone[flows.reshape(-1)] = True
        self.since[flows.reshape(-1)] = np.iinfo(np.int64).max

    def with_lone(self, registry, transport) -> Pairing:
        """A copy with the lone pairs of the flows seen so far (a snapshot's peer_qp)."""
        copy = Pairing()
        copy.peer, copy.since, copy.lone = self.peer.copy(), self.since.copy(), self.lone.copy()
        copy.direction, copy.reverse, copy._ids = self.direction, self.reverse, dict(self._ids)
        copy.lone_at_end(registry, transport)
        return copy


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
        self.rep_idx: list[int] = []          # row index of each pair's REP

    def feed(self, batch, idx0: int = 0) -> None:
        """The CM MADs of `batch`, whose first row is row `idx0` of the capture."""
        valid = batch.valid.get("cm_local_qpn")
        if "cm_local_qpn" not in batch.cols or (valid is not None and not valid.any()):
            return                                       # no CM MAD in this chunk
        rows = np.flatnonzero(batch.mask("cm_local_qpn") & (batch.cols["mad_class"] == 0x07))
        if len(rows) == 0:
            return
        src = np.ascontiguousarray(batch.cols["_src_addr"][rows]).view("<u8").reshape(-1, 2)
        dst = np.ascontiguousarray(batch.cols["_dst_addr"][rows]).view("<u8").reshape(-1, 2)
        idx = rows + idx0 if "_gidx" not in batch.cols else batch.cols["_gidx"][rows]
        for k, r in enumerate(rows.tolist()):
            self._one(batch, r, tuple(src[k].tolist()), tuple(dst[k].tolist()), int(idx[k]))

    def _one(self, batch, r: int, src: tuple, dst: tuple, idx: int) -> None:
        attr, qpn = int(batch.cols["mad_attr_id"][r]), int(batch.cols["cm_local_qpn"][r])
        if attr == 0x0010:
            self._req[(int(batch.cols["cm_local_comm_id"][r]), src, dst)] = qpn
        elif attr == 0x0013 and batch.mask("cm_remote_comm_id")[r]:
            req_qpn = self._req.get((int(batch.cols["cm_remote_comm_id"][r]), dst, src))   # the REP goes back
            if req_qpn is not None:
                self.pairs.append(((dst, src, qpn), (src, dst, req_qpn)))
                self.rep_idx.append(idx)

    def apply(self, registry, pairing: Pairing, first_idx: np.ndarray | None = None) -> np.ndarray:
        """Pair the flows of every CM handshake whose two directions have been seen, from the row
        where the later of the REP and the two flows' first packets is (first_idx: each flow's
        first row): the chunk that makes the pair holds that row, whatever the chunk size. Returns
        the flows whose pairing it changed (RTT samples taken through the old one are void)."""
        if not self.pairs or registry.n == 0:
            return _NONE
        keys = [k for pair in self.pairs for k in pair]
        src = np.array([k[0] for k in keys], dtype=np.uint64)
        dst = np.array([k[1] for k in keys], dtype=np.uint64)
        qp = np.array([k[2] for k in keys], dtype=np.uint32)
        ids = registry.find(src, dst, qp).reshape(-1, 2)
        pairing.grow(registry.n)
        changed = []
        both = (ids >= 0).all(axis=1)
        for (a, b), rep in zip(ids[both].tolist(), np.asarray(self.rep_idx)[both].tolist()):
            if pairing.peer[a] == b:
                continue
            changed += [a, b] + [int(o) for o in (pairing.peer[a], pairing.peer[b]) if o >= 0]
            pairing.since[a] = pairing.since[b] = (_ALWAYS if first_idx is None
                                                   else max(rep, int(first_idx[a]), int(first_idx[b])))
            for old in (pairing.peer[a], pairing.peer[b]):
                if old >= 0 and pairing.peer[old] in (a, b):
                    pairing.peer[old], pairing.lone[old] = -1, False
            pairing.peer[a], pairing.peer[b] = b, a
            pairing.lone[a] = pairing.lone[b] = False
        return np.array(changed, dtype=np.int64)
