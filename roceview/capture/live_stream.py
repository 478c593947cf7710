"""Live capture input: a pcap/pcapng byte stream that is still being written (a tcpdump pipe or
stdin) read as RecordChunks while it arrives, optionally saved as it is read (`-w`: whatever
`save` is; roceview.live.save keeps whole records only).

The file readers fill an 8 MB buffer before walking it (readers._Buffer); a live stream may
bring a few packets a second, so here a refill hands over whatever has arrived (after waiting
for the first bytes) and the walk runs on that. The same pcap/pcapng walkers do the rest.
A stop request (Ctrl-C, --duration, --count) ends the stream at the next read: every whole
record already read is still walked, and the saved file is cut after the last one. A stream
that ends (or is stopped) inside its file header says so, as a cut file does.
"""
from __future__ import annotations

import os
import select
import threading
from typing import Iterator

import numpy as np

from roceview.capture.readers import _Buffer, _pcap, capture_kind
from roceview.capture.pcapng import SHB_MIN_BYTES, _pcapng
from roceview.capture.source import PCAP_MAGICS, PCAPNG_MAGIC, _widen_pipe
from roceview.errors import BadInput

WAIT_S = 0.2                 # a blocked read looks at the stop flag this often
MIN_RECORD_HEAD = 16         # a pcap record header (a pcapng block header is 12 bytes)


class LiveStream:
    """Reads a pipe's file descriptor: readinto returns what has arrived, 0 when nothing more
    has arrived right now (after the first read of a refill, which waits) or at the end.
    Every byte read is appended to `save` (the -w file) first."""

    def __init__(self, fd: int, save=None):
        self.fd, self.save = fd, save
        self.stop = threading.Event()
        self.ended = False           # the writer closed the pipe, or a stop was asked for
        self.waiting = True          # the next read waits for data
        self.bytes_read = 0

    def readinto(self, view) -> int:
        if self.ended:
            return 0
        while True:
            ready, _, _ = select.select([self.fd], [], [], WAIT_S if self.waiting else 0)
            if self.stop.is_set():
                self.ended = True
                return 0
            if ready:
                break
            if not self.waiting:
                return 0
        try:
            got = os.readv(self.fd, [view])
        except OSError as exc:         # EIO from a terminal gone, a descriptor that is no stream
            raise BadInput(f"cannot read the capture stream ({exc.strerror or exc})") from None
        if not got:
            self.ended = True
            return 0
        if self.save is not None:
            self.save.write(view[:got])
        self.bytes_read += got
        self.waiting = False
        return got


class _LiveBuffer(_Buffer):
    """readers._Buffer over a LiveStream: a refill takes what has arrived (at least one record
    header, unless the stream ended) instead of filling the whole buffer; `base` is the stream
    offset of store[0], so `consumed` is where the last whole record walked ends."""

    def __init__(self, stream: LiveStream, name: str):
        super().__init__(stream, name)
        self.base = 0
        self._at_refill = -1                       # `consumed` at the last refill

    def refill(self) -> None:
        # wait for the writer only when nothing was walked since the last refill: a burst
        # read at once (a 1 MB pipe) is walked first, not left until the writer's next bytes
        wait = self.consumed == self._at_refill
        while True:
            self.base += self.pos                  # the unread tail moves to store[0]
            self.stream.waiting = wait
            super().refill()
            self.eof = self.stream.ended
            if self.eof or self.filled - self.pos >= MIN_RECORD_HEAD:
                break
            wait = True
        self._at_refill = self.consumed

    def take(self, count: int) -> bytes:
        """At most `count` bytes, fewer at the end of the stream (never the buffer's stale bytes
        past `filled`: a pcapng block cut short read as zeros, silently)."""
        while self.filled - self.pos < count and not self.eof:
            self.refill()
        return super().take(min(count, self.filled - self.pos))

    @property
    def consumed(self) -> int:
        return self.base + self.pos


class LiveRecords:
    """Iterating yields (RecordChunk, stream offset of the chunk's buffer start) as records
    arrive; `consumed` is then the stream offset just past the last whole record walked."""

    def __init__(self, stream: LiveStream, name: str, chunk_packets: int, warn):
        self.buf = _LiveBuffer(stream, name)
        self.name, self.chunk_packets, self.warn = name, chunk_packets, warn
        self.kind = None

    def __iter__(self) -> Iterator[tuple]:
        buf = self.buf
        if not self._header():
            return
        walker = _pcap if self.kind == "pcap" else _pcapng
        for chunk in walker(buf, self.chunk_packets, self.warn, 0):
            yield chunk, buf.base

    def _header(self) -> bool:
        """Wait for the whole file header (pcapng: the section header's fixed part). Cut short:
        BadInput at the stream's end, a warning and no packets after a stop (Ctrl-C)."""
        buf = self.buf
        while buf.filled < 4 and not buf.eof:
            buf.refill()
        head = bytes(buf.store[:min(buf.filled, 4)])
        if 0 < len(head) < 4 and any(m.startswith(head) for m in (*PCAP_MAGICS, PCAPNG_MAGIC)):
            return self._cut_header(f"file header ({len(head)} of at least 24 bytes)")
        self.kind = capture_kind(head, self.name)
        need = 24 if self.kind == "pcap" else SHB_MIN_BYTES
        while buf.filled < need and not buf.eof:
            buf.refill()
        if buf.filled < need:
            return self._cut_header(f"{self.kind} file header ({buf.filled} of {need} bytes)")
        return True

    def _cut_header(self, what: str) -> bool:
        if self.buf.stream.stop.is_set():
            self.warn(f"{self.name}: stopped inside the stream's {what}: no packets")
            return False
        raise BadInput(f"{self.name}: the stream ended inside its {what}")

    @property
    def consumed(self) -> int:
        return self.buf.consumed

    def record_ends(self, chunk, base: int) -> np.ndarray:
        """Stream offset just past each record of `chunk` (for -w with --count): a pcapng
        enhanced packet block (its data 28 bytes after the block start) ends after its block
        total length, which counts options and padding; a pcap record after its captured bytes.
        Another pcapng packet block kind: the end of the chunk."""
        off = chunk.off
        if self.kind != "pcapng":
            return base + off + chunk.cap.astype(np.int64)
        start = np.maximum(off - 28, 0)
        btype, blen = (chunk.buf[(start + at)[:, None] + np.arange(4)].copy().view("<u4").ravel() for at in (0, 4))
        little, big = btype == 6, btype.byteswap() == 6
        length = np.where(little, blen, blen.byteswap()).astype(np.int64)
        return np.where(little | big, base + start + length, self.consumed)


def stdin_stream(save=None) -> LiveStream:
    """Standard input as a LiveStream (nothing may have read from sys.stdin before)."""
    try:
        fd = os.dup(0)
        os.fstat(fd)
    except OSError:
        raise BadInput("-r -: standard input is closed") from None
    if os.isatty(fd):
        os.close(fd)
        raise BadInput("-r -: standard input is a terminal; pipe a capture in (tcpdump -w - ... | roceview live -r -)")
    _widen_pipe(_Fd(fd))
    return LiveStream(fd, save)


class _Fd:
    def __init__(self, fd: int):
        self._fd = fd

    def fileno(self) -> int:
        return self._fd
