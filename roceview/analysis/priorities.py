"""priorities.csv: traffic, ECN and PFC side by side per direction, priority and DSCP.

One row per (source MAC, destination MAC, VLAN PCP, DSCP) seen in the capture, every frame
counted (RoCE or not, second captures of a frame too: the rows add up to the capture). Its
priority is the diagnoser's (--config `trust`, `dscp_to_priority`: a `priority_table`); by
default the PCP when the frame is VLAN-tagged, else DSCP >> 3 (`trust auto`), else blank. A PFC frame from MAC M for priority p pauses what M's link partner
sends to M on p, so the pfc.csv row (M, p) is joined to every row whose destination is M and
priority p; a (M, p) no row goes to (a switch port's MAC, hosts sending to a router MAC) gets a
row of its own with the traffic counts 0, as does every 802.3x PAUSE (priority `all`, as in
pfc.csv). Columns: docs/columns.md.

State is bounded by the distinct (MAC pair, PCP, DSCP) keys: each chunk's rows are put in their
key's slot by a small hash table checked against the slot's key (a miss or a collision goes the
exact slow way), then counted with bincounts; no per-packet Python objects.
"""
from __future__ import annotations

import numpy as np

from roceview.analysis import opcode_classes as op
from roceview.analysis.state import Columns
from roceview.packets.batch import PROTO_CODE, PROTO_NAMES, Batch
from roceview.packets.names import mac_text

PRIORITY_COLUMNS = ("src_mac", "dst_mac", "priority", "pcp", "dscp", "packets", "bytes", "roce_packets",
                    "roce_bytes", "roce_share", "data_packets", "ect_packets", "ce_packets", "ce_share",
                    "cnp_packets", "pause_frames", "resume_frames", "paused_us", "longest_pause_us", "first_ts",
                    "last_ts")
FIELDS = ("packets", "bytes", "roce_packets", "roce_bytes", "data_packets", "ect_packets", "ce_packets",
          "cnp_packets")
PAUSE_FIELDS = ("pause_frames", "resume_frames", "paused_us", "longest_pause_us")
NO_MAC = 1 << 48             # a frame without an Ethernet header (native IB): MAC blank
DSCPS = 65                   # DSCP 0..63 and none: a key's class is (pcp + 1) * DSCPS + dscp + 1
_ROCE = np.zeros(len(PROTO_NAMES), dtype=bool)
_ROCE[[PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]]] = True
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))
_TS_NONE = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
PCPS = 9                     # VLAN PCP 0..7 and untagged


def priority_table(trust: str = "auto", dscp_priorities=None) -> np.ndarray:
    """The priority (-1: none) a switch gives a frame, per class: int8 [PCP + 1, DSCP + 1], 0
    where untagged / without DSCP, so that `table.ravel()[class]` is a class's priority.
    trust: "pcp", "dscp", or "auto" (PCP when tagged, else DSCP); dscp_priorities: the
    priority of each DSCP 0..63 (default DSCP >> 3). diagnose.Config.priority_table builds it
    from the settings, so that the analysis and the diagnoser's priority_of agree."""
    dscp = np.arange(64) >> 3 if dscp_priorities is None else np.asarray(dscp_priorities)
    table = np.full((PCPS, DSCPS), -1, np.int8)
    if trust != "pcp":
        table[:, 1:] = dscp
    if trust != "dscp":
        table[1:, :] = np.arange(8)[:, None]
    return table


DEFAULT_TABLE = priority_table()


class KeySlots:
    """Slot per (src MAC, dst MAC, class) key, in order of first appearance. A chunk whose keys are
    all known costs a hash, one gather from a table of 2^bits slots and a check of the slot's key;
    rows that miss (new keys, collisions) are resolved exactly through a dict of the distinct keys."""

    def __init__(self):
        self.keys: dict[tuple[int, int, int], int] = {}
        self.src, self.dst, self.cls = (np.zeros(16, np.uint64) for _ in range(3))    # [:len(keys)] used
        self.bits = 10
        self.table = np.full(1 << self.bits, -1, np.int64)

    def __call__(self, src: np.ndarray, dst: np.ndarray, cls: np.ndarray) -> np.ndarray:
        h = self._hash(src, dst, cls)
        if not self.keys:
            return self._slow(src, dst, cls, h)
        slot = self.table.take(h)
        safe = np.maximum(slot, 0)
        miss = (slot < 0) | (self.src.take(safe, mode="clip") != src) | (self.dst.take(safe, mode="clip") != dst)
        miss |= self.cls.take(safe, mode="clip") != cls
        if miss.any():
            rows = np.flatnonzero(miss)
            slot[rows] = self._slow(src[rows], dst[rows], cls[rows], h[rows])
        return slot

    def _hash(self, src, dst, cls) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = src * _MIX[0]
            h ^= dst * _MIX[1]
            h ^= cls * _MIX[2]
        return (h >> np.uint64(64 - self.bits)).astype(np.int64)

    def _slow(self, src, dst, cls, h) -> np.ndarray:
        """Slots of the rows the table missed: a row per hash value looked up (and added) and
        given to the rows of its key; rows of another key with that hash go round again."""
        out = np.empty(len(src), np.int64)
        todo = np.arange(len(src))
        while len(todo):
            _, first, back = np.unique(h[todo], return_index=True, return_inverse=True)
            rep = todo[first]
            found = np.array([self._slot(*k) for k in zip(src[rep].tolist(), dst[rep].tolist(), cls[rep].tolist())],
                             np.int64)
            self._place(found)
            rep_row = rep[back.ravel()]
            same = (src[todo] == src[rep_row]) & (dst[todo] == dst[rep_row]) & (cls[todo] == cls[rep_row])
            out[todo[same]] = found[back.ravel()[same]]
            todo = todo[~same]
        return out

    def _place(self, found: np.ndarray) -> None:
        """Keys into the table's free buckets (a bucket taken stays with its key)."""
        if len(self.keys) * 4 > len(self.table):
            self._grow()
            return
        buckets = self._hash(self.src[found], self.dst[found], self.cls[found])
        free = self.table[buckets] < 0
        self.table[buckets[free]] = found[free]

    def _slot(self, src: int, dst: int, cls: int) -> int:
        n = len(self.keys)
        slot = self.keys.setdefault((src, dst, cls), n)
        if slot == n:                                   # a new key: the arrays double when full
            if n == len(self.src):
                self.src, self.dst, self.cls = (np.append(a, np.zeros(n, np.uint64)) for a in (self.src, self.dst,
                                                                                               self.cls))
            self.src[n], self.dst[n], self.cls[n] = src, dst, cls
        return slot

    def _grow(self) -> None:
        """A table four times the keys: collisions stay rare however many MAC pairs."""
        while len(self.keys) * 4 > (1 << self.bits):
            self.bits += 2
        self.table = np.full(1 << self.bits, -1, np.int64)
        n = len(self.keys)
        h = self._hash(self.src[:n], self.dst[:n], self.cls[:n])
        self.table[h[::-1]] = np.arange(n)[::-1]          # a shared bucket: the first key's


class PriorityCounts:
    """The per-key counters, fed every frame of the capture (Analyzer._analyze)."""

    def __init__(self):
        self.slots = KeySlots()
        self.st = Columns({**{f: (np.int64, 0) for f in FIELDS},
                           "first_ts": (np.int64, _TS_NONE[0]), "last_ts": (np.int64, _TS_NONE[1])})

    def feed(self, batch: Batch, in_order: bool | None = None) -> None:
        """Count a chunk's frames; in_order: its timestamps never decrease (None: look). Rows
        are taken in runs of one key (a burst of a flow, its ACKs): only a run's first row is
        looked up, and the counters add up per run (one pass a counter) before per slot."""
        if not batch.n:
            return
        ts = batch.cols["ts_ns"]
        if in_order is None:
            in_order = bool(len(ts) < 2 or (ts[1:] >= ts[:-1]).all())
        src, dst, cls = _macs(batch, "_src_mac"), _macs(batch, "_dst_mac"), frame_classes(batch)
        starts = _run_starts(src, dst, cls)
        heads = (lambda v: v) if len(starts) == batch.n else (lambda v: v.take(starts))
        slot = self.slots(heads(src), heads(dst), heads(cls).astype(np.uint64))
        st = self.st
        st.grow(len(self.slots.keys))
        runs = _Runs(starts, batch.n)
        self._count(batch, runs, slot)
        first, last = ((ts.take(starts), ts.take(runs.ends - 1)) if in_order else
                       (np.minimum.reduceat(ts, starts), np.maximum.reduceat(ts, starts)))
        np.minimum.at(st.first_ts, slot, first)
        np.maximum.at(st.last_ts, slot, last)

    def _count(self, batch: Batch, runs: "_Runs", slot: np.ndarray) -> None:
        """The counters added to each slot; CE and CNP rows (rare) one by one."""
        roce = _ROCE.take(batch.cols["_proto"])
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        flags = (np.where(roce & batch.mask(name), op.FLAGS.take(batch.cols[name]), 0) if name in batch.cols
                 else np.zeros(batch.n, np.uint8))       # an opcode counts on RoCE rows where it is valid
        data = (flags & op.F_DATA) != 0
        ect, ce = _ecn(batch, data)
        wire = batch.cols["wire_len"]
        if runs.many():
            self._by_row(runs.per_row(slot), roce, data, ect, wire)
        else:
            self._by_run(runs, slot, roce, data, ect, wire)
        for name, rows in (("ce_packets", ce), ("cnp_packets", (flags & op.F_CNP) != 0)):
            self.st.add(name, slot.take(runs.of(np.flatnonzero(rows))))

    def _by_run(self, runs: "_Runs", slot, roce, data, ect, wire) -> None:
        """Long runs (bursts): each counter summed per run (reduceat), then per slot."""
        packets, size = runs.lengths, runs.sums(wire)
        everything = bool(roce.all())
        for name, values in (("packets", packets), ("bytes", size),
                             ("roce_packets", packets if everything else runs.sums(roce)),
                             ("roce_bytes", size if everything else runs.sums(wire * roce)),
                             ("data_packets", runs.sums(data)), ("ect_packets", runs.sums(ect))):
            self.st.add(name, slot, values)

    def _by_row(self, slot, roce, data, ect, wire) -> None:
        """Short runs (keys interleaved row by row): two bincounts over the rows, packets by
        (slot, kind: other, RoCE, data, ECT data) and bytes by (slot, RoCE or not)."""
        st, n = self.st, self.st.n
        kind = np.bincount(slot * 4 + roce + data + ect, minlength=4 * n).reshape(n, 4)
        st.packets += kind.sum(axis=1)
        st.roce_packets += kind[:, 1:].sum(axis=1)
        st.data_packets += kind[:, 2:].sum(axis=1)
        st.ect_packets += kind[:, 3]
        size = np.bincount(slot * 2 + roce, wire, minlength=2 * n).reshape(n, 2).astype(np.int64)
        st.bytes += size.sum(axis=1)
        st.roce_bytes += size[:, 1]

    def state(self) -> dict:
        """The counters by key, as plain arrays (what the Dask engine's reads send the driver)."""
        n = len(self.slots.keys)
        out = {"src": self.slots.src[:n].copy(), "dst": self.slots.dst[:n].copy(), "cls": self.slots.cls[:n].copy()}
        out.update({c: getattr(self.st, c)[:n].copy() for c in FIELDS + ("first_ts", "last_ts")})
        return out


def merged(states: list[dict]) -> dict:
    """Several states (the files of a capture, read apart) as one: counts summed by key."""
    keys = np.stack([np.concatenate([s[c] for s in states]) for c in ("src", "dst", "cls")], axis=1)
    uniq, inverse = np.unique(keys.reshape(-1, 3), axis=0, return_inverse=True)
    inverse, n = inverse.ravel(), len(uniq)
    out = {"src": uniq[:, 0].copy(), "dst": uniq[:, 1].copy(), "cls": uniq[:, 2].copy()}
    for c in FIELDS:
        out[c] = np.bincount(inverse, np.concatenate([s[c] for s in states]), minlength=n).astype(np.int64)
    for c, ufunc in (("first_ts", np.minimum), ("last_ts", np.maximum)):
        out[c] = np.full(n, _TS_NONE[c == "last_ts"], np.int64)
        ufunc.at(out[c], inverse, np.concatenate([s[c] for s in states]))
    return out


def priorities_table(state: dict | None, pfc, table: np.ndarray | None = None):
    """priorities.csv from the counters (`state`) and pfc.csv (a Table), rows in (priority,
    destination MAC, source MAC, PCP, DSCP) order; table: priority_table (None: the default)."""
    from roceview.analysis.tables import Table

    rows = _traffic_rows(state, DEFAULT_TABLE if table is None else table) if state is not None else []
    pauses = {(m, p): i for i, (m, p) in enumerate(zip(pfc.data["src_mac"], pfc.data["priority"]))}
    used = set()
    for r in rows:
        i = pauses.get((r["dst_mac"], r["priority"]))
        if i is not None:
            used.add(i)
        r.update(_pause_cells(pfc, i))
    for (mac, prio), i in pauses.items():
        if i not in used:                              # no row goes to the pausing MAC on p
            rows.append({**dict.fromkeys(FIELDS, 0), "src_mac": "", "dst_mac": mac, "priority": prio, "pcp": -1,
                         "dscp": -1, "first_ts": int(pfc.data["first_ts"][i]), "last_ts": int(pfc.data["last_ts"][i]),
                         **_pause_cells(pfc, i)})
    rows.sort(key=lambda r: (_PRIORITY_RANK.get(r["priority"], 9), r["dst_mac"], r["src_mac"], r["pcp"], r["dscp"]))
    return Table(PRIORITY_COLUMNS, _columns(rows))


_PRIORITY_RANK = {**{str(p): p for p in range(8)}, "all": 8}


def _traffic_rows(state: dict, table: np.ndarray) -> list[dict]:
    cls = state["cls"].astype(np.int64)
    pcp, dscp = cls // DSCPS - 1, cls % DSCPS - 1
    prio = table.ravel().take(cls).tolist()
    names = {m: "" if m == NO_MAC else mac_text(m) for m in set(state["src"].tolist()) | set(state["dst"].tolist())}
    rows = []
    for k in range(len(cls)):
        rows.append({"src_mac": names[int(state["src"][k])], "dst_mac": names[int(state["dst"][k])],
                     "priority": str(prio[k]) if prio[k] >= 0 else "", "pcp": int(pcp[k]), "dscp": int(dscp[k]),
                     **{c: int(state[c][k]) for c in FIELDS + ("first_ts", "last_ts")}})
    return rows


def _pause_cells(pfc, i: int | None) -> dict:
    if i is None:
        return {"pause_frames": 0, "resume_frames": 0, "paused_us": 0.0, "longest_pause_us": 0.0}
    return {c: pfc.data[c][i].item() for c in PAUSE_FIELDS}


def _columns(rows: list[dict]) -> dict:
    data = {c: [r[c] for r in rows] for c in ("src_mac", "dst_mac", "priority")}
    for c in ("pcp", "dscp", "first_ts", "last_ts") + FIELDS + ("pause_frames", "resume_frames"):
        data[c] = np.array([r[c] for r in rows], np.int64)
    for c in ("paused_us", "longest_pause_us"):
        data[c] = np.array([r[c] for r in rows], np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        data["roce_share"] = np.where(data["bytes"] > 0, data["roce_bytes"] / data["bytes"], np.nan)
        data["ce_share"] = np.where(data["ect_packets"] > 0, data["ce_packets"] / data["ect_packets"], np.nan)
    return data


class _Runs:
    """Runs of rows of one key: their first rows (`starts`), ends, lengths, sums."""

    def __init__(self, starts: np.ndarray, n: int):
        self.starts, self.n = starts, n
        self.ends = np.append(starts[1:], n)
        self.lengths = self.ends - starts

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per run, the sum of `values` (bool or small integers)."""
        if values.dtype == bool:
            values = values.view(np.uint8)
        return np.add.reduceat(values, self.starts, dtype=np.int64)

    def many(self) -> bool:
        """Runs so short that counting row by row is cheaper than run by run."""
        return len(self.starts) * 4 > self.n

    def per_row(self, slot: np.ndarray) -> np.ndarray:
        """The slot of every row, from each run's."""
        return slot if len(slot) == self.n else np.repeat(slot, self.lengths)

    def of(self, rows: np.ndarray) -> np.ndarray:
        """The run of each of `rows`."""
        return np.searchsorted(self.starts, rows, side="right") - 1


def _run_starts(src: np.ndarray, dst: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """The first row of each run of rows with one (src, dst, class) key."""
    change = np.ones(len(src), dtype=bool)
    np.not_equal(cls[1:], cls[:-1], out=change[1:])
    for column in (src, dst):
        if column[0] != column[-1] or not (column == column[0]).all():     # (a missing MAC: one value)
            change[1:] |= column[1:] != column[:-1]
    return np.flatnonzero(change)


def frame_classes(batch: Batch) -> np.ndarray:
    """Per row, (pcp + 1) * DSCPS + dscp + 1 with -1 for none (uint16: narrow, cheap to compare)."""
    out = np.zeros(batch.n, np.uint16)
    for name, scale in (("pcp", DSCPS), ("dscp", 1)):
        v = batch.cols.get(name)
        if v is not None:
            one = v.astype(np.uint16) + np.uint16(1)
            ok = batch.valid.get(name)
            if ok is not None:
                one *= ok
            out += one * np.uint16(scale) if scale != 1 else one
    return out


def _ecn(batch: Batch, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The data rows that are ECN-capable (ECT(0), ECT(1) or CE) and those marked CE."""
    ecn = batch.cols.get("ecn")
    if ecn is None:
        return np.zeros(batch.n, bool), np.zeros(batch.n, bool)
    ok = batch.valid.get("ecn")
    data = data if ok is None else data & ok
    return data & (ecn != 0), data & (ecn == 3)


def _macs(batch: Batch, name: str) -> np.ndarray:
    """A MAC column as uint64, NO_MAC where absent or invalid."""
    v = batch.cols.get(name)
    if v is None:
        return np.full(batch.n, NO_MAC, np.uint64)
    v, ok = v.astype(np.uint64, copy=False), batch.valid.get(name)
    return v if ok is None or ok.all() else np.where(ok, v, np.uint64(NO_MAC))
