"""Opening captures: files, gzip (by magic, not by name), stdin, lists and directories."""
from __future__ import annotations

import gzip
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


class _GzipStream(io.RawIOBase):
    """gzip.GzipFile raising CorruptStream (one line) on corrupt data. Not wrapped in a
    BufferedReader: a buffered read that fails would drop the good data before the damage."""

    def __init__(self, raw, name):
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._name = name
        self.head = self._guard(lambda: self._gz.read(4))
        self._pending = self.head

    def _guard(self, read):
        try:
            return read()
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptStream(f"{self._name}: corrupt gzip data ({exc})") from None

    def readable(self):
        return True

    def readinto(self, b):
        if self._pending:
            n = len(self._pending)
            b[:n] = self._pending
            self._pending = b""
            return n
        # read1: one decompression step at a time, so data before a damaged end is kept
        # (GzipFile.readinto loops internally and drops it when the stream breaks)
        data = self._guard(lambda: self._gz.read1(len(b)))
        b[:len(data)] = data
        return len(data)

    def close(self):
        self._gz.close()
        super().close()


class CorruptStream(BadInput):
    """Raised mid-file: readers turn it into a warning if packets were already read."""


def open_capture(path: str):
    """Return (binary stream, display name, first 4 bytes); gzip is unwrapped."""
    name = "<stdin>" if path == "-" else str(path)
    if path == "-":
        raw = sys.stdin.buffer
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
            stream = _GzipStream(raw, name)
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
