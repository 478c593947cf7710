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
MACs x proto) with one hash and a scatter table (no sort); only the classes (hundreds, not
packets) cross chunks, so memory is bounded by flows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.analysis.opcodes import CONTINUES_RESPONSE, OPCLASS, READ_RESPONSE
from roceview.batch import PROTO_CODE, PROTO_NAMES

PSN_MASK = (1 << 24) - 1
_ROCE = [PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]
_M = [np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                             0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53,
                             0x27D4EB2F165667C5, 0x94D049BB133111EB)]
_SLOTS = 1 << 16
_STARTS_RESPONSE = np.zeros(256, dtype=bool)   # READ response FIRST / ONLY start a response
for _b in (0x00, 0x40, 0xA0):
    _STARTS_RESPONSE[_b | 0x0D] = _STARTS_RESPONSE[_b | 0x10] = True


@dataclass
class Klass:
    """One class of RoCE packets: same flow, priority, ECN, opcode class, MACs."""
    src: tuple
    dst: tuple
    qp: int
    proto: str
    pcp: int          # -1: untagged
    dscp: int         # -1: none (IB without GRH)
    ecn: int          # -1: none
    opclass: int      # roceview.analysis.opcodes class code
    src_mac: int      # -1: none
    dst_mac: int
    packets: int = 0
    bad_icrc: int = 0
    truncated: int = 0
    first_ts: int = 0
    last_ts: int = 0
    first_psn: int = 0
    last_psn: int = 0


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


def _hash(parts) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = np.zeros(len(parts[0]), dtype=np.uint64)
        for i, p in enumerate(parts):
            h ^= p.astype(np.uint64) * _M[i % len(_M)]
            h = (h ^ (h >> np.uint64(31))) * _M[(i + 3) % len(_M)]
    return h


def distinct(h: np.ndarray) -> np.ndarray:
    """Group id per row (rows with equal hash share it), dense from 0, without sorting:
    scatter row numbers into a table by hash bits, keep rows that find their own hash there,
    retry the rest with other bits."""
    n = len(h)
    gid = np.full(n, -1, dtype=np.int64)
    rows = np.arange(n)
    owners = []
    shift = 48
    while len(rows):
        slot = ((h[rows] >> np.uint64(shift)) & np.uint64(_SLOTS - 1)).astype(np.int64) if shift >= 0 \
            else (h[rows] % np.uint64(_SLOTS - 1)).astype(np.int64)
        table = np.full(_SLOTS, -1, dtype=np.int64)
        table[slot] = rows
        owner = table[slot]
        ok = h[owner] == h[rows]
        mark = np.zeros(n, dtype=bool)            # the owners, in row order, without a sort
        mark[owner[ok]] = True
        used = np.flatnonzero(mark)
        remap = np.full(n, -1, dtype=np.int64)
        remap[used] = np.arange(len(owners), len(owners) + len(used))
        owners.extend(used.tolist())
        gid[rows[ok]] = remap[owner[ok]]
        rows = rows[~ok]
        shift -= 16
    return gid


def _col(batch, name, sel, fill=-1) -> np.ndarray:
    """int64 values of the selected rows (`sel`: index array or slice), `fill` where invalid."""
    if name not in batch.cols:
        return np.full(len(batch.cols["ts_ns"][sel]), fill, dtype=np.int64)
    v = batch.cols[name][sel].astype(np.int64)
    if name in batch.valid:
        v[~batch.valid[name][sel]] = fill
    return v


class FactCollector:
    def __init__(self, max_examples: int = 5):
        self.max_examples = max_examples
        self.facts = CaptureFacts()
        self._classes: dict[int, Klass] = {}
        self._last_ts: int | None = None
        self._read_state: dict[int, tuple[int, int]] = {}   # flow hash -> (last psn, opcode)

    def feed(self, batch) -> None:
        if batch.n == 0:
            return
        self._timestamps(batch)
        self._lldp(batch)
        self._truncation(batch)
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        if name not in batch.cols:
            return
        roce = np.isin(batch.cols["_proto"], _ROCE) & batch.mask(name) & batch.mask("dest_qp")
        rows = np.flatnonzero(roce)
        if len(rows):
            self._roce(batch, rows, name)

    def finish(self) -> CaptureFacts:
        self.facts.classes = list(self._classes.values())
        return self.facts

    # ---- capture quality ---------------------------------------------------------------------
    def _timestamps(self, batch) -> None:
        ts = batch.cols["ts_ns"]
        prev = np.empty_like(ts)
        prev[1:] = ts[:-1]
        prev[0] = ts[0] if self._last_ts is None else self._last_ts
        back = np.flatnonzero(ts < prev)
        self._last_ts = int(ts[-1])
        if len(back):
            f = self.facts
            f.ts_backwards += len(back)
            f.ts_backwards_max_ns = max(f.ts_backwards_max_ns, int((prev[back] - ts[back]).max()))
            room = self.max_examples - len(f.ts_backwards_frames)
            f.ts_backwards_frames += batch.cols["frame"][back[:max(room, 0)]].tolist()

    def _truncation(self, batch) -> None:
        if "truncated" not in batch.cols:
            return
        cut = np.flatnonzero(batch.cols["truncated"] & batch.mask("truncated"))
        if len(cut):
            f = self.facts
            f.truncated_frames += len(cut)
            room = self.max_examples - len(f.truncated_first)
            f.truncated_first += batch.cols["frame"][cut[:max(room, 0)]].tolist()

    def _lldp(self, batch) -> None:
        if "lldp_pfc_enable" not in batch.cols:
            return
        rows = np.flatnonzero(batch.mask("lldp_pfc_enable") & (batch.cols["_proto"] == PROTO_CODE["lldp"]))
        for r in rows.tolist():
            self.facts.lldp_pfc[int(batch.cols["_src_mac"][r])] = int(batch.cols["lldp_pfc_enable"][r])

    # ---- RoCE classes ------------------------------------------------------------------------
    def _roce(self, batch, rows, opname) -> None:
        sel = slice(None) if len(rows) == batch.n else rows   # all-RoCE chunks: no gathers
        n = len(rows)
        src = np.ascontiguousarray(batch.cols["_src_addr"][sel]).view("<u8").reshape(n, 2)
        dst = np.ascontiguousarray(batch.cols["_dst_addr"][sel]).view("<u8").reshape(n, 2)
        qp = batch.cols["dest_qp"][sel]
        opcode = batch.cols[opname][sel]
        small = self._small(batch, sel, opcode)
        macs = [_col(batch, "_src_mac", sel), _col(batch, "_dst_mac", sel)]
        flow_h = _hash([src[:, 0], src[:, 1], dst[:, 0], dst[:, 1], qp])
        h = _hash([flow_h, small] + macs)
        gid = distinct(h)
        k = int(gid.max()) + 1
        idx = np.arange(n)
        first = np.full(k, n, dtype=np.int64)
        np.minimum.at(first, gid, idx)
        last = np.zeros(k, dtype=np.int64)
        np.maximum.at(last, gid, idx)
        counts = np.bincount(gid, minlength=k)
        bad = self._bad_icrc(batch, sel, rows, gid, k)
        cut = np.bincount(gid, batch.cols["truncated"][sel], minlength=k) if "truncated" in batch.cols \
            else np.zeros(k)
        ts, psn = batch.cols["ts_ns"][sel], _col(batch, "psn", sel, 0)
        cols = {"small": small, "src_mac": macs[0], "dst_mac": macs[1]}
        for g in range(k):
            self._merge(int(h[first[g]]), first[g], last[g], counts[g], bad[g], cut[g], src, dst, qp, cols, ts, psn)
        self._read_responses(batch, sel, opcode, flow_h, psn, src, dst, qp)

    @staticmethod
    def _small(batch, sel, opcode) -> np.ndarray:
        """proto, PCP, DSCP, ECN and opcode class packed in one int64 (absent values as all ones)."""
        packed = batch.cols["_proto"][sel].astype(np.int64)
        for name, bits in (("pcp", 4), ("dscp", 7), ("ecn", 3)):
            packed = (packed << bits) | (_col(batch, name, sel, (1 << bits) - 1))
        return (packed << 4) | OPCLASS[opcode]

    def _bad_icrc(self, batch, sel, rows, gid, k) -> np.ndarray:
        if "icrc_ok" not in batch.cols:
            return np.zeros(k, dtype=np.int64)
        bad = batch.mask("icrc_ok")[sel] & ~batch.cols["icrc_ok"][sel]
        if not bad.any():
            return np.zeros(k, dtype=np.int64)
        room = self.max_examples - len(self.facts.bad_icrc_frames)
        self.facts.bad_icrc_frames += batch.cols["frame"][rows[bad]][:max(room, 0)].tolist()
        return np.bincount(gid, bad, minlength=k).astype(np.int64)

    def _merge(self, key, i, j, count, bad, cut, src, dst, qp, cols, ts, psn) -> None:
        c = self._classes.get(key)
        if c is None:
            small = int(cols["small"][i])
            opclass, ecn, dscp, pcp, proto = (small & 15, small >> 4 & 7, small >> 7 & 127, small >> 14 & 15,
                                              small >> 18)
            c = self._classes[key] = Klass(
                tuple(src[i].tolist()), tuple(dst[i].tolist()), int(qp[i]), PROTO_NAMES[proto],
                -1 if pcp == 15 else pcp, -1 if dscp == 127 else dscp, -1 if ecn == 7 else ecn, opclass,
                int(cols["src_mac"][i]), int(cols["dst_mac"][i]), first_ts=int(ts[i]), first_psn=int(psn[i]))
        c.packets += int(count)
        c.bad_icrc += int(bad)
        c.truncated += int(cut)
        c.last_ts, c.last_psn = int(ts[j]), int(psn[j])

    def _read_responses(self, batch, sel_rows, opcode, flow_h, psn, src, dst, qp) -> None:
        """READ response MIDDLE/LAST whose PSN is not the previous response's + 1, or a FIRST/ONLY
        while the previous READ's response is unfinished: a READ response went missing."""
        sel = np.flatnonzero(OPCLASS[opcode] == READ_RESPONSE)
        if len(sel) == 0:
            return
        g = distinct(flow_h[sel])
        order = np.argsort(g, kind="stable")
        sel, g = sel[order], g[order]
        p, op = psn[sel], opcode[sel].astype(np.int64)
        prev_p, prev_op = np.empty_like(p), np.empty_like(op)
        prev_p[1:], prev_op[1:] = p[:-1], op[:-1]
        head = np.ones(len(sel), dtype=bool)
        head[1:] = g[1:] != g[:-1]
        for r in np.flatnonzero(head).tolist():
            prev_p[r], prev_op[r] = self._read_state.get(int(flow_h[sel[r]]), (-2, -1))
        known = prev_op >= 0
        cont = CONTINUES_RESPONSE[op]
        broken = known & ((cont & (p != ((prev_p + 1) & PSN_MASK)))
                          | (_STARTS_RESPONSE[op] & ~np.isin(prev_op & 0x1F, (0x0F, 0x10))))
        tail = np.append(np.flatnonzero(head)[1:], len(sel)) - 1
        for r in tail.tolist():
            self._read_state[int(flow_h[sel[r]])] = (int(p[r]), int(op[r]))
        ts = batch.cols["ts_ns"][sel_rows]
        for r in np.flatnonzero(broken).tolist():
            i = sel[r]
            self.facts.read_breaks.append((int(ts[i]), tuple(src[i].tolist()), tuple(dst[i].tolist()),
                                           int(qp[i]), int(p[r]), int((prev_p[r] + 1) & PSN_MASK)))


def facts_from_files(files, roce_ports=()) -> CaptureFacts | None:
    """Read the capture again for its facts (when the caller did not collect them)."""
    from roceview.packets import iter_batches

    files = [f for f in files if f != "-"]
    if not files:
        return None
    collector = FactCollector()
    for batch in iter_batches(files, roce_ports=roce_ports, warn=lambda m: None):
        collector.feed(batch)
    return collector.finish()
