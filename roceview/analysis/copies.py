"""Second captures of one frame, found before a chunk's RoCE rows are grouped, so that each frame
is analyzed once.

A capture can hold a frame twice: a mirror of both ingress and egress, two mirror sessions into
one port, mirrors on two leaves (the far leaf's copy microseconds later, or earlier for the other
direction), two files or interfaces of the same traffic given together. Counted as they come,
every copy looks like a retransmission of the frame before it. A copy is dropped from the rows the
Analyzer groups and logged as a `duplicate` event, which names the frame it repeats (`rel`) and
how much later it came (`a`, ns).

A RoCE row is a copy of an earlier row of its flow with the same PSN, opcode, AckReq, payload
length, AETH syndrome and IPv4 identification when

* it came at most COPY_WINDOW_NS later and its sender numbers its datagrams: a resend is a new
  datagram with a new identification (RFC 791: it tells one datagram's fragments from
  another's), so the same one, within a window far shorter than the 16-bit counter takes to
  wrap, is the same datagram captured again. A source numbers its datagrams to a destination
  once two identifications were seen from it (mlx5 NICs and the generator count per host); a
  CNP with identification 0 is not numbered even then (NICs that number their data may send
  their CNPs with 0, and two genuine CNPs to one QP are then the same bytes: taken for copies,
  every CNP within COPY_WINDOW_NS of the one before was lost). A mirror's copy of such a CNP is
  counted as a CNP of its own: without an identification nothing on the wire tells it from a
  genuine CNP sent as soon after (an NP with no minimum spacing sends one per CE mark).
  Before that, an ACK, NAK or CNP with a non-zero identification is taken as numbered (it is
  never resent: a duplicate request gets a new ACK); a request or READ response is not (a
  sender with one constant identification, as some soft-RoCE setups use, resends the same
  bytes);
* or it is a data packet (a request or READ response) that came at most DUPLICATE_WINDOW_NS
  later: no endpoint resends that fast (the minimum RNR NAK timer is 10 us, IBTA Table 45; an
  ACK timeout is 4.096 us x 2^timeout, milliseconds in practice). Not ACKs: soft-RoCE answers
  each duplicate request of a go-back-N burst with the same ACK, microseconds apart. This is
  all that tells copies of senders that do not number their datagrams (soft-RoCE often sends
  identification 0; RoCE v1, IPv6 and native IB have none).

The decision for a row depends only on rows between its two hosts at or before it, so it does not
depend on how the capture is cut into chunks, or on which other hosts a partition holds (the
Dask engine keeps both directions of a host pair in one partition).
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.flows import new_registry

DUPLICATE_WINDOW_NS = 2_000
# Mirrors on two leaves of one fabric, or capture hosts synchronised by PTP, stamp a frame's two
# copies microseconds apart; a millisecond leaves room for queueing between the points, and is
# far shorter than a host's 16-bit identification counter takes to wrap (65,536 datagrams).
COPY_WINDOW_NS = 1_000_000
_MUL = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    h ^= v.astype(np.uint64, copy=False)
    h *= _MUL
    h ^= h >> np.uint64(29)
    return h


class Copies:
    """The rows of the last COPY_WINDOW_NS already seen (key, time, row index), and per
    (source, destination) pair what its identifications showed."""

    def __init__(self):
        self.key = np.zeros(0, dtype=np.uint64)
        self.ts = self.idx = np.zeros(0, dtype=np.int64)
        self.pairs = new_registry()                        # (source, destination) -> pair id
        self.pair_of = np.zeros(0, dtype=np.int64)         # per flow: its pair
        self.first_id = np.zeros(0, dtype=np.int64)        # per pair: its first identification, -1
        self.first_key = np.zeros(0, dtype=np.uint64)      # ... and that row's key
        self.numbered = np.zeros(0, dtype=bool)           # per pair: a second identification seen
        self.constant = np.zeros(0, dtype=bool)           # per pair: a second datagram, same identification

    def find(self, ch, registry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The copies among chunk `ch`'s RoCE rows: (their capture-order positions, how much
        later than the frame they repeat they came in ns, that frame's row index)."""
        pair, key = self._pairs(ch, registry), self._keys(ch)
        numbered = self._numbering(ch, pair, key)
        n_old = len(self.key)
        keys, ts, idx = (np.concatenate([old, new]) if n_old else new for old, new in
                         zip((self.key, self.ts, self.idx), (key, ch.ts, ch.idx(np.arange(ch.n)))))
        self._carry(keys, ts, idx)
        none = np.zeros(0, dtype=np.int64)
        s = np.sort(keys)
        repeated = s[1:][s[1:] == s[:-1]]
        if len(repeated) == 0:
            return none, none, none
        if len(repeated) * 64 < len(keys):                      # few: sort only the rows repeating a key
            rows = np.flatnonzero(np.isin(keys, repeated))
            rows = rows[np.argsort(keys[rows], kind="stable")]
        else:                                                   # many (a capture of two points): sort all
            rows = np.argsort(keys, kind="stable")              # carried rows first, then the chunk's
        same = keys[rows[1:]] == keys[rows[:-1]]
        cur, prev = rows[1:][same], rows[:-1][same]
        new = cur >= n_old                                      # decided with an earlier chunk otherwise
        cur, prev = cur[new], prev[new]
        dt = ts[cur] - ts[prev]
        at = cur - n_old
        data = (ch.flags[at] & op.F_DATA) != 0                  # (soft-RoCE repeats an ACK within 2 us)
        copy = (dt >= 0) & (((dt <= DUPLICATE_WINDOW_NS) & data) | ((dt <= COPY_WINDOW_NS) & numbered(at)))
        at, dt, rel = at[copy], dt[copy], idx[prev[copy]]
        order = np.argsort(at)
        return at[order], dt[order], rel[order]

    def _keys(self, ch) -> np.ndarray:
        """What two captures of one frame share wherever they were taken (not the MACs, TTL,
        DSCP/ECN or VLAN tags a hop may change), hashed to 64 bits."""
        h = ch.fid.astype(np.uint64) * _MUL
        for name in ("psn", "payload_len", "ip_id", "aeth_syndrome"):
            h = _mix(h, ch.values(name, -1).astype(np.int64) + 1)
        return _mix(h, ch.opcode.astype(np.int64) | (ch.values("ackreq", 0).astype(np.int64) << 8))

    def _pairs(self, ch, registry) -> np.ndarray:
        """The (source, destination) pair of every row, through its flow (new flows looked up once)."""
        have, n = len(self.pair_of), ch.n_flows
        if have < n:
            ids, _ = self.pairs.lookup(registry.src[have:n], registry.dst[have:n], np.zeros(n - have, np.uint32))
            self.pair_of = np.concatenate([self.pair_of, ids])
            grow = self.pairs.n - len(self.numbered)
            self.first_id = np.concatenate([self.first_id, np.full(grow, -1, np.int64)])
            self.first_key = np.concatenate([self.first_key, np.zeros(grow, np.uint64)])
            self.numbered = np.concatenate([self.numbered, np.zeros(grow, bool)])
            self.constant = np.concatenate([self.constant, np.zeros(grow, bool)])
        return self.pair_of[ch.fid]

    def _numbering(self, ch, pair: np.ndarray, key: np.ndarray):
        """Learn from the chunk's identifications; return numbered(at): whether the senders of
        rows `at` number their datagrams, from what their pairs showed up to those rows."""
        n = ch.n
        numbered_from = np.where(self.numbered, 0, n)
        constant_from = np.where(self.constant, 0, n)
        ident = ch.values("ip_id", 0).astype(np.int64) if "ip_id" in ch.batch.cols else np.zeros(n, np.int64)
        pos = np.flatnonzero(~self.numbered[pair] & (ident != 0))
        if len(pos):
            p, i, k = pair[pos], ident[pos], key[pos]
            unset = self.first_id[p] < 0
            self.first_id[p[unset][::-1]] = i[unset][::-1]        # the first of each pair wins
            self.first_key[p[unset][::-1]] = k[unset][::-1]
            for seen, state, shown in ((numbered_from, self.numbered, i != self.first_id[p]),
                                       (constant_from, self.constant,
                                        (i == self.first_id[p]) & (k != self.first_key[p]))):
                shown &= ~state[p]                                # known before the chunk: from row 0
                q, at = p[shown], pos[shown]
                seen[q[::-1]] = at[::-1]                          # each pair's first row showing it
                state[q] = True

        def numbered(at: np.ndarray) -> np.ndarray:
            p = pair[at]
            first = (constant_from[p] > at) & (ident[at] != 0) & ((ch.flags[at] & op.F_DATA) == 0)
            # a CNP with identification 0 is not numbered; other datagrams are (a numbering
            # sender passes 0 once every 65,536 datagrams, and its copy is still a copy)
            zero_cnp = (ident[at] == 0) & ((ch.flags[at] & op.F_CNP) != 0)
            return ((numbered_from[p] <= at) & ~zero_cnp) | first
        return numbered

    def _carry(self, keys, ts, idx) -> None:
        """Keep the rows within COPY_WINDOW_NS of the newest for the next chunk."""
        keep = ts >= ts.max(initial=0) - COPY_WINDOW_NS
        self.key, self.ts, self.idx = keys[keep], ts[keep], idx[keep]
