"""Chunked capture readers: pcap and pcapng into numpy record arrays.

A reader memory-maps a plain file, or fills byte buffers with `readinto` (stdin, gzip), lets
a compiled walk find the records, and yields `RecordChunk`s that point into the map or the
buffer. A chunk's bytes stay valid after the next chunk is read (a refill takes a fresh
buffer; the map is released only well behind the walk), so the walk can run ahead of the
decode; memory stays bounded whatever the file size.
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import Iterator

import numpy as np

from roceview.kernels import consts
from roceview.kernels import backend as kernels
from roceview.capture.pcapng import _pcapng
from roceview.capture.records import Outputs, RecordChunk, Warn, chunk_of, linktype_checked  # noqa: F401  (RecordChunk: what read_records yields)
from roceview.capture.source import PCAP_MAGICS, CorruptStream, _GzipStream, capture_kind, open_capture
from roceview.errors import BadInput

BUFFER_BYTES = 8 << 20
# A memory map is walked in bigger windows: a window is one chunk at most, and with full 1 KB
# frames 8 MB windows made 100 chunks of 10 k packets per 1 M, whose fixed per-chunk costs
# doubled the analysis time (docs/performance.md). Mapped pages are released RELEASE_LAG behind
# the walk (which may run a few chunks ahead of the decode, packets.read._walk_ahead), so RSS
# grows by at most a few windows.
MAP_WINDOW = 32 << 20
RELEASE_LAG = 4 * MAP_WINDOW
PAD = 1024                     # room for fixed-width gathers past the last record




class _Buffer:
    """A read buffer that keeps the unconsumed tail across refills. Each refill reads into a
    fresh store (the tail copied over), so chunks handed out earlier keep theirs: the walk can
    run ahead on another thread while they are decoded (packets.read._walk_ahead), and a stdin or
    gzip stream is read (and inflated) while the previous chunk is decoded."""

    def __init__(self, stream, name: str):
        self.stream, self.name = stream, name
        self.store = self.arr = np.zeros(BUFFER_BYTES + PAD, np.uint8)
        self.pos = self.filled = 0
        self.eof = False
        self.error: CorruptStream | None = None   # set when a gzip stream breaks mid-file

    def refill(self) -> None:
        tail = self.filled - self.pos
        old, self.store = self.store, np.empty(BUFFER_BYTES + PAD, np.uint8)
        self.store[:tail] = old[self.pos:self.filled]
        self.store[BUFFER_BYTES:] = 0
        self.arr = self.store
        self.pos, self.filled = 0, tail
        view = memoryview(self.store)
        while self.filled < BUFFER_BYTES and not self.eof:
            try:
                got = self.stream.readinto(view[self.filled:BUFFER_BYTES])
            except CorruptStream as exc:       # keep what was read before the damage
                self.error, got = exc, 0
            if not got:
                self.eof = True
            self.filled += got or 0

    def limit(self) -> int:
        return self.filled

    def release(self) -> None:
        pass

    def take(self, count: int) -> bytes:
        if self.filled - self.pos < count and not self.eof:
            self.refill()
        # never past what was read: the store's tail holds stale bytes (a stream cut inside a
        # pcapng block would read them as zeros instead of warning that the file ends there)
        data = bytes(self.store[self.pos:self.pos + min(count, self.filled - self.pos)])
        self.pos += len(data)
        return data


class _Mapped:
    """The same interface over a memory map of a plain file: no copy into a buffer (the copy
    was a quarter of the decode time on full frames), walked in windows of MAP_WINDOW, and
    the pages already decoded are dropped from the process (MADV_DONTNEED) so RSS stays flat."""

    def __init__(self, fh, name: str, lag: int | None = None):
        self.name = name
        self.lag = RELEASE_LAG if lag is None else lag      # read at call time (tests change it)
        self.mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.store = self.mm
        self.arr = np.frombuffer(self.mm, dtype=np.uint8)
        self.pos, self.filled, self.eof = 0, len(self.mm), True
        self.error = None
        self._released = 0

    def refill(self) -> None:
        pass

    def limit(self) -> int:
        return min(self.filled, self.pos + MAP_WINDOW)

    def release(self) -> None:
        # Lag a few windows behind the walk: chunks read ahead may still be decoding there.
        done = (max(self.pos - self.lag, 0) // mmap.PAGESIZE) * mmap.PAGESIZE
        if done - self._released >= BUFFER_BYTES and hasattr(mmap, "MADV_DONTNEED"):
            self.mm.madvise(mmap.MADV_DONTNEED, self._released, done - self._released)
            self._released = done

    def take(self, count: int) -> bytes:
        data = self.mm[self.pos:self.pos + count]
        self.pos += len(data)
        return data

    def close(self) -> None:
        self.arr = self.store = None
        try:
            self.mm.close()
        except BufferError:          # a caller still holds a view of a chunk; unmapped at exit
            pass


def _open_buffer(stream, path: str, name: str, release_lag: int | None = None):
    """A memory map for a plain regular file; a read buffer for stdin, gzip and the rest."""
    if path != "-" and os.path.isfile(path) and os.path.getsize(path) > 0 and hasattr(stream, "fileno") \
            and not isinstance(getattr(stream, "raw", stream), _GzipStream) and not isinstance(stream, _GzipStream):
        try:
            return _Mapped(stream, name, release_lag)
        except (OSError, ValueError):
            pass
    return _Buffer(stream, name)


def read_records(path: str, chunk_packets: int, warn: Warn, iface_base: int = 0,
                 release_lag: int | None = None) -> Iterator[RecordChunk]:
    """release_lag: how far behind the walk a memory map's pages are dropped (default
    RELEASE_LAG, room for chunks walked ahead; 0 when every chunk is decoded before the next)."""
    stream, name, head = open_capture(path)
    buf = None
    try:
        kind = capture_kind(head, name)
        buf = _open_buffer(stream, path, name, release_lag)
        reader = _pcap if kind == "pcap" else _pcapng
        yielded = False
        damaged = []
        try:
            for chunk in reader(buf, chunk_packets, lambda m: damaged.append(m), iface_base):
                yielded = True
                yield chunk
        except CorruptStream as exc:
            buf.error = exc
        if buf.error is not None:
            if not yielded:
                raise BadInput(str(buf.error)) from None
            warn(f"{buf.error}; stopped reading there")
        else:
            for message in damaged:
                warn(message)
    finally:
        if isinstance(buf, _Mapped):
            buf.close()
        if path != "-":
            stream.close()


def _erf_times(arr: np.ndarray, off: np.ndarray, cap: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """An ERF record's own timestamp (its first 8 bytes, little-endian 32.32 fixed point seconds)
    in ns, rounded as Wireshark rounds it: the time tshark shows, finer than the pcap header's
    microseconds. A record too short for it keeps the header's time."""
    whole = cap >= 8
    raw = np.zeros(len(off), np.uint64)
    for k in range(8):
        raw |= arr[np.where(whole, off + k, 0)].astype(np.uint64) << np.uint64(8 * k)
    secs = (raw >> np.uint64(32)).astype(np.int64)
    frac = (raw & np.uint64(0xFFFFFFFF)) * np.uint64(1_000_000_000)
    frac += (frac & np.uint64(0x80000000)) << np.uint64(1)
    ns = secs * 1_000_000_000 + (frac >> np.uint64(32)).astype(np.int64)
    return np.where(whole, ns, ts)


def _pcap(buf: _Buffer, chunk_packets: int, warn: Warn, iface_base: int) -> Iterator[RecordChunk]:
    header = buf.take(24)
    if len(header) < 24:
        raise BadInput(f"{buf.name}: pcap file header is cut short")
    _, big, frac_ns = PCAP_MAGICS[header[:4]]
    linktype = linktype_checked(struct.unpack((">" if big else "<") + "I", header[20:24])[0] & 0xFFFF, buf.name)
    out = Outputs(chunk_packets)
    while True:
        if not buf.eof:
            buf.refill()
        end = buf.limit()
        n, pos, status = kernels.walk_pcap(buf.arr, buf.pos, end, big, frac_ns,
                                        out.off, out.cap, out.wire, out.ts)
        buf.pos = pos
        if n:
            ts, digits = out.ts[:n], np.full(n, 9 if frac_ns == 1 else 6, np.uint8)   # the magic's precision
            if linktype == consts.LINKTYPE_ERF:
                ts, digits = _erf_times(buf.arr, out.off[:n], out.cap[:n], ts), np.full(n, 9, np.uint8)
            yield chunk_of(buf, out, n, linktype_of=np.full(n, linktype, np.uint16), iface_base=iface_base,
                           ts=ts, digits=digits)
            buf.release()
        if status == consts.ABSURD:
            cap = struct.unpack((">" if big else "<") + "I", bytes(buf.store[pos + 8:pos + 12]))[0]
            warn(f"{buf.name}: a record claims {cap} captured bytes (more than 256 KiB): "
                 "file damaged, stopped reading there")
            return
        if status == consts.NEED_MORE and end == buf.filled and buf.eof:
            if buf.filled > buf.pos:
                warn(f"{buf.name}: file ends in the middle of a record "
                     f"({buf.filled - buf.pos} bytes left over); stopped reading there")
            return
