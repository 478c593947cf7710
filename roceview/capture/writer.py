"""Write pcap / pcapng files from already-built frames, atomically.

Used by `roceview generate`, the benchmarks and the tests. Frames are given as one
contiguous byte buffer plus per-frame lengths so that millions of frames can be
written without per-packet Python objects.
"""
from __future__ import annotations

import os
import stat
import struct
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from roceview import interrupt
from roceview.errors import WriteError

LINKTYPE_ETHERNET = 1
_PCAP_NS_MAGIC = 0xA1B23C4D
_PCAP_US_MAGIC = 0xA1B2C3D4


class OutputFile:
    """Where one output goes. A regular file or a new path is written to a temporary file in
    the folder of the file it becomes (a symlink's target's folder: the link is followed, never
    replaced) and renamed over it once complete; a character device, FIFO or socket
    (`/dev/null`, a named pipe) and `/dev/stdout`, `/dev/fd/N` are written directly, never
    replaced; a directory is a WriteError. A replaced file keeps its mode and (when we may
    set it: root) its owner. A FIFO with no reader blocks in open() like a shell's `> fifo`
    until one comes; Ctrl-C ends the wait (exit 130)."""

    def __init__(self, path):
        self.path, self.tmp = os.fspath(path), None
        self.fd = _fd_alias(self.path)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise WriteError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise WriteError(f"cannot write {self.path}: it is a directory")
        self.direct = self.fd is not None or (st is not None and not stat.S_ISREG(st.st_mode))
        self.socket = st is not None and stat.S_ISSOCK(st.st_mode)
        self.final = Path(os.path.realpath(self.path))
        self.mode = stat.S_IMODE(st.st_mode) if st is not None else None
        self.owner = (st.st_uid, st.st_gid) if st is not None else None

    def open(self, mode: str = "wb", buffering: int = -1):
        try:
            if self.fd is not None:     # the same open file as the shell's: its offset, no truncation
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                return os.fdopen(os.dup(self.fd), mode, buffering)
            if self.socket:             # a listening Unix stream socket: connect and send
                return _socket_file(self.path, mode)
            if self.direct:
                return open(self.path, mode, buffering)
            with interrupt.deferred():
                fd, self.tmp = tempfile.mkstemp(prefix=f".{self.final.name}.", suffix=".part",
                                                dir=self.final.parent)
                interrupt.remove_on_interrupt(self.tmp)
            return os.fdopen(fd, mode, buffering)
        except OSError as exc:
            raise WriteError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def commit(self) -> None:
        """Rename the temporary file into place (nothing for a direct write)."""
        if self.tmp is None:
            return
        if self.mode is None:
            umask = os.umask(0)
            os.umask(umask)
            self.mode = 0o666 & ~umask
        os.chmod(self.tmp, self.mode)         # mkstemp makes 0600: the replaced file's or the usual mode
        if self.owner is not None and self.owner != (os.geteuid(), os.getegid()):
            try:                              # root replacing a user's file: it stays the user's
                os.chown(self.tmp, *self.owner)
            except OSError:                   # not root: the new file is ours, as with `cp`
                pass
        os.replace(self.tmp, self.final)
        interrupt.forget(self.tmp)
        self.tmp = None

    def abort(self) -> None:
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            interrupt.forget(self.tmp)
            self.tmp = None


def _socket_file(path: str, mode: str):
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return sock.makefile(mode)
    finally:
        sock.close()                    # the file object keeps the connection open until closed


def _fd_alias(path: str) -> int | None:
    """The descriptor `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/self/fd/N` names."""
    names = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    path = os.path.abspath(path)
    if path in names:
        return names[path]
    for prefix in ("/dev/fd/", "/proc/self/fd/", f"/proc/{os.getpid()}/fd/"):
        if path.startswith(prefix) and path[len(prefix):].isdigit():
            return int(path[len(prefix):])
    return None


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "wb"):
    """Yield a file object for `path` (OutputFile); on success it is renamed into place, on
    failure (or Ctrl-C, roceview.interrupt) the temporary file is removed."""
    out = OutputFile(path)
    try:
        with out.open(mode) as fh:
            yield fh
        with interrupt.deferred():
            out.commit()
    except BaseException:
        out.abort()
        raise


def write_files(items) -> None:
    """Write several outputs, all or none of the replaced ones: `items` are (path, make_bytes)
    pairs (make_bytes() gives bytes, or an iterable of bytes written as they come: a big CSV is
    never whole in memory). Every temporary file is complete before the first is renamed into
    place; the direct ones (devices, FIFOs: nothing to rename) are written after the temporary
    files and before the renames, so that a device refusing its bytes (a symlink to /dev/full)
    leaves every replaced file as it was. OSError as WriteError."""
    outputs = [(OutputFile(path), make) for path, make in items]
    current = None
    try:
        for direct in (False, True):
            for current, make in outputs:
                if current.direct == direct:
                    with current.open("wb") as fh:
                        _write(fh, make())
        with interrupt.deferred():
            for current, _ in outputs:
                current.commit()
    except OSError as exc:
        raise WriteError(f"cannot write {current.path}: {exc.strerror or exc}") from None
    finally:
        for out, _ in outputs:
            out.abort()


def _write(fh, data) -> None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        fh.write(data)
        return
    for part in data:
        fh.write(part)


def pcap_records(frames: np.ndarray, lengths: np.ndarray, ts_ns: np.ndarray,
                 wire_lengths: np.ndarray | None = None, nanosecond: bool = True) -> np.ndarray:
    """Interleave 16-byte little-endian record headers with frame bytes (vectorised)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    wire = lengths if wire_lengths is None else np.asarray(wire_lengths, dtype=np.int64)
    n = len(lengths)
    ts_ns = np.asarray(ts_ns, dtype=np.int64)
    hdr = np.empty((n, 4), dtype="<u4")
    hdr[:, 0] = ts_ns // 1_000_000_000
    frac = ts_ns % 1_000_000_000
    hdr[:, 1] = frac if nanosecond else frac // 1000
    hdr[:, 2] = lengths
    hdr[:, 3] = wire
    out = np.empty(int(lengths.sum()) + 16 * n, dtype=np.uint8)
    rec_start = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1] + 16, out=rec_start[1:])
    hdr_idx = rec_start[:, None] + np.arange(16)
    out[hdr_idx.ravel()] = hdr.view(np.uint8).ravel()
    src_start = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=src_start[1:])
    # each output byte of frame i maps from frames[src_start[i] + k] to out[rec_start[i] + 16 + k]
    shift = np.repeat(rec_start + 16 - src_start, lengths)
    out[np.arange(len(frames), dtype=np.int64) + shift] = frames
    return out


def pcap_header(snaplen: int = 262144, linktype: int = LINKTYPE_ETHERNET, nanosecond: bool = True) -> bytes:
    magic = _PCAP_NS_MAGIC if nanosecond else _PCAP_US_MAGIC
    return struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)


def write_pcap(path, frames: np.ndarray, lengths, ts_ns, wire_lengths=None,
               linktype: int = LINKTYPE_ETHERNET, nanosecond: bool = True) -> None:
    """Write a classic pcap. `frames` is all frame bytes concatenated (uint8)."""
    body = pcap_records(np.asarray(frames, dtype=np.uint8), lengths, ts_ns, wire_lengths, nanosecond)
    with atomic_output(path) as fh:
        fh.write(pcap_header(linktype=linktype, nanosecond=nanosecond))
        fh.write(body.tobytes())


def pcapng_bytes(frames: list[bytes], ts_ns: list[int], linktype: int = LINKTYPE_ETHERNET,
                 wire_lengths: list[int] | None = None, big_endian: bool = False,
                 interfaces: list[tuple[int, int]] | None = None, if_ids: list[int] | None = None) -> bytes:
    """Build a pcapng (SHB, one IDB per interface, EPBs). For tests and small samples.

    `interfaces` is a list of (linktype, tsresol_exponent_base10); default one Ethernet
    interface with nanosecond resolution.
    """
    e = ">" if big_endian else "<"
    interfaces = interfaces or [(linktype, 9)]

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        total = len(body) + 12
        return struct.pack(e + "II", btype, total) + body + struct.pack(e + "I", total)

    out = [block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))]
    for lt, res in interfaces:
        opt = struct.pack(e + "HHB", 9, 1, res) + b"\0\0\0" + struct.pack(e + "HH", 0, 0)
        out.append(block(1, struct.pack(e + "HHI", lt, 0, 262144) + opt))
    for i, frame in enumerate(frames):
        ifid = if_ids[i] if if_ids else 0
        units = ts_ns[i] // (10 ** (9 - interfaces[ifid][1]))
        wl = wire_lengths[i] if wire_lengths else len(frame)
        body = struct.pack(e + "IIIII", ifid, units >> 32, units & 0xFFFFFFFF, len(frame), wl) + frame
        out.append(block(6, body))
    return b"".join(out)


def write_pcapng(path, frames: list[bytes], ts_ns: list[int], **kw) -> None:
    with atomic_output(path) as fh:
        fh.write(pcapng_bytes(frames, ts_ns, **kw))
