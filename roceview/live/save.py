"""`live -w FILE`: what was captured, saved as it is read, and only ever whole records.

A stop can come at any byte: Ctrl-C (once, or twice as `timeout -s INT` delivers it), SIGTERM,
SIGHUP, q in the TUI, the stream's end in the middle of a record, a stall inside the file
header. The file must then end at the last whole record, as tshark and tcpdump read it ("cut
short in the middle of a packet" otherwise), so bytes reach the file only once the record
they belong to is complete (WholeRecords); a file header never completed leaves no file.
"""
from __future__ import annotations

import os
import struct
import threading

import numpy as np

from roceview import interrupt
from roceview.capture.records import Outputs
from roceview.capture.source import PCAP_MAGICS, PCAPNG_MAGIC
from roceview.capture.writer import OutputFile
from roceview.errors import WriteError
from roceview.kernels import backend as kernels
from roceview.kernels import consts
from roceview.live.pcapng_out import PcapngOut

WALK_RECORDS = 1 << 14       # records walked per kernel call
SHB, IDB = 0x0A0D0D0A, 1
MAX_HEADER_BLOCK = 1 << 24   # a pcapng SHB/IDB longer than this is damage (as the pcapng reader says)
LOCK_WAIT_S = 5.0            # a write in progress on the reader thread finishes first (a stuck one does not stall a stop)


class WholeRecords:
    """Cuts a pcap/pcapng byte stream at record boundaries: feed() takes what was read and returns
    the bytes ending at the last whole record (the pcap file header and each record; each pcapng
    block), keeping the rest until it is complete. It stops for good (`done`) where the readers
    stop: a stream that is no capture (nothing is saved), a record or block with an impossible
    length, and with `limit` after that many packets (--count: a FIFO or stdout cannot be cut
    afterwards). Lengths are read by the readers' compiled walks: no per-record Python."""

    def __init__(self, limit: int | None = None):
        self.pending = bytearray()
        self.kind: str | None = None
        self.big = False
        self.header = 0              # pcap: the file header still to pass
        self.left = limit            # packets still to save; None: no limit
        self.done = False
        self.out = Outputs(WALK_RECORDS)

    def feed(self, data) -> bytes:
        if self.done:
            return b""
        self.pending += data
        end = self._whole()
        whole = bytes(self.pending[:end])
        if self.done:
            self.pending = bytearray()
        else:
            del self.pending[:end]
        return whole

    def _whole(self) -> int:
        """Offset in `pending` just past its last whole record."""
        if self.kind is None and not self._start():
            return 0
        arr = np.frombuffer(self.pending, np.uint8)     # released before `pending` is resized
        try:
            return self._pcap(arr) if self.kind == "pcap" else self._pcapng(arr)
        finally:
            del arr

    def _start(self) -> bool:
        head = bytes(self.pending[:4])
        if len(head) < 4:
            return False
        if head in PCAP_MAGICS:
            self.kind, self.big, self.header = "pcap", PCAP_MAGICS[head][1], 24
        elif head == PCAPNG_MAGIC:
            self.kind = "pcapng"
        else:
            self.done = True         # not a capture: the reader says so, and nothing is saved
        return not self.done

    def _size(self) -> int:
        return WALK_RECORDS if self.left is None else min(WALK_RECORDS, self.left)

    def _count(self, n: int) -> None:
        if self.left is not None:
            self.left -= n
            self.done = self.left <= 0

    def _pcap(self, arr: np.ndarray) -> int:
        pos = 0
        if self.header:
            if len(arr) < self.header:
                return 0
            pos, self.header = self.header, 0
        o = self.out
        while not self.done:
            k = self._size()                 # a walk of at most `left` records ends right after the last
            n, pos, status = kernels.walk_pcap(arr, pos, len(arr), self.big, 1, o.off[:k], o.cap[:k], o.wire[:k], o.ts[:k])
            self._count(n)
            if status == consts.ABSURD:
                self.done = True
            if status != consts.FULL:
                break
        return pos

    def _pcapng(self, arr: np.ndarray) -> int:
        pos, end, o = 0, len(arr), self.out
        while not self.done and end - pos >= 12:
            if arr[pos:pos + 4].tobytes() == PCAPNG_MAGIC:     # a section header: its own byte order
                self.big = arr[pos + 8:pos + 12].tobytes() != b"\x4d\x3c\x2b\x1a"
            btype, blen = struct.unpack((">" if self.big else "<") + "II", arr[pos:pos + 8].tobytes())
            if btype in (SHB, IDB):
                if not 12 <= blen <= MAX_HEADER_BLOCK:
                    self.done = True
                elif pos + blen <= end:
                    pos += blen
                    continue
                break
            k = self._size()
            n, pos, status = kernels.walk_pcapng(arr, pos, end, self.big, o.off[:k], o.cap[:k], o.wire[:k],
                                                 o.ts[:k], o.iface[:k])
            self._count(n)
            if status == consts.BAD_BLOCK:
                self.done = True
            if status == consts.NEED_MORE:
                break
        return pos


class SaveFile:
    """-w: written like every output (capture.writer.OutputFile: a regular file is replaced
    only once the capture ends, a FIFO or device written directly; '-' is standard output).
    Whole records only reach it, each write flushed, so at any instant it ends at a record.
    A capture that fails leaves an existing file as it was; one that saved no whole file
    header leaves no file. A signal that ends roceview at once (a second Ctrl-C, SIGTERM,
    SIGHUP) renames what was saved into place (roceview.interrupt's hook)."""

    def __init__(self, path: str, limit: int | None = None):
        self.name = "standard output" if path == "-" else path
        self.out = OutputFile("/dev/stdout" if path == "-" else path)
        self.records = WholeRecords(limit)
        # `-w x.pcapng` holds pcapng, as generate writes by the name: a pcap stream is rewritten
        self.pcapng = PcapngOut() if path.lower().endswith(".pcapng") else None
        self.saved = 0
        self.closed = False
        self.lock = threading.Lock()          # a write (reader thread) against the exit hook (main thread)
        with interrupt.deferred():            # a Ctrl-C between forget and the hook left the file
            self.fh = self.out.open("wb")
            if self.out.tmp is not None:      # the hook decides: keep or remove
                interrupt.forget(self.out.tmp)
                interrupt.on_interrupt(self._on_interrupt)

    def write(self, data) -> None:
        """Save what was read: the whole records in it now, the rest once complete."""
        whole = self.records.feed(data)
        if not whole:
            return
        if self.pcapng is not None and self.records.kind == "pcap":
            whole = self.pcapng.convert(whole)
        with self.lock:
            if self.closed:
                return
            try:
                self.fh.write(whole)
                self.fh.flush()
            except BrokenPipeError:           # `-w - | head`: ends quietly, as stdout does
                raise
            except OSError as exc:
                raise WriteError(f"cannot write {self.name}: {exc.strerror or exc}") from None
            self.saved += len(whole)

    def _on_interrupt(self) -> None:
        """From the exiting signal handler (main thread) while the reader thread may be writing:
        wait for that write, then put the whole records saved in place."""
        locked = self.lock.acquire(timeout=LOCK_WAIT_S)
        self.closed = True
        try:
            if self.saved and self.out.tmp is not None:
                if not locked:                 # a write still running: keep only what had finished
                    os.truncate(self.out.tmp, self.saved)
                self.out.commit()
        except Exception:            # noqa: BLE001 - leaving now; abort() removes what cannot be kept
            pass
        finally:
            self.out.abort()

    def close(self, cut_at: int | None, keep: bool) -> None:
        """Put the file in place (keep) or remove it; cut after byte `cut_at` (the last record
        analyzed, for --count on a regular file). Nothing saved: no file."""
        try:
            with interrupt.deferred():        # a signal now waits: the hook goes before it could run
                locked = self.lock.acquire(timeout=LOCK_WAIT_S)
                try:
                    self.closed = True
                    self._finish(cut_at, keep)
                finally:
                    interrupt.drop_hook(self._on_interrupt)
                    if locked:
                        self.lock.release()
        except OSError as exc:
            self.out.abort()
            raise WriteError(f"cannot write {self.name}: {exc.strerror or exc}") from None

    def _finish(self, cut_at: int | None, keep: bool) -> None:
        try:
            self.fh.close()                   # nothing is buffered: each write was flushed
        except OSError:
            if keep:
                raise
        if not keep or (self.saved == 0 and self.out.tmp is not None):
            self.out.abort()
            return
        converted = self.pcapng is not None and self.records.kind == "pcap"   # cut_at counts the stream's bytes
        if self.out.tmp is not None and cut_at is not None and cut_at < self.saved and not converted:
            os.truncate(self.out.tmp, cut_at)
            self.saved = cut_at
        self.out.commit()


def open_save(path: str, limit: int | None = None) -> SaveFile:
    """The -w file, opened before capture starts (a bad path fails at once, not at the end)."""
    return SaveFile(path, limit)


def close_save(save: SaveFile | None, cut_at: int | None, keep: bool | None = None) -> None:
    """Put the -w file in place, cut after the last whole record analyzed (--count inside a
    chunk). `keep` defaults to: no exception is being handled, or it is a KeyboardInterrupt (a
    second Ctrl-C keeps what was captured); after an error (the source did not open, the stream
    is not a capture, a write failed) an existing file is left as it was."""
    if save is None:
        return
    if keep is None:
        import sys

        raised = sys.exc_info()[0]
        keep = raised is None or issubclass(raised, KeyboardInterrupt)
    save.close(cut_at, keep)
