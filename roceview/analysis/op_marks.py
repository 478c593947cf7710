"""The operation a packet belongs to, for the display filter's `roceview.op.*` fields (an
ops.csv row on the packets that make it: docs/columns.md, "Operation fields").

An operation's latency is known only at its completion, after its request packets have gone by,
so `dissect` reads the capture twice (as for `roceview.finding`): `operation_index` runs the
analysis once and keeps every operation's row (not only ops.csv's first ops_rows.MAX_ROWS: a
filter match is never dropped), `OpIndex.annotate` writes the columns onto each batch of the
second pass. Which packets carry an operation:
  - its request packets: a request packet of its flow between its first and last frame, whose
    PSN its first PSN is the nearest at or below (within half the PSN space) among the
    operations of that flow whose frames span the packet (the analysis's own rule for a resent
    packet: the operation whose first PSN is the largest at or below its own);
  - a READ's responses: a READ response of the responder's flow, by the same rule over the
    requester's READs (from the READ request to its completing response);
  - its completion frame, unless that frame is part of a message itself; a frame completing
    several (a coalesced ACK) carries the oldest of them, whose latency is the largest.
One operation per packet at most; second captures of a frame carry none.

Memory: the rows are in a temporary file (RECORD, 74 bytes per operation, indexed by the
operation's number, which orders them by first frame), not in memory; the second pass holds
the operations whose frames span the batch (a moving window, bounded like the analysis's open
operations) and reads the file in order.
"""
from __future__ import annotations

import tempfile

import numpy as np

from roceview.analysis import ops_classes as oc
from roceview.analysis.flows import address_words
from roceview.analysis.ops_rows import RowStore
from roceview.packets.flags import Flag

PSN_BITS = 24
RECORD = np.dtype([("first", "<i8"), ("last", "<i8"), ("end", "<i8"), ("reach", "<i8"), ("compl", "<i8"),
                   ("latency", "<i8"), ("bytes", "<i8"), ("flow", "<i4"), ("psn", "<i4"), ("packets", "<i4"),
                   ("outstanding", "<i4"), ("kind", "i1"), ("retrans", "?")])
UNLIMITED = 1 << 62            # the row store's budget: every operation's row
_STEP = 1 << 20                # records per pass over the file (forget, reach)
_READ = oc.OP_CODE["READ"]
_UD_SENDS = (oc.UD_SEND_ONLY, oc.UD_SEND_ONLY_IMM)
_READ_RESPONSE = np.isin(oc.RESPONSE, (oc.RESP_READ_RESPONSE, oc.RESP_READ_LAST))


# the Batch column of each roceview.op field: (RECORD field, dtype); `first` written as a frame number
_VALUES = {"_op_kind": ("kind", np.uint8), "_op_bytes": ("bytes", np.int64), "_op_latency": ("latency", np.int64),
           "_op_packets": ("packets", np.int64), "_op_retrans": ("retrans", bool),
           "_op_outstanding": ("outstanding", np.int64), "_op_first_frame": ("first", np.int64)}


class OpRecords(RowStore):
    """An OpTracker's row store keeping every final operation's row, in a temporary file at the
    operation's number (rows come as operations become final, in any order)."""

    def __init__(self):
        super().__init__(UNLIMITED)
        self.file = tempfile.TemporaryFile(prefix="roceview-ops-")
        self.array = np.zeros(0, RECORD)

    def add(self, v: dict) -> None:
        number = v["number"]
        if not len(number):
            return
        self._room(int(number.max()) + 1)
        rec = np.zeros(len(number), RECORD)
        done = v["compl_idx"] >= 0
        rec["first"], rec["last"], rec["compl"] = v["first_idx"], v["last_idx"], v["compl_idx"]
        rec["end"] = np.maximum(v["last_idx"], v["compl_idx"])
        rec["latency"] = np.where(done, v["compl_ts"] - v["first_ts"], -1)
        for name, key in (("bytes", "bytes"), ("flow", "flow"), ("psn", "first_psn"), ("packets", "packets"),
                          ("outstanding", "outstanding"), ("kind", "kind"), ("retrans", "retrans")):
            rec[name] = v[key]
        self.array[number] = rec

    def _room(self, n: int) -> None:
        if n <= len(self.array):
            return
        size = max(n, 2 * len(self.array), 1 << 16)
        self.file.truncate(size * RECORD.itemsize)
        self.array = np.memmap(self.file, RECORD, "r+", shape=(size,))

    def forget(self, flows: np.ndarray) -> None:
        """Withdrawn pairings: the completions of these flows' operations stored so far go (as
        RowStore.forget; the OpTracker clears those it still holds)."""
        for at in range(0, len(self.array), _STEP):
            part = self.array[at:at + _STEP]
            gone = np.flatnonzero(np.isin(part["flow"], flows))
            if len(gone):
                part["compl"][gone] = part["latency"][gone] = -1
                part["end"][gone] = part["last"][gone]

    def rows(self, extra: list | None = None) -> dict:
        return super().rows([])            # (nothing for ops.csv: the rows are the file's)

    def finished(self, count: int) -> np.ndarray:
        """The `count` records, each with `reach`: the largest end of it and those before it."""
        records = self.array[:count]
        top = -1
        for at in range(0, count, _STEP):
            part = records[at:at + _STEP]
            part["reach"] = np.maximum.accumulate(np.maximum(part["end"], top))
            top = int(part["reach"][-1])
        return records


def operation_index(paths, roce_ports=(), warn=None) -> "OpIndex":
    """The first pass: the analysis `analyze` runs, keeping every operation's row."""
    from roceview.analysis.analyzer import Analyzer
    from roceview.packets.read import iter_batches

    an = Analyzer()
    store = an.ops.store = OpRecords()
    for batch in iter_batches(paths, roce_ports, warn=warn, projection="analysis"):
        an.feed(batch)
    an.finish()
    return OpIndex(store.finished(an.ops.created), an.registry, an.pairing.peer[:an.registry.n].copy())


class OpIndex:
    """The operations' records (by first frame), and the flows to find a packet's flow by."""

    def __init__(self, records: np.ndarray, registry, peer: np.ndarray):
        self.records, self.registry, self.peer = records, registry, peer
        self.active = _columns(np.zeros(0, RECORD))     # operations whose frames reach the last batch
        self.next = 0                            # the first record not read yet
        self.lo = -1                             # the last batch's first frame

    def annotate(self, batch) -> None:
        """Write the `_op_*` columns (field_names.OP_FIELDS) onto `batch`, rows in frame order."""
        from roceview.filter.field_names import OP_FIELDS

        own = np.full(batch.n, -1, np.int64)
        if batch.n:
            idx = batch.cols["frame"].astype(np.int64) - 1
            cand = self._spanning(int(idx.min()), int(idx.max()))
            if len(cand["first"]):
                own = self._owners(batch, idx, cand)
        rows = np.flatnonzero(own >= 0)
        at = own[rows]
        for d in OP_FIELDS.values():
            column = d.sources[0].column
            name, dtype = _VALUES[column]
            values = np.zeros(batch.n, dtype)
            values[rows] = self.active[name][at] + (1 if name == "first" else 0)
            batch.cols[column], batch.valid[column] = values, own >= 0
        batch.valid["_op_latency"] = batch.valid["_op_latency"] & (batch.cols["_op_latency"] >= 0)

    def _spanning(self, lo: int, hi: int) -> dict:
        """The operations whose frames reach [lo, hi] (self.active, by number): those kept from
        the batch before and those starting up to `hi`; a batch before the last (the TUI
        going back) starts over from the first whose `reach` gets there."""
        r = self.records
        if lo < self.lo:
            self.active, self.next = _columns(np.zeros(0, RECORD)), _bisect(r["reach"], lo, 0)
        self.lo = lo
        stop = _bisect(r["first"], hi + 1, self.next)
        fresh = _columns(np.array(r[self.next:stop]))
        self.next = stop
        keep = np.concatenate([self.active["end"], fresh["end"]]) >= lo
        self.active = {k: np.concatenate([v, fresh[k]])[keep] for k, v in self.active.items()}
        return self.active

    def _owners(self, batch, idx: np.ndarray, cand: dict) -> np.ndarray:
        """Per row, the position in `cand` of the operation it carries, -1 for none."""
        own = np.full(batch.n, -1, np.int64)
        rows = np.flatnonzero(batch.mask("opcode") & batch.mask("dest_qp") & batch.mask("psn"))
        if "flags" in batch.cols:                # a second capture of a frame is no packet of anything
            rows = rows[(batch.cols["flags"][rows] & np.uint32(Flag.DUPLICATE)) == 0]
        if len(rows):
            opcode = batch.cols["opcode"][rows].astype(np.uint8)
            fid = self.registry.find(address_words(batch, rows, "src"), address_words(batch, rows, "dst"),
                                     batch.cols["dest_qp"][rows].astype(np.uint32))
            request = (oc.KIND.take(opcode) >= 0) | np.isin(opcode, _UD_SENDS)
            response = _READ_RESPONSE.take(opcode) & (fid >= 0) & (fid < len(self.peer))
            flow = np.where(request, fid, np.where(response, self.peer[np.where(response, fid, 0)], -1))
            keep = (request | response) & (flow >= 0)
            rows, flow, reads = rows[keep], flow[keep], response[keep]
            own[rows] = _nearest(cand, flow, batch.cols["psn"][rows].astype(np.int64), idx[rows], reads)
        _completions(own, idx, cand)
        return own


def _columns(records: np.ndarray) -> dict:
    """Records as one contiguous array per field (a field of a record array is strided: every
    operation on it is slower)."""
    return {name: np.ascontiguousarray(records[name]) for name in RECORD.names}


def _bisect(values, x: int, lo: int) -> int:
    """The first position at or after `lo` where the ascending `values` reach `x`: one element
    read per step (np.searchsorted would copy the whole strided field of the file each time)."""
    hi = len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _nearest(cand: dict, flow, psn, idx, reads_only) -> np.ndarray:
    """Per packet, the operation of `flow` (a READ where `reads_only`) whose frames span `idx`
    and whose first PSN is the nearest at or below `psn`; -1 for none. Each operation is keyed
    at its PSN and a PSN space lower (a packet after the PSN wrapped), the search walks down
    from the packet's key while the candidates are within half the PSN space."""
    space, half = 1 << PSN_BITS, 1 << (PSN_BITS - 1)
    base = cand["flow"].astype(np.int64) << (PSN_BITS + 2)
    keys = np.r_[base + cand["psn"] + space, base + cand["psn"]]
    order = np.argsort(keys, kind="stable")
    n = len(cand["first"])
    keys, which = keys[order], np.r_[np.arange(n), np.arange(n)][order]
    want = (flow << (PSN_BITS + 2)) + psn + space
    at = np.searchsorted(keys, want, "right") - 1
    out = np.full(len(flow), -1, np.int64)
    todo = np.arange(len(flow))
    while len(todo):
        pos = at[todo]
        near = (pos >= 0) & (want[todo] - keys[np.maximum(pos, 0)] < half)
        todo, pos = todo[near], pos[near]
        j = which[pos]
        fits = (cand["first"][j] <= idx[todo]) & (idx[todo] <= cand["last"][j]) & (
            ~reads_only[todo] | (cand["kind"][j] == _READ))
        out[todo[fits]] = j[fits]
        todo = todo[~fits]
        at[todo] -= 1
    return out


def _completions(own: np.ndarray, idx: np.ndarray, cand: dict) -> None:
    """Completion frames part of no message carry the oldest operation they complete."""
    c = np.flatnonzero((cand["compl"] >= idx.min()) & (cand["compl"] <= idx.max()))
    if not len(c):
        return
    c = c[np.lexsort((c, cand["compl"][c]))]
    c = c[np.r_[True, cand["compl"][c][1:] != cand["compl"][c][:-1]]]     # the oldest (lowest number) first
    order = np.argsort(idx, kind="stable")
    at = np.minimum(np.searchsorted(idx, cand["compl"][c], sorter=order), len(idx) - 1)
    row = order[at]
    hit = (idx[row] == cand["compl"][c]) & (own[row] < 0)
    own[row[hit]] = c[hit]
