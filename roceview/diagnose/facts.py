"""Packet-level facts the result tables do not carry, gathered in one cheap pass over the Batches.

The analysis tables count per flow; the diagnoser also needs, per flow, which priority (PCP,
DSCP) and ECN codepoint its packets use, which MACs send them (to tell a host NIC from a switch
port), the PSN range of requests vs responses, bad ICRCs, truncation, timestamps going backwards,
LLDP DCBX PFC configuration, and READ responses whose PSN sequence breaks.

    facts = FactCollector()
    for batch in batches:
        analyzer.feed(batch); facts.feed(batch)
    result.facts = facts.finish()

Per chunk, RoCE rows are reduced to distinct "classes" (flow x PCP x DSCP x ECN x opcode class x
MACs x proto), each with its counts and the highest TTL of its frames: rows are grouped by an exact
key packed from the class columns and the TTL (facts_kernels), and only the groups, hundreds
rather than 65 k rows, are hashed to the 64-bit class keys; only the classes cross chunks, so
memory is bounded by flows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.analysis.opcode_classes import CONTINUES_RESPONSE, OPCLASS, READ_RESPONSE
from roceview.packets.batch import PROTO_CODE, PROTO_NAMES
from roceview.diagnose.facts_kernels import (Groups, SortedMap, distinct, distinct_rank, group_max,
                                             hash_parts, mixed_radix)

PSN_MASK = (1 << 24) - 1
_ROCE = [PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]
_ROCE_LOW = min(_ROCE)                          # the RoCE codes are consecutive: one compare
assert sorted(_ROCE) == list(range(_ROCE_LOW, _ROCE_LOW + len(_ROCE)))
_SMALL = (("pcp", 4), ("dscp", 7), ("ecn", 3))  # packed below proto, above the opcode class
_COUNTERS = ("packets", "bad_icrc", "truncated", "last_ts", "last_psn", "ttl_max")   # ttl_max + 1: 0 none
_STARTS_RESPONSE = np.zeros(256, dtype=bool)   # READ response FIRST / ONLY start a response
for _b in (0x00, 0x40, 0xA0):
    _STARTS_RESPONSE[_b | 0x0D] = _STARTS_RESPONSE[_b | 0x10] = True


@dataclass(slots=True)       # no __dict__ per class (about two per flow: 100 k queue pairs, 200 k)
class Klass:
    """One class of RoCE packets: same flow, priority, ECN, opcode class, MACs."""
    src: tuple
    dst: tuple
    qp: int
    proto: str
    pcp: int          # -1: untagged
    dscp: int         # -1: none (IB without GRH)
    ecn: int          # -1: none
    opclass: int      # roceview.analysis.opcode_classes class code
    src_mac: int      # -1: none
    dst_mac: int
    packets: int = 0
    bad_icrc: int = 0
    truncated: int = 0
    first_ts: int = 0
    last_ts: int = 0
    first_psn: int = 0
    last_psn: int = 0
    ttl_max: int = -1  # its frames' highest IPv4 TTL / IPv6, GRH hop limit (-1: none; diagnose.host_nics)


@dataclass
class CaptureFacts:
    classes: list = field(default_factory=list)
    bad_icrc_frames: list = field(default_factory=list)     # first few frame numbers
    truncated_frames: int = 0
    truncated_first: list = field(default_factory=list)
    ts_backwards: int = 0
    ts_backwards_max_ns: int = 0
    ts_backwards_frames: list = field(default_factory=list)
    lldp_pfc: dict = field(default_factory=dict)            # src MAC -> PFC enable bitmap
    read_breaks: list = field(default_factory=list)         # (ts, src, dst, qp, psn, expected)


def _unsigned(a: np.ndarray) -> np.ndarray:
    """The same bits as unsigned ints (mixed_radix's digits); bools as uint8."""
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "ib" else a


class _Rows:
    """The chunk's RoCE rows (`rows`: batch row numbers, None for every row): the class columns
    per row for the exact key, and at a few rows the values the class hash is made of."""

    def __init__(self, batch, rows, opname, flows=None):
        self.batch, self.rows, self.flows = batch, rows, flows
        self.sel = sel = slice(None) if rows is None else rows
        self.n = batch.n if rows is None else len(rows)
        self.src = np.ascontiguousarray(batch.cols["_src_addr"][sel])
        self.dst = np.ascontiguousarray(batch.cols["_dst_addr"][sel])
        self.opcode = batch.cols[opname][sel]

    def at(self, i):
        """Batch row numbers of local rows `i`."""
        return i if self.rows is None else self.rows[i]

    def key_fields(self) -> dict:
        """Per-row columns whose equal values make equal classes (some finer: the opcode, not its
        class; a value and its validity rather than the value or a fill)."""
        n, cols, sel = self.n, self.batch.cols, self.sel
        if self.flows is not None:                 # the analysis's flow ids: one small lane
            fields = {"flow": _unsigned(self.flows)}
        else:
            lanes = np.empty((4, n), dtype=np.uint64)  # addresses as big-endian halves: IPv4s
            np.copyto(lanes[:2], self.src.view(">u8").reshape(n, 2).T)   # differ in the low bits,
            np.copyto(lanes[2:], self.dst.view(">u8").reshape(n, 2).T)   # a small range
            fields = {"addr": lanes, "dest_qp": _unsigned(cols["dest_qp"][sel])}
        fields.update({"_proto": _unsigned(cols["_proto"][sel]), "opcode": _unsigned(self.opcode)})
        if "truncated" in cols:                    # not a class field (nor is the TTL): counted per class
            fields["truncated"] = _unsigned(cols["truncated"][sel])
        for name in [name for name, _ in _SMALL] + ["_src_mac", "_dst_mac", "ttl"]:
            if name not in cols:
                continue                           # the fill on every row
            valid = self.batch.valid.get(name)
            valid = None if valid is None else valid[sel]
            if valid is not None and not valid.any():
                continue
            if valid is None or valid.all():
                fields[name] = _unsigned(cols[name][sel])
            else:                                  # invalid rows as a valid one: no stray values
                v = cols[name][sel]
                fields[name] = _unsigned(np.where(valid, v, v[np.argmax(valid)]))
                fields[name + " valid"] = _unsigned(valid)
        return fields

    def col(self, name, i, fill=-1) -> np.ndarray:
        """int64 values at local rows `i`, `fill` where invalid or absent."""
        batch = self.batch
        if name not in batch.cols:
            return np.full(len(i), fill, dtype=np.int64)
        r = self.at(i)
        v = batch.cols[name][r].astype(np.int64)
        if name in batch.valid:
            v[~batch.valid[name][r]] = fill
        return v

    def small(self, i) -> np.ndarray:
        """proto, PCP, DSCP, ECN and opcode class packed in one int64 (absent values as all ones)."""
        packed = self.batch.cols["_proto"][self.at(i)].astype(np.int64)
        for name, bits in _SMALL:
            packed = (packed << bits) | self.col(name, i, (1 << bits) - 1)
        return (packed << 4) | OPCLASS[self.opcode[i]]

    def flow_hash(self, i) -> np.ndarray:
        src, dst = self.src[i].view("<u8"), self.dst[i].view("<u8")
        return hash_parts([src[:, 0], src[:, 1], dst[:, 0], dst[:, 1], self.batch.cols["dest_qp"][self.at(i)]])

    def class_hash(self, i) -> np.ndarray:
        """The key classes are kept by: the flow hash, then the packed small fields and the MACs."""
        return hash_parts([self.flow_hash(i), self.small(i), self.col("_src_mac", i), self.col("_dst_mac", i)])

    def addrs(self, i) -> list[list[tuple]]:
        """Source and destination addresses of local rows `i`, as pairs of 64-bit ints."""
        return [list(map(tuple, a[i].view("<u8").tolist())) for a in (self.src, self.dst)]


def steps_back(ts: np.ndarray, last: int | None) -> tuple[np.ndarray, int]:
    """(the rows of a chunk of timestamps stamped before the row before them, the largest such
    step back in ns); `last`: the timestamp of the row before the chunk (None: none)."""
    start = ts[0] if last is None else last
    # the usual chunk is in order: one compare, no copy of the column
    if ts[0] >= start and not (ts[1:] < ts[:-1]).any():
        return np.zeros(0, np.int64), 0
    prev = np.empty_like(ts)
    prev[1:] = ts[:-1]
    prev[0] = start
    back = np.flatnonzero(ts < prev)
    return back, int((prev[back] - ts[back]).max())


class FactCollector:
    def __init__(self, max_examples: int = 5):
        self.max_examples = max_examples
        self.facts = CaptureFacts()
        self._index = SortedMap()                     # class hash -> its number (order added)
        self._classes: list[Klass] = []
        # per class number, summed per chunk in numpy, copied into the Klasses by finish()
        self._counters = np.zeros((len(_COUNTERS), 64), dtype=np.int64)
        self._last_ts: int | None = None
        self._layout, self._hashes = None, SortedMap(np.uint64)   # see _class_hashes
        self._read_state: dict[int, tuple[int, int]] = {}   # flow hash -> (last psn, opcode)

    def feed(self, batch, flows: np.ndarray | None = None) -> None:
        """flows: optionally, the analysis's flow id (int64 >= 0, ids stable across chunks) of
        each RoCE row with an opcode and a dest QP, in row order (Analyzer.flow_ids): the
        classes are then grouped by it instead of by both addresses and the QP (the same
        groups, fewer and narrower key columns)."""
        if batch.n == 0:
            return
        self._timestamps(batch)
        self._lldp(batch)
        self._truncation(batch)
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        if name not in batch.cols:
            return
        proto = batch.cols["_proto"]
        if proto.dtype == np.uint8:                # np.isin is ~40x slower than one compare
            roce = (proto - np.uint8(_ROCE_LOW)) < len(_ROCE)
        else:
            roce = np.isin(proto, _ROCE)
        roce &= batch.mask(name)
        roce &= batch.mask("dest_qp")
        rows = None if roce.all() else np.flatnonzero(roce)
        if flows is not None and len(flows) != (batch.n if rows is None else len(rows)):
            raise ValueError("FactCollector.feed: one flow id per RoCE row")
        if flows is not None and len(flows) and flows.min() < 0:      # second captures of a frame
            keep = flows >= 0
            rows, flows = (np.arange(batch.n) if rows is None else rows)[keep], flows[keep]
        if rows is None or len(rows):
            self._roce(_Rows(batch, rows, name, flows))

    def finish(self) -> CaptureFacts:
        counters = self._counters[:, :len(self._classes)].tolist()   # rows in _COUNTERS order
        for c, packets, bad, cut, ts, psn, ttl in zip(self._classes, *counters):
            c.packets, c.bad_icrc, c.truncated, c.last_ts, c.last_psn, c.ttl_max = packets, bad, cut, ts, psn, ttl - 1
        self.facts.classes = list(self._classes)
        return self.facts

    # ---- capture quality ---------------------------------------------------------------------
    def _timestamps(self, batch) -> None:
        ts = batch.cols["ts_ns"]
        back, drop = steps_back(ts, self._last_ts)
        self._last_ts = int(ts[-1])
        if not len(back):
            return
        f = self.facts
        f.ts_backwards += len(back)
        f.ts_backwards_max_ns = max(f.ts_backwards_max_ns, drop)
        room = self.max_examples - len(f.ts_backwards_frames)
        f.ts_backwards_frames += batch.cols["frame"][back[:max(room, 0)]].tolist()

    def _truncation(self, batch) -> None:
        if "truncated" not in batch.cols:
            return
        cut = batch.cols["truncated"]
        if "truncated" in batch.valid or cut.dtype != bool:
            cut = cut & batch.mask("truncated")
        f = self.facts
        f.truncated_frames += int(np.count_nonzero(cut))
        room = self.max_examples - len(f.truncated_first)
        if room > 0 and cut.any():                 # frame numbers only until there are enough
            f.truncated_first += batch.cols["frame"][np.flatnonzero(cut)[:room]].tolist()

    def _lldp(self, batch) -> None:
        if "lldp_pfc_enable" not in batch.cols:
            return
        valid = batch.valid.get("lldp_pfc_enable")
        if valid is not None and not valid.any():
            return
        rows = np.flatnonzero(batch.mask("lldp_pfc_enable") & (batch.cols["_proto"] == PROTO_CODE["lldp"]))
        for r in rows.tolist():
            self.facts.lldp_pfc[int(batch.cols["_src_mac"][r])] = int(batch.cols["lldp_pfc_enable"][r])

    # ---- RoCE classes ------------------------------------------------------------------------
    def _roce(self, v: _Rows) -> None:
        fields = v.key_fields()
        key, size, bounds = mixed_radix(list(fields.values()))
        if key is None:                            # too wide for an exact key (IPv6): hash every row
            key = v.class_hash(np.arange(v.n))
            groups = Groups(key, 1 << 64, exact=False)
            h, reads = key[groups.last], slice(None)
        else:
            groups = Groups(key, size)
            h = self._class_hashes(v, groups, key, (tuple(fields), bounds))
            reads = groups.last                    # the opcode is a key field: one per group
        self._add(v, groups, h)
        if (OPCLASS.take(v.opcode[reads]) == READ_RESPONSE).any():
            self._read_responses(v, np.flatnonzero(OPCLASS.take(v.opcode) == READ_RESPONSE))

    def _class_hashes(self, v: _Rows, groups: Groups, key, layout) -> np.ndarray:
        """The class hash of each group; remembered by key while the chunks' key layout (fields,
        their bounds) stays the same, as it does in a steady stream of the same flows."""
        keys = key[groups.last]
        if layout != self._layout:
            h = v.class_hash(groups.last)
            self._layout, self._hashes = layout, SortedMap(np.uint64)
            self._hashes.add(keys, h)                 # groups have distinct keys
            return h
        h, found = self._hashes.get(keys)
        if not found.all():
            miss = np.flatnonzero(~found)
            h[miss] = v.class_hash(groups.last[miss])
            self._hashes.add(keys[miss], h[miss])
        return h

    def _add(self, v: _Rows, groups: Groups, h: np.ndarray) -> None:
        """Add each group's rows to its class; groups of one class hash (the key tells opcodes
        apart, classes only opcode classes) are one class."""
        last, counts, first = groups.last, groups.counts, None
        bad, cut = self._bad_icrc(v, groups), self._truncated(v, groups)
        ttl = v.col("ttl", last) if groups.exact else groups.max(v.col("ttl", np.arange(v.n)))
        distinct_h, cls = np.unique(h, return_inverse=True)
        if len(distinct_h) < len(h):
            h, k = distinct_h, len(distinct_h)
            first = np.full(k, v.n, dtype=np.int64)
            np.minimum.at(first, cls, groups.first())
            last, ttl = group_max(cls, last, k), group_max(cls, ttl, k)
            counts = np.bincount(cls, counts, minlength=k).astype(np.int64)
            bad, cut = (np.bincount(cls, x, minlength=k).astype(np.int64) for x in (bad, cut))
        index, found = self._index.get(h)
        if not found.all():
            new = np.flatnonzero(~found).tolist()
            self.new_classes(v, h, last, new, groups.first() if first is None else first)
            index, _ = self._index.get(h)
        c = self._counters
        c[0, index] += counts
        if bad.any():
            c[1, index] += bad
        if cut.any():
            c[2, index] += cut
        c[3, index] = v.batch.cols["ts_ns"][v.at(last)]
        c[4, index] = v.col("psn", last, 0)
        c[5, index] = np.maximum(c[5, index], ttl + 1)

    def new_classes(self, v: _Rows, h, last, new, first) -> None:
        """Classes first seen in this chunk, numbered in the order the row-hash table numbers them."""
        if len(new) > 1:
            rank = distinct_rank(h, last)
            new.sort(key=rank.__getitem__)
        rows = first[new]
        small = v.small(rows)
        unpacked = [np.where(x == none, -1, x).tolist() for x, none in
                    ((small >> 14 & 15, 15), (small >> 7 & 127, 127), (small >> 4 & 7, 7), (small & 15, -1))]
        proto = [PROTO_NAMES[p] for p in (small >> 18).tolist()]
        at = v.at(rows)
        columns = (*v.addrs(rows), v.batch.cols["dest_qp"][at].tolist(), proto, *unpacked,
                   v.col("_src_mac", rows).tolist(), v.col("_dst_mac", rows).tolist())
        firsts = zip(v.batch.cols["ts_ns"][at].tolist(), v.col("psn", rows, 0).tolist())
        self._index.add(h[new], np.arange(len(self._classes), len(self._classes) + len(new)))
        self._classes += [Klass(*fields, first_ts=ts, first_psn=psn)
                          for *fields, (ts, psn) in zip(*columns, firsts)]
        if len(self._classes) > self._counters.shape[1]:
            grown = np.zeros((len(_COUNTERS), 2 * len(self._classes)), dtype=np.int64)
            grown[:, :self._counters.shape[1]] = self._counters
            self._counters = grown

    def _bad_icrc(self, v: _Rows, groups: Groups) -> np.ndarray:
        batch, k = v.batch, len(groups.used)
        if "icrc_ok" not in batch.cols:
            return np.zeros(k, dtype=np.int64)
        bad = batch.mask("icrc_ok")[v.sel] & ~batch.cols["icrc_ok"][v.sel]
        if not bad.any():
            return np.zeros(k, dtype=np.int64)
        room = self.max_examples - len(self.facts.bad_icrc_frames)
        self.facts.bad_icrc_frames += batch.cols["frame"][v.at(np.flatnonzero(bad))][:max(room, 0)].tolist()
        return groups.sum(bad).astype(np.int64)

    @staticmethod
    def _truncated(v: _Rows, groups: Groups) -> np.ndarray:
        cut = v.batch.cols.get("truncated")
        if cut is None:
            return np.zeros(len(groups.used), dtype=np.int64)
        if groups.exact:                           # a key field: one value per group
            return cut[v.at(groups.last)].astype(np.int64) * groups.counts
        return groups.sum(cut[v.sel]).astype(np.int64)

    def _read_responses(self, v: _Rows, sel: np.ndarray) -> None:
        """READ response MIDDLE/LAST whose PSN is not the previous response's + 1, or a FIRST/ONLY
        while the previous READ's response is unfinished: a READ response went missing."""
        flow_h = v.flow_hash(sel)
        g = distinct(flow_h)
        order = np.argsort(g, kind="stable")
        sel, g, flow_h = sel[order], g[order], flow_h[order]
        p, op = v.col("psn", sel, 0), v.opcode[sel].astype(np.int64)
        prev_p, prev_op = np.empty_like(p), np.empty_like(op)
        prev_p[1:], prev_op[1:] = p[:-1], op[:-1]
        head = np.ones(len(sel), dtype=bool)
        head[1:] = g[1:] != g[:-1]
        for r in np.flatnonzero(head).tolist():
            prev_p[r], prev_op[r] = self._read_state.get(int(flow_h[r]), (-2, -1))
        known = prev_op >= 0
        cont = CONTINUES_RESPONSE[op]
        broken = known & ((cont & (p != ((prev_p + 1) & PSN_MASK)))
                          | (_STARTS_RESPONSE[op] & ~np.isin(prev_op & 0x1F, (0x0F, 0x10))))
        tail = np.append(np.flatnonzero(head)[1:], len(sel)) - 1
        for r in tail.tolist():
            self._read_state[int(flow_h[r])] = (int(p[r]), int(op[r]))
        r = np.flatnonzero(broken)
        at = v.at(sel[r])
        self.facts.read_breaks += zip(v.batch.cols["ts_ns"][at].tolist(), *v.addrs(sel[r]),
                                      v.batch.cols["dest_qp"][at].tolist(), p[r].tolist(),
                                      ((prev_p[r] + 1) & PSN_MASK).tolist())


def facts_from_files(files, roce_ports=()) -> CaptureFacts | None:
    """Read the capture again for its facts (when the caller did not collect them)."""
    from roceview.packets.read import iter_batches

    files = [f for f in files if f != "-"]
    if not files:
        return None
    collector = FactCollector()
    for batch in iter_batches(files, roce_ports=roce_ports, warn=lambda m: None):
        collector.feed(batch)
    return collector.finish()

