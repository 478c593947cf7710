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
  datagram with identification 0 is not numbered even then (NICs that number their data may
  send their CNPs with 0, and two CNPs to one QP are then the same bytes). Before that, an ACK, NAK or CNP with a non-zero identification is taken as numbered (it is
  never resent: a duplicate request gets a new ACK); a request or READ response is not (a
  sender with one constant identification, as some soft-RoCE setups use, resends the same
  bytes);
* or it is a data packet (a request or READ response) that came at most DUPLICATE_WINDOW_NS
  later: no endpoint resends that fast (the minimum RNR NAK timer is 10 us, IBTA Table 45; an
  ACK timeout is 4.096 us x 2^timeout, milliseconds in practice). Not ACKs: soft-RoCE answers
  each duplicate request of a go-back-N burst with the same ACK, microseconds apart. This is
  all that tells copies of senders that do not number their datagrams (soft-RoCE often sends
  identification 0; RoCE v1, IPv6 and native IB have none);
* or it is a CNP its sender did not number that came at most the largest copy offset proven
  between its two hosts (by the two rules above, before it) plus CNP_SLACK_NS after the CNP
  before it, that CNP being no copy itself. A CNP's PSN is 0 on many NICs: without an
  identification two genuine CNPs to one QP are byte-identical, and only a mirror seen to
  duplicate this host pair's frames says a repeat is a copy; a capture that duplicates nothing
  keeps every CNP, however close (an NP with no minimum spacing sends one per CE mark). Along a
  run of such repeats each copy is paired with the original before it (original, copy,
  original, ...): a mirror copies each frame once, so the count stays the NP's even when
  genuine CNPs come closer together than the mirror's copy offset.

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
_OFFSET_BITS = COPY_WINDOW_NS.bit_length()
# A CNP (a 78-byte frame) is copied no later than the larger frames whose copy offsets were
# measured (a replica is clocked out after the frame, a switch forwards it after receiving it);
# 1 us more allows for the mirror's own queue between two copies
CNP_SLACK_NS = 1_000
_MUL = np.uint64(0x9E3779B97F4A7C15)


def _alternate(rows, dropped, n_old: int, sel, proven, cnp, dt, hi) -> np.ndarray:
    """Which of the CNP repeats `cnp` (indexes into `sel`, the chunk's rows repeating the row
    before them in key order `rows`) are copies. A repeat at most the host pair's proven copy
    offset (`hi`) plus CNP_SLACK_NS after the row before links to it; along a run of links the
    rows alternate original, copy, original...: each copy repeats an original, never a copy.
    The run's first row is an original unless it was dropped (a carried row) or proven a copy."""
    linked = (hi >= 0) & (dt >= 0) & (dt <= np.minimum(hi + CNP_SLACK_NS, COPY_WINDOW_NS))
    out = np.zeros(len(cnp), dtype=bool)
    link = sel[cnp[linked]]                                 # row link + 1 repeats row link (key order)
    if len(link) == 0:
        return out
    run = np.flatnonzero(np.r_[True, link[1:] != link[:-1] + 1])
    first = link[run[np.searchsorted(run, np.arange(len(link)), side="right") - 1]]
    k = np.minimum(np.searchsorted(sel, first - 1), len(sel) - 1)
    copy_first = np.where(rows[first] < n_old, dropped[rows[first]], (sel[k] == first - 1) & proven[k])
    out[linked] = copy_first ^ ((link + 1 - first) % 2 == 1)
    return out


def _mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    h ^= v.astype(np.uint64, copy=False)
    h *= _MUL
    h ^= h >> np.uint64(29)
    return h


class Copies:
    """The rows of the last COPY_WINDOW_NS already seen (key, time, row index, found a copy),
    per (source, destination) pair what its identifications showed, and per two hosts (either
    direction) the largest copy offset proven (for CNPs without an identification)."""

    def __init__(self):
        self.key = np.zeros(0, dtype=np.uint64)
        self.ts = self.idx = np.zeros(0, dtype=np.int64)
        self.dropped = np.zeros(0, dtype=bool)             # ... and whether it was found a copy
        self.pairs = new_registry()                        # (source, destination) -> pair id
        self.pair_of = np.zeros(0, dtype=np.int64)         # per flow: its pair
        self.first_id = np.zeros(0, dtype=np.int64)        # per pair: its first identification, -1
        self.first_key = np.zeros(0, dtype=np.uint64)      # ... and that row's key
        self.numbered = np.zeros(0, dtype=bool)           # per pair: a second identification seen
        self.constant = np.zeros(0, dtype=bool)           # per pair: a second datagram, same identification
        self.links = new_registry()                        # two hosts, either direction -> link id
        self.link_of = np.zeros(0, dtype=np.int64)         # per flow: its link
        self.link_hi = np.zeros(0, dtype=np.int64)         # per link: the largest copy offset proven, -1

    def find(self, ch, registry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The copies among chunk `ch`'s RoCE rows: (their capture-order positions, how much
        later than the frame they repeat they came in ns, that frame's row index)."""
        pair, key = self._pairs(ch, registry), self._keys(ch)
        numbered = self._numbering(ch, pair, key)
        n_old = len(self.key)
        keys, ts, idx, dropped = (np.concatenate([old, new]) if n_old else new for old, new in
                                  zip((self.key, self.ts, self.idx, self.dropped),
                                      (key, ch.ts, ch.idx(np.arange(ch.n)), np.zeros(ch.n, bool))))
        found = self._repeats(ch, keys, ts, idx, dropped, n_old, numbered)
        dropped[n_old + found[0]] = True
        self._carry(keys, ts, idx, dropped)
        return found

    def _repeats(self, ch, keys, ts, idx, dropped, n_old: int, numbered):
        """find() over the carried rows and the chunk's (those at n_old and after)."""
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
        sel = np.flatnonzero((keys[rows[1:]] == keys[rows[:-1]]) & (rows[1:] >= n_old))
        cur, prev = rows[1:][sel], rows[:-1][sel]               # (decided with an earlier chunk otherwise)
        dt = ts[cur] - ts[prev]
        at = cur - n_old
        data = (ch.flags[at] & op.F_DATA) != 0                  # (soft-RoCE repeats an ACK within 2 us)
        num = numbered(at)
        copy = (dt >= 0) & (((dt <= DUPLICATE_WINDOW_NS) & data) | ((dt <= COPY_WINDOW_NS) & num))
        proven_at, proven_dt = at[copy], dt[copy]
        cnp = np.flatnonzero(((ch.flags[at] & op.F_CNP) != 0) & ~num)
        if len(cnp):
            hi = self._offset_before(ch, at[cnp], proven_at, proven_dt)
            copy[cnp] = _alternate(rows, dropped, n_old, sel, copy, cnp, dt[cnp], hi)
        if len(proven_at):
            np.maximum.at(self.link_hi, self.link_of[ch.fid[proven_at]], proven_dt)
        at, dt, rel = at[copy], dt[copy], idx[prev[copy]]
        order = np.argsort(at)
        return at[order], dt[order], rel[order]

    def _offset_before(self, ch, at: np.ndarray, proven_at: np.ndarray, proven_dt: np.ndarray) -> np.ndarray:
        """For chunk rows `at`: the largest copy offset proven between their two hosts before
        them (earlier chunks, then this chunk's copies `proven_at` before each), -1 for none."""
        link = self.link_of[ch.fid[at]]
        hi = self.link_hi[link]
        if len(proven_at) == 0:
            return hi
        lp = self.link_of[ch.fid[proven_at]]
        order = np.lexsort((proven_at, lp))
        lp, ap = lp[order], proven_at[order]
        base = lp << _OFFSET_BITS                               # a running maximum per host pair
        run = np.maximum.accumulate(base + proven_dt[order]) - base
        k = np.searchsorted(lp * (ch.n + 1) + ap, link * (ch.n + 1) + at) - 1
        ok = k >= 0
        k = np.maximum(k, 0)
        return np.maximum(hi, np.where(ok & (lp[k] == link), run[k], -1))

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
            self._link(registry.src[have:n], registry.dst[have:n])
        return self.pair_of[ch.fid]

    def _link(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Register new flows' host pairs in either direction: the lower address first."""
        low = (src[:, 0] < dst[:, 0]) | ((src[:, 0] == dst[:, 0]) & (src[:, 1] <= dst[:, 1]))
        a, b = np.where(low[:, None], src, dst), np.where(low[:, None], dst, src)
        ids, _ = self.links.lookup(a, b, np.zeros(len(a), np.uint32))
        self.link_of = np.concatenate([self.link_of, ids.astype(np.int64)])
        self.link_hi = np.concatenate([self.link_hi, np.full(self.links.n - len(self.link_hi), -1, np.int64)])

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
            return ((numbered_from[p] <= at) & (ident[at] != 0)) | first   # 0: not numbered
        return numbered

    def _carry(self, keys, ts, idx, dropped) -> None:
        """Keep the rows within COPY_WINDOW_NS of the newest for the next chunk."""
        keep = ts >= ts.max(initial=0) - COPY_WINDOW_NS
        self.key, self.ts, self.idx, self.dropped = keys[keep], ts[keep], idx[keep], dropped[keep]
