"""Operations parked: waiting for a completion on a flow without a peer yet, out of each chunk's
work until something can change them.

An RC flow whose peer is not known keeps its operations open while it is young (its responses
may be paired in a later chunk: rtt.py keeps its requests the same way), up to
PENDING_PER_SPACE per space. Merged into every chunk's operations they cost more than all the
rest on a capture of one-way flows; nothing but a response or a resend can change them, so they
are parked: SEND / RDMA WRITE operations sent in full, awaiting a completion, of a flow without
a peer. A chunk with a resend or a response in their space takes them back first; a space's
operation PENDING_PER_SPACE ordinals newer gives them up (final, no completion), as it would have.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.ops_set import INF, OpSet


class Parked:
    def __init__(self):
        self.ops = OpSet.empty()

    def __len__(self) -> int:
        return len(self.ops)

    def add(self, ops: OpSet) -> None:
        self.ops = OpSet.concat([self.ops, ops])

    def take_back(self, sids: np.ndarray) -> OpSet:
        """The parked operations of these spaces (removed from the park)."""
        if not len(self.ops) or not len(sids):
            return OpSet.empty()
        back = np.isin(self.ops.cols["sid"], sids)
        if not back.any():
            return OpSet.empty()
        out = self.ops.take(back)
        self.ops = self.ops.take(~back)
        return out

    def park(self, state: OpSet, peer: np.ndarray) -> OpSet:
        """Park what qualifies of `state`; the rest stays."""
        c = state.cols
        if not len(state):
            return state
        idle = (c["by"] == oc.BY_ANY) & (c["compl_idx"] < 0) & ~c["closed"] & c["ended"] & (c["expire"] >= INF)
        idle &= peer.take(c["sid"] >> 1) < 0
        if not idle.any():
            return state
        self.ops = OpSet.concat([self.ops, state.take(idle)])
        return state.take(~idle)

    def expired(self, n_ops: np.ndarray, pending: int) -> OpSet:
        """The parked operations given up: their space started `pending` newer ones."""
        if not len(self.ops):
            return self.ops
        c = self.ops.cols
        gone = c["k"] + pending + 1 < n_ops.take(c["sid"])      # its space has op k + pending + 1
        if not gone.any():
            return OpSet.empty()
        out = self.ops.take(gone)
        self.ops = self.ops.take(~gone)
        return out
