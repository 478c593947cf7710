"""When each request PSN was first sent: the delay of a timeout retransmission from its original.

A timeout retransmission is only plausible when the requester waited an ACK timeout (4.096 us x
2^Local ACK Timeout) after the *original* send of the PSN it resends, not after the
previous resend. First sends (data rows ahead of their space's highest PSN) have strictly
increasing PSNs, so per request space the first sends of the last WINDOW PSNs are kept in a ring
indexed by u mod WINDOW (with u, to tell a stale slot). A resend more than WINDOW PSNs behind the
highest PSN, or of a PSN whose first send the capture missed, has no known original.

Each ring is stored in PAGES pages of PAGE slots, a page allocated when its flow first writes
into it: a fabric-wide mirror's queue pairs mostly send far fewer than WINDOW PSNs, and a dense
ring (24 bytes x WINDOW = 6 kB per flow) was 586 MB of 100 k queue pairs' 2 M packets. A flow
holds at most PAGES pages (its whole ring) however many PSNs it sends.
"""
from __future__ import annotations

import numpy as np

WINDOW = 256
PAGE = 16                     # slots per page
PAGES = WINDOW // PAGE        # pages per ring
_NONE = np.iinfo(np.int64).min


class FirstSends:
    def __init__(self):
        self.page = np.full((0, PAGES), -1, dtype=np.int32)    # (flow, ring page) -> page id, -1: none
        self.n_pages = 0                                        # pages in use (the pools' first rows)
        self.ts = np.zeros((0, PAGE), dtype=np.int64)
        self.u = np.full((0, PAGE), _NONE, dtype=np.int64)
        self.idx = np.zeros((0, PAGE), dtype=np.int64)          # its row index (the related frame)

    def grow(self, n_flows: int) -> None:
        if n_flows > len(self.page):
            extra = np.full((n_flows - len(self.page), PAGES), -1, dtype=np.int32)
            self.page = np.concatenate([self.page, extra])

    def _reserve(self, n_pages: int) -> None:
        """Room for n_pages pages, with a quarter more (pages are allocated chunk by chunk)."""
        if n_pages <= len(self.ts):
            return
        extra = max(n_pages, len(self.ts) + len(self.ts) // 4, 1024) - len(self.ts)
        self.ts = np.concatenate([self.ts, np.zeros((extra, PAGE), dtype=np.int64)])
        self.u = np.concatenate([self.u, np.full((extra, PAGE), _NONE, dtype=np.int64)])
        self.idx = np.concatenate([self.idx, np.zeros((extra, PAGE), dtype=np.int64)])

    def _pages(self, flow: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """The page id holding each (flow, slot), allocating the pages not there yet."""
        ring_page = slot // PAGE
        pid = self.page[flow, ring_page]
        missing = pid < 0
        if missing.any():
            new = np.sort(flow[missing].astype(np.int64) * PAGES + ring_page[missing])
            new = new[np.r_[True, new[1:] != new[:-1]]]         # (np.unique imports numpy.ma)
            self._reserve(self.n_pages + len(new))
            first, self.n_pages = self.n_pages, self.n_pages + len(new)
            self.page[new // PAGES, new % PAGES] = np.arange(first, self.n_pages, dtype=np.int32)
            pid = self.page[flow, ring_page]
        return pid

    def original(self, flow, u, high, chunk_keys, chunk_ts, key, chunk_idx=None):
        """(ts, row index) of the first send of PSN u of `flow`'s request space (-1: unknown),
        given the space's highest PSN before the resend (`high`) and this chunk's first sends
        before the rows asked about (`chunk_keys` sorted, with their ts and row index; `key`
        the asked rows' keys)."""
        out = np.full(len(u), -1, dtype=np.int64)
        where = np.full(len(u), -1, dtype=np.int64)
        near = u > high - WINDOW
        slot = u & (WINDOW - 1)
        pid = self.page[flow, slot // PAGE]
        off = slot % PAGE
        held = np.flatnonzero(near & (pid >= 0))                # a page without the slot: unknown
        ok = held[self.u[pid[held], off[held]] == u[held]]
        out[ok] = self.ts[pid[ok], off[ok]]
        where[ok] = self.idx[pid[ok], off[ok]]
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
        pid, off = self._pages(flow, slot), slot % PAGE
        self.ts[pid, off] = ts
        self.u[pid, off] = u
        self.idx[pid, off] = idx
