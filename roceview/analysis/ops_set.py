"""Operations as numpy columns (one row per operation), kept sorted by (PSN space, first PSN).

The operations still open (being sent, waiting for their completion, or recently completed) are
one OpSet carried between chunks; a chunk's new operations are another, merged into it.
"""
from __future__ import annotations

import numpy as np

INF = np.int64(1 << 62)
KEY_SHIFT = 42                 # key = space id << KEY_SHIFT | (PSN + KEY_BIAS): spaces apart
KEY_BIAS = 1 << 41
NEVER = 3                      # `by`: completes by nothing (UC, UD, a QP whose peer is unknown)

# name -> (dtype, fill)
FIELDS = {
    "key": (np.int64, 0), "sid": (np.int64, 0), "start": (np.int64, 0),
    "end": (np.int64, INF),          # last PSN (INF: not known yet)
    "ended": (bool, False),          # its last packet (or a READ/atomic request) was seen
    "k": (np.int64, 0),              # ordinal among its space's operations, in creation order
    "kind": (np.int8, 0), "by": (np.int8, 0),
    "first_idx": (np.int64, 0), "first_ts": (np.int64, 0),
    "last_idx": (np.int64, 0), "last_ts": (np.int64, 0),
    "packets": (np.int64, 0), "retrans": (bool, False),
    "mtu_pay": (np.int64, 0),        # payload of its FIRST/MIDDLE packets (one path MTU)
    "last_pay": (np.int64, -1),      # payload of its LAST/ONLY packet
    "dmalen": (np.int64, -1),        # RETH DMA length (RDMA WRITE, READ)
    "compl_idx": (np.int64, -1), "compl_ts": (np.int64, 0),
    "closed": (bool, False),         # a send came too long after its completion: no more changes
    "outstanding": (np.int64, 0), "number": (np.int64, 0),
    "expire": (np.int64, INF),       # row index from which nothing changes it (PENDING_PER_SPACE)
    "expire_ts": (np.int64, 0),
    "hi_u": (np.int64, -INF),        # highest PSN of its packets
    "floating": (bool, False),       # started by a packet of another family than its predecessor's:
                                     # its FIRST was not seen, a resent FIRST below it moves its start
    "rend": (np.int64, INF),         # the last PSN of its range, once a later operation was seen
    "rend_idx": (np.int64, INF),     # ... the row that later operation starts at
    "sup_idx": (np.int64, INF),      # the earliest final completion of a later operation of its
    "sup_ts": (np.int64, 0),         # space (a READ still awaited then has left the READ depth)
}


def op_key(sid: np.ndarray, psn_u: np.ndarray) -> np.ndarray:
    return (np.asarray(sid, np.int64) << KEY_SHIFT) + np.asarray(psn_u, np.int64) + KEY_BIAS


class OpSet:
    __slots__ = ("cols",)

    def __init__(self, cols: dict):
        self.cols = cols

    @classmethod
    def empty(cls, n: int = 0) -> "OpSet":
        return cls({name: np.full(n, fill, dtype=dtype) for name, (dtype, fill) in FIELDS.items()})

    def __len__(self) -> int:
        return len(self.cols["key"])

    def __getattr__(self, name):
        try:
            return self.cols[name]
        except KeyError:
            raise AttributeError(name) from None

    def take(self, rows) -> "OpSet":
        return OpSet({n: v[rows] for n, v in self.cols.items()})

    @staticmethod
    def concat(sets: list["OpSet"]) -> "OpSet":
        sets = [s for s in sets if len(s)]
        if not sets:
            return OpSet.empty()
        if len(sets) == 1:
            return sets[0]
        return OpSet({n: np.concatenate([s.cols[n] for s in sets]) for n in FIELDS})

    def sorted(self) -> "OpSet":
        key = self.cols["key"]
        if len(key) < 2 or (key[1:] >= key[:-1]).all():
            return self
        return self.take(np.argsort(key, kind="stable"))

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(last PSN, last PSN of its range) of each operation (the set sorted by key). The last
        PSN is its end when known, else the next operation's start - 1 in its space, else INF;
        the range runs to the next operation's start - 1 (INF for a space's newest): the PSNs
        of a space's operations follow each other, a READ's responses can lie past the span
        its path MTU was guessed to give it."""
        sid, start, end = self.cols["sid"], self.cols["start"], self.cols["end"]
        nxt = np.full(len(sid), INF, dtype=np.int64)
        if len(sid) > 1:
            nxt[:-1] = np.where(sid[1:] == sid[:-1], start[1:] - 1, INF)
        nxt = np.minimum(nxt, self.cols["rend"])   # (the later operation may be final, gone from the set)
        return np.where(end < INF, end, nxt), nxt

    def known_since(self, ranges: bool = False) -> np.ndarray:
        """The row from which each operation's last PSN is known: its last packet's (-1: any
        response after its first send may complete it), else the next operation's first: a
        response before that cannot be taken for its completion (nothing showed its end yet).
        `ranges`: the row its range's end (ends()[1]) is known from: the next operation's."""
        c = self.cols
        sid = c["sid"]
        nxt = np.full(len(sid), INF, dtype=np.int64)
        if len(sid) > 1:
            nxt[:-1] = np.where(sid[1:] == sid[:-1], c["first_idx"][1:], INF)
        nxt = np.minimum(nxt, c["rend_idx"])
        return nxt if ranges else np.where(c["end"] < INF, -1, nxt)

    def keep_ranges(self) -> None:
        """Remember each operation's range while the next one is in the set (before eviction)."""
        self.cols["rend"] = self.ends()[1]
        self.cols["rend_idx"] = self.known_since(ranges=True)
