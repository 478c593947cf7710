"""When each request PSN was first sent: the delay of a timeout retransmission from its original.

A timeout retransmission is only plausible when the requester waited an ACK timeout (4.096 us x
2^Local ACK Timeout) after the *original* send of the PSN it resends, not after the
previous resend. First sends (data rows ahead of their space's highest PSN) have strictly
increasing PSNs, so per request space the first sends of the last WINDOW PSNs are kept in a ring
indexed by u mod WINDOW (with u, to tell a stale slot). A resend more than WINDOW PSNs behind the
highest PSN, or of a PSN whose first send the capture missed, has no known original.
"""
from __future__ import annotations

import numpy as np

WINDOW = 256
_NONE = np.iinfo(np.int64).min


class FirstSends:
    def __init__(self):
        self.ts = np.zeros((0, WINDOW), dtype=np.int64)
        self.u = np.full((0, WINDOW), _NONE, dtype=np.int64)
        self.idx = np.zeros((0, WINDOW), dtype=np.int64)      # its row index (the related frame)

    def grow(self, n_flows: int) -> None:
        if n_flows > len(self.ts):
            extra = n_flows - len(self.ts)
            self.ts = np.concatenate([self.ts, np.zeros((extra, WINDOW), dtype=np.int64)])
            self.u = np.concatenate([self.u, np.full((extra, WINDOW), _NONE, dtype=np.int64)])
            self.idx = np.concatenate([self.idx, np.zeros((extra, WINDOW), dtype=np.int64)])

    def original(self, flow, u, high, chunk_keys, chunk_ts, key, chunk_idx=None):
        """(ts, row index) of the first send of PSN u of `flow`'s request space (-1: unknown),
        given the space's highest PSN before the resend (`high`) and this chunk's first sends
        before the rows asked about (`chunk_keys` sorted, with their ts and row index; `key`
        the asked rows' keys)."""
        out = np.full(len(u), -1, dtype=np.int64)
        where = np.full(len(u), -1, dtype=np.int64)
        near = u > high - WINDOW
        slot = u & (WINDOW - 1)
        ok = near & (self.u[flow, slot] == u)
        out[ok] = self.ts[flow[ok], slot[ok]]
        where[ok] = self.idx[flow[ok], slot[ok]]
        if len(chunk_keys):
            pos = np.minimum(np.searchsorted(chunk_keys, key), len(chunk_keys) - 1)
            hit = near & (chunk_keys[pos] == key)
            out[hit] = chunk_ts[pos[hit]]
            if chunk_idx is not None:
                where[hit] = chunk_idx[pos[hit]]
        return out, where

    def record(self, flow, u, ts, idx) -> None:
        """First sends in capture order (later ones overwrite older slots)."""
        slot = u & (WINDOW - 1)
        self.ts[flow, slot] = ts
        self.u[flow, slot] = u
        self.idx[flow, slot] = idx
