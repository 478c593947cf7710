"""Frames sent while paused: the `sent_while_paused` events and the paused_flows table.

A PFC frame from MAC M for priority p (an 802.3x PAUSE: priority `all`) pauses what M's link
partner sends to M on p: the frames whose destination MAC is M and whose priority (as priorities.csv:
the diagnoser's `trust` / `dscp_to_priority` when given, a priorities.priority_table; by default
VLAN PCP when tagged, else DSCP >> 3) is p. A RoCE frame (one with a flow) toward M is sent
while paused when it comes after a pause frame of (M, p) or (M, all), stamped no earlier, and
before that pause ends: q x 512 bit times at the link speed after it, or the next frame of the
same MAC and priority (pauses.py's periods: a refresh before expiry continues the period).
"After" and "next" are in capture order, as pauses.py cuts pauses (the same as (time, frame)
order where timestamps never decrease): whatever the chunking, the answer is the same, even
where timestamps step back (a frame captured after an XOFF but stamped before it is not held;
one captured before it is not held either, whatever its stamp). Each such frame
is an event naming the XOFF that began the continuous period (its related frame) and the delay
since it; a frame held by both its priority's and an `all` pause names its priority's.

Counting, per (flow, destination MAC, priority) of every frame with a flow, costs almost nothing:
a flow sends to one (MAC, priority) as a rule, so each flow keeps the key of one of its first
chunk's frames and its own qps.csv counters (packets, bytes, first/last) are that key's; only the frames of a flow
that ever sends elsewhere are counted key by key (`exact`). The pause test runs only on chunks
while some MAC pauses (a pause frame in the chunk, or one carried from before that has not run
out), on the frames toward such a MAC. State: per flow, and per (flow, MAC, priority) seen.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis.pauses import ALL, SLOTS
from roceview.analysis.priorities import frame_classes
from roceview.packets.names import mac_text

UNSET = np.uint64(np.iinfo(np.uint64).max)     # a flow with no frame yet
NO_MAC = np.uint64(1 << 48)                     # a frame without an Ethernet destination
NO_PRIORITY = 8                                 # neither VLAN PCP nor DSCP: held by `all` pauses only
EXACT = ("packets", "bytes", "first_ts", "last_ts")


class PauseWatch:
    """Fed each chunk's pause rows (`pause_rows`, after `carry`) and its RoCE rows (`feed`)."""

    def __init__(self, pfc, table: np.ndarray | None = None):
        self.pfc = pfc
        # priority per frame class (priorities.frame_classes), NO_PRIORITY for none; None: the default
        self.lookup = None if table is None else np.where(table < 0, NO_PRIORITY, table).astype(np.uint8).ravel()
        self.primary = np.zeros(0, np.uint64)      # per flow: (dst MAC << 4 | priority) of its frames
        self.mixed = np.zeros(0, bool)             # flows sending to more than one key: counted in `exact`
        self.any_mixed = False
        self.exact: dict[tuple[int, int], list] = {}      # (flow, key) -> [packets, bytes, first_ts, last_ts]
        self.paused: dict[tuple[int, int], list] = {}     # (flow, pfc key) -> [packets, bytes]
        self._pauses: list[tuple] = []             # this chunk's pause rows: carried ones, then the chunk's

    # ---- the chunk's pauses ----------------------------------------------------------------------
    def carry(self, first_ts: int) -> None:
        """At a chunk's start: the pauses still open from earlier chunks that may hold one of its
        frames (stamped from `first_ts` on)."""
        self._pauses = []
        st = self.pfc.st
        if not st.n:
            return
        keys = np.flatnonzero(st.open)
        if len(keys):
            keys = keys[first_ts - st.open_ts[keys] < st.open_q[keys] * self.pfc.ns_per_quantum]   # (ns since: exact)
        if len(keys):
            self._pauses.append((keys, np.full(len(keys), -1, np.int64), st.open_ts[keys], st.open_q[keys],
                                 st.run_ts[keys], st.run_idx[keys]))

    def pause_rows(self, key, rows, ts, quanta, begin_ts, begin_idx) -> None:
        """The chunk's PFC/PAUSE rows (batch rows `rows`), with each one's period start."""
        self._pauses.append((key, rows, ts, quanta, begin_ts, begin_idx))

    # ---- the chunk's frames ----------------------------------------------------------------------
    def feed(self, an, ch) -> None:
        """Count the chunk's RoCE rows per (flow, key); find those sent while paused. Call before
        the flow counters take the chunk (a flow found to send to a second key is credited its
        counts so far)."""
        key = _keys(ch, self.lookup)
        self._grow(ch.n_flows)
        if ch.n_flows > ch.flows_before:
            # new flows: the key of one of their rows (any: a flow with rows of another key is
            # counted key by key from this chunk on, with nothing before it to credit)
            new = np.flatnonzero(ch.fid >= ch.flows_before)
            self.primary[ch.fid.take(new)] = key.take(new)
        other = key != self.primary.take(ch.fid)
        if self.any_mixed or other.any():
            self._count_exact(an, ch, other, key)
        if self._pauses:
            self._paused(an, ch, key)
        self._pauses = []

    def _grow(self, n: int) -> None:
        if n > len(self.primary):
            self.primary = np.concatenate([self.primary, np.full(n - len(self.primary), UNSET)])
            self.mixed = np.concatenate([self.mixed, np.zeros(n - len(self.mixed), bool)])

    def _count_exact(self, an, ch, other: np.ndarray, key: np.ndarray) -> None:
        """The rows of flows sending to more than one key (`other`: rows off their flow's first
        key), counted per (flow, key); a flow new to this is first credited its counters so far,
        all of its first key."""
        st = an.flow
        f = ch.fid[other]
        for flow in np.unique(f[~self.mixed.take(f)]).tolist():
            self.mixed[flow] = self.any_mixed = True
            if flow < st.n and st.packets[flow]:
                self.exact[(flow, int(self.primary[flow]))] = [int(getattr(st, c)[flow]) for c in EXACT]
        r = np.flatnonzero(self.mixed.take(ch.fid))
        f = ch.fid.take(r)
        wire, ts = ch.values("wire_len").take(r).astype(np.int64), ch.ts.take(r)
        for (flow, k), packets, size, lo, hi in _groups(f, key.take(r), wire, ts):
            row = self.exact.setdefault((flow, k), [0, 0, lo, hi])
            row[0] += packets
            row[1] += size
            row[2], row[3] = min(row[2], lo), max(row[3], hi)

    def _paused(self, an, ch, key: np.ndarray) -> None:
        """The rows toward a pausing MAC inside one of its pauses: counted and logged."""
        pauses = [np.concatenate(c) for c in zip(*self._pauses)]
        pk, pq = pauses[0], pauses[3]
        macs = np.array(sorted({self.pfc.mac_list[m] for m in (pk[pq > 0] // SLOTS).tolist()}), np.uint64)
        if not len(macs):
            return
        mac = key >> np.uint64(4)
        r = np.flatnonzero(np.isin(mac, macs))
        if not len(r):
            return
        ids = np.array([self.pfc.macs[m] for m in macs.tolist()], np.int64)[np.searchsorted(macs, mac.take(r))]
        prio = (key.take(r) & np.uint64(15)).astype(np.int64)
        ts, wire = ch.ts.take(r), ch.values("wire_len").take(r).astype(np.int64)
        own = self._inside(pauses, ch, r, ts, ids * SLOTS + prio, prio != NO_PRIORITY)
        anyp = self._inside(pauses, ch, r, ts, ids * SLOTS + ALL, True)
        for hit, want, _ in (own, anyp):
            for (flow, k), packets, size, _, _ in _groups(ch.fid.take(r[hit]), want[hit], wire[hit], ts[hit]):
                row = self.paused.setdefault((flow, k), [0, 0])
                row[0] += packets
                row[1] += size
        self._log(an, ch, r, ts, pauses, own, anyp)

    def _inside(self, pauses: list, ch, r: np.ndarray, ts: np.ndarray, want: np.ndarray, ok) -> tuple:
        """(whether each row r is inside a pause of its key `want`, want, that pause's row): the
        last pause row of the key before the row in capture order (carried ones before every
        row), a pause (quanta > 0) stamped no later than the row and not run out at its stamp."""
        pk, prow, pts, pq = pauses[:4]
        width = ch.batch.n + 1
        at = pk * width + prow + 1                     # (key, batch row); carried rows (-1) before every row
        order = np.argsort(at, kind="stable")
        before = np.searchsorted(at[order], want * width + ch.batch_rows(r) + 1) - 1
        j = order.take(np.maximum(before, 0))
        delay = ts - pts.take(j)
        hit = ok & (before >= 0) & (pk.take(j) == want) & (pq.take(j) > 0) & (delay >= 0)
        hit &= delay < pq.take(j) * self.pfc.ns_per_quantum
        return hit, want, j

    @staticmethod
    def _log(an, ch, r, ts, pauses: list, own: tuple, anyp: tuple) -> None:
        """An event per row held (its priority's pause, else the `all` one): the XOFF that began
        the period is its related frame, the time since that XOFF its delay."""
        logged = np.flatnonzero(own[0] | anyp[0])
        if not len(logged):
            return
        use = own[0].take(logged)
        j = np.where(use, own[2].take(logged), anyp[2].take(logged))
        rr, at = r.take(logged), ts.take(logged)
        psn = np.where(ch.in_psn.take(rr), ch.psn_at(rr), -1)
        an.events.add("sent_while_paused", at, ch.idx(rr), ch.fid.take(rr), psn,
                      np.where(use, own[1].take(logged), anyp[1].take(logged)), at - pauses[4].take(j),
                      rel=pauses[5].take(j))

    # ---- the table ---------------------------------------------------------------------------------
    def table(self, an, names: list[str]):
        """paused_flows: a row per (pausing MAC, priority, flow) the flow sent to and the MAC
        sent a pause for, in pfc.csv's order of (MAC, priority), then the flows' order."""
        from roceview.analysis.tables import PAUSED_FLOW_COLUMNS, Table

        pausing = self.pfc.st.pause_frames > 0
        n = min(len(self.primary), an.registry.n)
        if not pausing.any() or not n:
            return Table.empty(PAUSED_FLOW_COLUMNS)
        flow, key, counts = self._flow_keys(an, n)
        macs = np.array(self.pfc.mac_list, np.uint64)
        by_mac = np.argsort(macs)
        at = np.minimum(np.searchsorted(macs[by_mac], key >> np.uint64(4)), len(macs) - 1)
        ids = np.where(macs[by_mac][at] == key >> np.uint64(4), by_mac[at], -1)
        prio = (key & np.uint64(15)).astype(np.int64)
        own = (ids >= 0) & (prio != NO_PRIORITY)
        own &= pausing[np.where(own, ids * SLOTS + np.minimum(prio, 7), 0)]
        anyp = (ids >= 0) & pausing[np.maximum(ids, 0) * SLOTS + ALL]
        rows = [(ids[own] * SLOTS + prio[own], flow[own], *(c[own] for c in counts))]
        if anyp.any():                                  # `all`: the flow's keys to the MAC summed
            rows.append(_summed(ids[anyp] * SLOTS + ALL, flow[anyp], *(c[anyp] for c in counts)))
        pkey, flow, packets, size, first, last = (np.concatenate(c) for c in zip(*rows))
        order = np.lexsort((flow, pkey))
        pkey, flow, packets, size, first, last = (c[order] for c in (pkey, flow, packets, size, first, last))
        held = [self.paused.get(k, (0, 0)) for k in zip(flow.tolist(), pkey.tolist())]
        mac_names = [mac_text(m) for m in self.pfc.mac_list]
        return Table(PAUSED_FLOW_COLUMNS, {
            "src_mac": [mac_names[k // SLOTS] for k in pkey.tolist()],
            "priority": ["all" if k % SLOTS == ALL else str(k % SLOTS) for k in pkey.tolist()],
            "flow": [names[f] for f in flow.tolist()], "packets": packets, "bytes": size, "first_ts": first,
            "last_ts": last, "paused_packets": np.array([h[0] for h in held], np.int64),
            "paused_bytes": np.array([h[1] for h in held], np.int64)})

    def _flow_keys(self, an, n: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """(flow, key, [packets, bytes, first_ts, last_ts]) of every (flow, key) with frames:
        a flow of one key from its qps.csv counters, the others from `exact`."""
        st = an.flow
        one = np.flatnonzero(~self.mixed[:n] & (self.primary[:n] != UNSET))
        one = one[one < st.n]
        flows, keys = [one], [self.primary[one]]
        counts = [[getattr(st, c)[one].astype(np.int64)] for c in EXACT]
        if self.exact:
            items = sorted(self.exact.items())
            flows.append(np.array([f for (f, _), _ in items], np.int64))
            keys.append(np.array([k for (_, k), _ in items], np.uint64))
            for i, c in enumerate(counts):
                c.append(np.array([v[i] for _, v in items], np.int64))
        return np.concatenate(flows), np.concatenate(keys), [np.concatenate(c) for c in counts]


def _summed(pkey, flow, packets, size, first, last) -> tuple:
    """Rows of one (pfc key, flow) summed: packets and bytes added, first/last the extremes."""
    order = np.lexsort((flow, pkey))
    pkey, flow, packets, size, first, last = (c[order] for c in (pkey, flow, packets, size, first, last))
    start = np.flatnonzero(np.r_[True, (pkey[1:] != pkey[:-1]) | (flow[1:] != flow[:-1])])
    return (pkey[start], flow[start], np.add.reduceat(packets, start), np.add.reduceat(size, start),
            np.minimum.reduceat(first, start), np.maximum.reduceat(last, start))


def _groups(flow: np.ndarray, key: np.ndarray, wire: np.ndarray, ts: np.ndarray):
    """((flow, key), packets, bytes, first ts, last ts) per distinct (flow, key) of the rows."""
    if not len(flow):
        return []
    order = np.lexsort((key, flow))
    flow, key, wire, ts = flow[order], key[order], wire[order], ts[order]
    start = np.flatnonzero(np.r_[True, (flow[1:] != flow[:-1]) | (key[1:] != key[:-1])])
    return zip(zip(flow[start].tolist(), key[start].tolist()), np.diff(np.r_[start, len(flow)]).tolist(),
               np.add.reduceat(wire, start).tolist(), np.minimum.reduceat(ts, start).tolist(),
               np.maximum.reduceat(ts, start).tolist())


def _keys(ch, lookup: np.ndarray | None) -> np.ndarray:
    """Per RoCE row of the chunk: destination MAC << 4 | priority (0-7, NO_PRIORITY)."""
    cols = ch.batch.cols
    mac = cols.get("_dst_mac")
    if mac is None:
        key = np.full(ch.n, NO_MAC << np.uint64(4), np.uint64)
    else:
        key = ch.take(mac).astype(np.uint64)
        ok = ch.valid("_dst_mac")
        if ok is not None:
            key[~ok] = NO_MAC
        key <<= np.uint64(4)
    key |= _priority(ch) if lookup is None else lookup.take(ch.take(frame_classes(ch.batch)))
    return key


def _priority(ch) -> np.ndarray:
    """VLAN PCP where tagged, else DSCP >> 3, else NO_PRIORITY (as priorities.csv)."""
    cols = ch.batch.cols
    out = None
    if "dscp" in cols:
        out = ch.take(cols["dscp"]).astype(np.uint8) >> np.uint8(3)       # (bytes: a narrow pass)
        ok = ch.valid("dscp")
        if ok is not None:
            out[~ok] = NO_PRIORITY
    if "pcp" in cols:
        ok = ch.valid("pcp")
        if ok is None or ok.any():
            pcp = ch.take(cols["pcp"]).astype(np.uint8)
            out = pcp if ok is None else np.where(ok, pcp, np.uint8(NO_PRIORITY) if out is None else out)
    return np.full(ch.n, NO_PRIORITY, np.uint8) if out is None else out
