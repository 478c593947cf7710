"""Opening captures: files, gzip (by magic, not by name), stdin, lists and directories."""
from __future__ import annotations

import io
import os
import sys
import zlib
from pathlib import Path

from roceview.errors import BadInput

GZIP_MAGIC = b"\x1f\x8b"
PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("pcap", False, 1000), b"\xa1\xb2\xc3\xd4": ("pcap", True, 1000),
    b"\x4d\x3c\xb2\xa1": ("pcap", False, 1), b"\xa1\xb2\x3c\x4d": ("pcap", True, 1),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".erf.pcap")


def _inflate_module():
    """zlib-ng where it loads (inflates about 3x as fast as the system zlib behind the
    standard library's gzip: docs/performance.md), else zlib; and the errors it raises."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib, (zlib.error,)
    return zlib_ng, (zlib.error, zlib_ng.error)


class _GzipStream(io.RawIOBase):
    """gzip members (RFC 1952) inflated step by step, raising CorruptStream (one line) on
    corrupt or cut data after handing out everything inflated before it (zlib gives nothing
    from a step that fails, so that step is inflated again in small pieces; a reader that
    inflates a whole request first, as zlib-ng's GzipNGFile does, drops it). Zero bytes
    between or after members are skipped, as the standard library's gzip does. `raw` is
    closed with this stream only when `owns_raw` (not stdin)."""

    INPUT_BLOCK = 256 << 10

    def __init__(self, raw, name, owns_raw: bool = True):
        self._raw, self._name, self._owns_raw = raw, name, owns_raw
        self._zlib, self._errors = _inflate_module()
        self._z = self._zlib.decompressobj(31)    # 31: a gzip header and trailer (CRC-32, ISIZE)
        self._input, self._started = b"", False
        self._pending, self._failure = b"", None
        head, buf = b"", bytearray(4)
        while len(head) < 4:                      # a tiny first member or pipe read inflates to less
            got = self.readinto(memoryview(buf)[:4 - len(head)])
            if not got:
                break
            head += bytes(buf[:got])
        self.head = self._pending = head

    def readable(self):
        return True

    def readinto(self, b):
        if not len(b):
            return 0
        if self._pending:
            n = min(len(b), len(self._pending))
            b[:n] = self._pending[:n]
            self._pending = self._pending[n:]
            return n
        if self._failure is not None:
            raise self._failure
        while True:
            if not self._input and not self._refill():
                if self._z.eof or not self._started:
                    return 0
                raise CorruptStream(f"{self._name}: corrupt gzip data (the stream ends inside a member)")
            if self._z.eof and not self._next_member():
                continue
            self._started = True
            data = self._inflate(len(b))
            if data:
                b[:len(data)] = data
                return len(data)

    def _inflate(self, size: int) -> bytes:
        before = self._z.copy()
        try:
            data = self._z.decompress(self._input, size)
        except self._errors as exc:
            self._failure = CorruptStream(f"{self._name}: corrupt gzip data ({exc})")
            data, self._input = _salvage(before, self._input, self._errors), b""
            data, self._pending = data[:size], data[size:]
            if not data:
                raise self._failure from None
            return data
        self._input = self._z.unconsumed_tail or self._z.unused_data
        return data

    def _refill(self) -> bool:
        read = getattr(self._raw, "read1", self._raw.read)    # a pipe: what has arrived, no waiting for more
        self._input = read(self.INPUT_BLOCK) or b""
        return bool(self._input)

    def _next_member(self) -> bool:
        """After a member's trailer: skip zero padding; True when another member starts here."""
        self._input = self._input.lstrip(b"\0")
        if not self._input:
            return False
        self._z = self._zlib.decompressobj(31)
        return True

    def close(self):
        if self._owns_raw:
            self._raw.close()
        super().close()


def _salvage(z, data: bytes, errors) -> bytes:
    """What `z` inflates from `data` before it raises: fed 4 KB, then 64 bytes, then one byte
    at a time, each resumed from a copy taken before the piece that raised. (Steps of output
    would lose the last bytes: zlib checks the trailer in the call that writes them.)"""
    out, pos = bytearray(), 0
    for step in (1 << 12, 1 << 6, 1):
        while pos < len(data) and not z.eof:
            mark = z.copy()
            try:
                out += z.decompress(data[pos:pos + step])
            except errors:
                z = mark
                break
            pos += step
        else:
            break
    return bytes(out)


class CorruptStream(BadInput):
    """Raised mid-file: readers turn it into a warning if packets were already read."""


PIPE_BYTES = 1 << 20      # /proc/sys/fs/pipe-max-size: the most an unprivileged process may ask


def _widen_pipe(stream) -> None:
    """A pipe's 64 KB buffer makes the writer and this reader take turns 13,000 times for
    855 MB of capture; at 1 MB the same read takes about a third of the time (docs/performance.md).
    Best effort, and never smaller: not a pipe, already wider, not Linux or refused leaves it
    as it was."""
    import stat

    try:
        import fcntl

        fd = stream.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_BYTES:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass


def open_capture(path: str):
    """Return (binary stream, display name, first 4 bytes); gzip is unwrapped."""
    name = "<stdin>" if path == "-" else str(path)
    if path == "-":
        raw = sys.stdin.buffer
        _widen_pipe(raw)
    else:
        try:
            if os.path.isdir(path):
                raise BadInput(f"{name}: is a directory with no captures")
            raw = open(path, "rb")
        except FileNotFoundError:
            raise BadInput(f"{name}: no such file") from None
        except PermissionError:
            raise BadInput(f"{name}: permission denied") from None
        except OSError as exc:
            raise BadInput(f"{name}: cannot open ({exc.strerror or exc})") from None
    raw = io.BufferedReader(raw, 1 << 20) if not hasattr(raw, "peek") else raw
    head = raw.peek(4)[:4]
    if head[:2] == GZIP_MAGIC:
        try:
            stream = _GzipStream(raw, name, owns_raw=path != "-")
        except CorruptStream as exc:
            raise BadInput(str(exc)) from None
        return stream, name, stream.head
    return raw, name, head


def capture_kind(head: bytes, name: str) -> str:
    if len(head) == 0:
        raise BadInput(f"{name}: empty file")
    if head in PCAP_MAGICS:
        return "pcap"
    if head == PCAPNG_MAGIC:
        return "pcapng"
    raise BadInput(f"{name}: not a pcap or pcapng capture")


def expand_paths(paths) -> list[str]:
    """A directory becomes its capture files; order in time is settled by the reader."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    for p in paths:
        p = str(p)
        if p != "-" and os.path.isdir(p):
            found = sorted(str(f) for f in Path(p).iterdir()
                           if f.is_file() and f.name.lower().endswith(CAPTURE_SUFFIXES))
            if not found:
                raise BadInput(f"{p}: directory has no capture files")
            out.extend(found)
        else:
            out.append(p)
    if not out:
        raise BadInput("no capture given")
    return out
