"""The packet list's store: frame -> where its bytes are, decoded again only when shown.

A capture file read through a memory map keeps, per packet, its file, record offset, lengths,
timestamp and link type (26 bytes a packet: 10 M packets = 260 MB), its flow id (4 more) and
its analysis flags (roceview.packets.flags bits, FLAG_DTYPE: 2 more); the flag values a packet's tags
name (PSNs missing, the related frame, the RTT) are kept only for the packets that have them
(28 bytes each); the packets table itself is never kept. Rows are decoded on demand (decode.decode_chunk over
the rows asked for) from a memory map of our own. A stream (stdin, gzip, a live capture) cannot
be read again: a bounded ring of its most recent batches (with their record chunks when the
source gives them) is kept instead, and the UI says so.

Plain Python and numpy: no Textual here (the core knows nothing of the screen).
"""
from __future__ import annotations

import mmap
import threading

import numpy as np

from roceview.packets.batch import Batch
from roceview.capture.readers import RecordChunk
from roceview.packets.times import DEFAULT_DIGITS
from roceview.packets.flags import Flag

RING_PACKETS = 200_000          # rows kept of a stream (live capture, stdin, gzip)
# the narrowest unsigned type holding every flag bit (14 bits: uint16; a 17th bit widens it)
FLAG_DTYPE = np.min_scalar_type(2 * max(int(f) for f in Flag) - 1)
GAP = int(Flag.GAP)


class _Grow:
    """An append-only numpy column, doubling its store (amortised O(1) per chunk)."""

    def __init__(self, dtype):
        self.a, self.n = np.empty(1 << 16, dtype), 0

    def extend(self, values) -> None:
        values = np.asarray(values)
        need = self.n + len(values)
        if need > len(self.a):
            self.reserve(max(need, len(self.a) + len(self.a) // 2))
        self.a[self.n: need] = values
        self.n = need

    def reserve(self, size: int) -> None:
        """np.empty, not np.full: rows past n are always written by extend() first, and an
        untouched page costs nothing. Filling 300 MB for 10 M rows held the GIL (and the
        index lock) for most of a second: the UI froze on a key pressed just then."""
        if size > len(self.a):
            bigger = np.empty(size, self.a.dtype)
            bigger[: self.n] = self.a[: self.n]
            self.a = bigger

    def view(self) -> np.ndarray:
        return self.a[: self.n]


class RowRange:
    """Rows first..stop-1 without an array of them (10 M rows would be 80 MB per listing)."""

    def __init__(self, first: int, stop: int):
        self.first, self.stop = first, max(stop, first)

    def __len__(self) -> int:
        return self.stop - self.first

    def __getitem__(self, k):
        if isinstance(k, slice):
            start, stop, _ = k.indices(len(self))
            return np.arange(self.first + start, self.first + stop, dtype=np.int64)
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        return self.first + (k % len(self))

    def position(self, row: int) -> int:
        """Where `row` is, or would be (np.searchsorted's answer)."""
        return int(min(max(row - self.first, 0), len(self)))


def position(rows, row: int) -> int:
    """np.searchsorted over listed rows (an array, sorted, or a RowRange)."""
    return rows.position(row) if isinstance(rows, RowRange) else int(np.searchsorted(rows, row))


class PacketIndex:
    """Frame number - 1 (a global row) -> its bytes and decoded columns, on demand."""

    def __init__(self, ports: np.ndarray | None = None):
        self.ports = ports                 # decode.port_table(): set by the loader before any row
        self.files: list[str] = []
        self._maps: dict[int, np.ndarray] = {}
        self.file, self.linktype = _Grow(np.uint16), _Grow(np.uint16)
        self.off, self.ts = _Grow(np.int64), _Grow(np.int64)
        self.digits = _Grow(np.uint8)      # each row's time decimals: its file's precision
        self.cap, self.wire = _Grow(np.uint32), _Grow(np.uint32)
        self.flow = _Grow(np.int32)        # -1 until the analysis names the row's flow
        self.flag = _Grow(FLAG_DTYPE)
        # rows with a tag value (packet_flags.FlagSink), in row order: PSNs missing, related
        # frame (0: none), RTT (-1: none)
        self.xrow, self.xmiss = _Grow(np.int64), _Grow(np.int32)
        self.xrel, self.xrtt = _Grow(np.int64), _Grow(np.int64)
        self.ring: list[tuple[int, RecordChunk | None, Batch]] = []   # (first row, chunk, batch)
        self.ring_rows = 0
        self.rows = 0                      # every row seen, kept or not
        self.flagged = 0                   # rows 0..flagged-1 have their analysis columns
        self.lock = threading.Lock()

    # ---- filled by the loader thread ----------------------------------------------------
    def add_mapped(self, file_no: int, chunk: RecordChunk) -> None:
        """A chunk read through a memory map: chunk.off are offsets in the file."""
        self.add_places({"file": np.full(chunk.n, file_no, np.uint16), "off": chunk.off, "cap": chunk.cap,
                         "wire": chunk.wire, "ts": chunk.ts, "linktype": chunk.linktype, "digits": chunk.digits})

    def add_places(self, places: dict) -> None:
        """Rows of mapped files in frame order, each with its own file (files merged in time)."""
        n = len(places["off"])
        with self.lock:
            for name in ("file", "off", "cap", "wire", "ts", "linktype"):
                getattr(self, name).extend(places[name])
            digits = places.get("digits")
            self.digits.extend(np.full(n, DEFAULT_DIGITS, np.uint8) if digits is None else digits)
            self.flow.extend(np.full(n, -1, np.int32))
            self.flag.extend(np.zeros(n, FLAG_DTYPE))
            self.rows += n

    def add_stream(self, batch: Batch, chunk: RecordChunk | None = None) -> None:
        """A chunk that cannot be read again: kept in the ring, the oldest dropped."""
        with self.lock:
            self.ring.append((self.rows, chunk, batch))
            self.ring_rows += batch.n
            self.rows += batch.n
            while len(self.ring) > 1 and self.ring_rows - self.ring[0][2].n >= RING_PACKETS:
                self.ring_rows -= self.ring.pop(0)[2].n

    def set_flows(self, idx0: int, rows: np.ndarray | None, fids: np.ndarray) -> None:
        """Flow ids of analyzed rows (Analyzer.last_rows), for a QP's packets and its ladder."""
        if self.flow.n == 0:
            return
        at = idx0 + (np.arange(len(fids)) if rows is None else rows)
        keep = at < self.flow.n
        self.flow.a[at[keep]] = fids[keep]

    def set_flags(self, first: int, analyzed: Batch) -> None:
        """The analysis columns (packet_flags.ANALYSIS_COLUMNS) of rows first.. (a batch of
        Analyzer.take_analyzed): into the flag store for files, onto the ring's batches for a
        stream (the batch analyzed is the ring's own unless the Analyzer held several back)."""
        if self.ring:
            with self.lock:
                _onto_ring(self.ring, first, analyzed)
                self.flagged = first + analyzed.n
            return
        with self.lock:
            n = max(0, min(analyzed.n, self.flag.n - first))
            flags = analyzed.cols["flags"][:n]
            self.flag.a[first: first + n] = flags
            rel, rtt = analyzed.cols["rel_frame"][:n], analyzed.cols["rtt_ns"][:n]
            has = np.flatnonzero((flags & GAP != 0) | analyzed.valid["rel_frame"][:n] | (rtt >= 0))
            if len(has):
                self.xrow.extend(has + first)
                self.xmiss.extend(analyzed.cols["missing_psns"][has])
                self.xrel.extend(np.where(analyzed.valid["rel_frame"][has], rel[has], 0))
                self.xrtt.extend(rtt[has])
            self.flagged = first + analyzed.n

    # ---- read by the UI -----------------------------------------------------------------
    def visible_rows(self) -> RowRange:
        """Every row that can be shown: all of a file, the ring of a stream."""
        with self.lock:
            return RowRange(self.ring[0][0], self.rows) if self.ring else RowRange(0, self.off.n)

    def reserve(self, rows: int) -> None:
        """Room for about this many rows at once (from the file size): no doubling copies, no
        doubled peak memory, while the UI thread waits on the lock."""
        with self.lock:
            for col in (self.file, self.linktype, self.off, self.ts, self.digits, self.cap, self.wire, self.flow,
                        self.flag):
                col.reserve(rows)

    def flow_rows(self, fids) -> np.ndarray:
        """Rows of these flows (files only: a stream's ring is matched by its decoded rows)."""
        with self.lock:
            return np.flatnonzero(np.isin(self.flow.view(), np.asarray(fids, np.int32)))

    def first_row_at(self, ts_ns: int) -> int:
        """The first row at or after a time (files; rows in capture order)."""
        with self.lock:
            ts = self.ts.view()
            hit = np.flatnonzero(ts >= ts_ns)
            return int(hit[0]) if len(hit) else max(len(ts) - 1, 0)

    def ts_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(capture time, known) of these rows: a stream's row the ring has let go is unknown."""
        rows = np.asarray(rows, np.int64)
        ts, known = np.zeros(len(rows), np.int64), np.zeros(len(rows), bool)
        with self.lock:
            if not self.ring:
                known[:] = (rows >= 0) & (rows < self.ts.n)
                ts[known] = self.ts.a[rows[known]]
                return ts, known
            for first, _, batch in self.ring:
                mine = (rows >= first) & (rows < first + batch.n)
                ts[mine], known[mine] = batch.cols["ts_ns"][rows[mine] - first], True
        return ts, known

    def decode(self, rows: np.ndarray) -> Batch:
        """Every column of these rows (in this order), `frame` = row + 1."""
        rows = np.asarray(rows, np.int64)
        if self.ring:
            return self._decode_ring(rows)
        parts = self._decode_mapped(rows)
        batch = Batch.concat([p for p in parts if p.n]) if parts else Batch(0)
        self._add_flags(batch)
        return batch

    def _add_flags(self, batch: Batch) -> None:
        """The analysis columns of decoded rows of files, as packet_flags.FlagSink.attach writes them."""
        rows = batch.cols["frame"] - 1 if batch.n else np.zeros(0, np.int64)
        with self.lock:
            flags = self.flag.a[rows].astype(np.uint32)
            xrow = self.xrow.view()
            at = np.minimum(np.searchsorted(xrow, rows), max(len(xrow) - 1, 0))
            hit = np.flatnonzero(xrow[at] == rows) if len(xrow) else np.zeros(0, np.int64)
            got = {name: col.a[at[hit]] for name, col in (("m", self.xmiss), ("r", self.xrel), ("t", self.xrtt))}
        missing, rel, rtt = np.zeros(batch.n, np.int64), np.zeros(batch.n, np.int64), np.full(batch.n, -1, np.int64)
        missing[hit], rel[hit], rtt[hit] = got["m"], got["r"], got["t"]
        _put(batch, flags, missing, rel, rtt)

    def frame_bytes(self, row: int) -> tuple[bytes, int] | None:
        """(the frame's bytes, its link type), or None when they were not kept."""
        if self.ring:
            for first, chunk, batch in self.ring:
                if first <= row < first + batch.n and chunk is not None:
                    i = row - first
                    return chunk.frame(i), int(chunk.linktype[i])
            return None
        if not 0 <= row < self.off.n:
            return None
        buf = self._map(int(self.file.a[row]))
        off, cap = int(self.off.a[row]), int(self.cap.a[row])
        return buf[off: off + cap].tobytes(), int(self.linktype.a[row])

    def chunk_of(self, rows: np.ndarray) -> RecordChunk | None:
        """A RecordChunk over these rows of one file (for the layer offsets of the tree)."""
        if self.ring or not len(rows):
            return None
        rows = np.asarray(rows, np.int64)
        buf = self._map(int(self.file.a[rows[0]]))
        return RecordChunk(buf, self.off.a[rows], self.cap.a[rows], self.wire.a[rows], self.ts.a[rows],
                           np.zeros(len(rows), np.uint16), self.linktype.a[rows], self.digits.a[rows])

    def _decode_mapped(self, rows: np.ndarray) -> list[Batch]:
        from roceview.packets.decode import decode_chunk

        rows = rows[(rows >= 0) & (rows < self.off.n)]
        files = self.file.a[rows]
        parts = []
        for f in np.unique(files).tolist():       # rows of one file decode together
            mine = rows[files == f]
            batch = decode_chunk(self.chunk_of(mine), self.ports, 1)
            batch.cols["frame"] = mine + 1
            parts.append(batch)
        if len(parts) > 1:                         # back in the order asked for
            both = Batch.concat(parts)
            frames = both.cols["frame"]
            order = np.argsort(frames, kind="stable")
            return [both.select(order[np.searchsorted(frames[order], rows + 1)])]
        return parts

    def _decode_ring(self, rows: np.ndarray) -> Batch:
        """Kept rows: decoded again from their record chunk when there is one (the batch may
        hold only the analysis' columns), else the batch's own rows."""
        from roceview.packets.decode import decode_chunk

        parts = []
        for first, chunk, batch in list(self.ring):
            mine = rows[(rows >= first) & (rows < first + batch.n)]
            if not len(mine):
                continue
            at = mine - first
            if chunk is not None:
                digits = None if chunk.digits is None else chunk.digits[at]
                part = decode_chunk(RecordChunk(chunk.buf, chunk.off[at], chunk.cap[at], chunk.wire[at],
                                                chunk.ts[at], chunk.iface[at], chunk.linktype[at], digits), self.ports, 1)
            else:   # the loader thread may add columns to the kept batch meanwhile (_onto_ring):
                # select from copies of its dicts (a dict copy is atomic), not the dicts it grows
                part = Batch(batch.n, dict(batch.cols), dict(batch.valid)).select(at)
            part.cols["frame"] = mine + 1
            # each column read once: the loader thread may be writing them (FlagSink.attach)
            got = [batch.cols.get(c) for c in ("flags", "missing_psns", "rel_frame", "rtt_ns")]
            if all(col is not None for col in got):
                _put(part, *(col[at] for col in got))
            else:                              # not analyzed yet (held back, or being analyzed)
                _put_unflagged(part, len(at))
            parts.append(part)
        return Batch.concat(parts)

    def _map(self, file_no: int) -> np.ndarray:
        buf = self._maps.get(file_no)
        if buf is None:
            with open(self.files[file_no], "rb") as fh:
                buf = np.frombuffer(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
            self._maps[file_no] = buf
        return buf


def _put(batch: Batch, flags, missing, rel, rtt) -> None:
    """The analysis columns onto a batch, valid where packet_flags.FlagSink.attach has them."""
    flags = np.asarray(flags, np.uint32)
    batch.cols.update(flags=flags, missing_psns=missing, rel_frame=rel, rtt_ns=rtt)
    batch.valid.update(missing_psns=flags & GAP != 0, rel_frame=rel > 0, rtt_ns=rtt >= 0)


def _put_unflagged(batch: Batch, n: int) -> None:
    """No flag, no tag value on n rows (not analyzed yet)."""
    _put(batch, np.zeros(n, np.uint32), np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64))


def _onto_ring(ring: list, first: int, analyzed: Batch) -> None:
    """The analyzed rows' columns onto the kept batches they belong to (dropped ones are gone)."""
    for start, _, kept in ring:
        lo, hi = max(first, start), min(first + analyzed.n, start + kept.n)
        if lo >= hi or kept is analyzed:
            continue
        if "flags" not in kept.cols:
            _put_unflagged(kept, kept.n)
        src, dst = slice(lo - first, hi - first), slice(lo - start, hi - start)
        for name in ("flags", "missing_psns", "rel_frame", "rtt_ns"):
            kept.cols[name][dst] = analyzed.cols[name][src]
            if name != "flags":
                kept.valid[name][dst] = analyzed.valid[name][src]
