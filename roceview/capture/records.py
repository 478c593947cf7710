"""The records a capture reader yields, pcap or pcapng alike: a RecordChunk points at each
record's bytes in the reader's buffer, with its lengths, time, interface and link type."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from roceview.errors import BadInput
from roceview.kernels.consts import SUPPORTED_LINKTYPES

Warn = Callable[[str], None]


@dataclass
class RecordChunk:
    buf: np.ndarray            # uint8, valid while the chunk is current (mapped: to the end)
    off: np.ndarray            # int64 offset of each record's first byte in buf
    cap: np.ndarray            # uint32 captured length
    wire: np.ndarray           # uint32 original length
    ts: np.ndarray             # int64 ns since the epoch
    iface: np.ndarray          # uint16 interface index
    linktype: np.ndarray       # uint16 link type per record
    # uint8 decimals of each record's time as the file gives it (9: ns pcap or if_tsresol 9; 6: µs);
    # None: unknown (a chunk built by hand), shown as microseconds (packets/times.py)
    digits: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.off)

    def frame(self, i: int) -> bytes:
        return self.buf[self.off[i]: self.off[i] + self.cap[i]].tobytes()


class Outputs:
    """The record walk's output arrays, filled by the kernels, a chunk at a time."""

    def __init__(self, size: int):
        self.off = np.empty(size, np.int64)
        self.cap = np.empty(size, np.uint32)
        self.wire = np.empty(size, np.uint32)
        self.ts = np.empty(size, np.int64)
        self.iface = np.zeros(size, np.uint32)


def linktype_checked(linktype: int, name: str) -> int:
    if linktype not in SUPPORTED_LINKTYPES:
        raise BadInput(f"{name}: unsupported link type {linktype} (roceview reads "
                       + ", ".join(f"{v} ({k})" for k, v in SUPPORTED_LINKTYPES.items()) + ")")
    return linktype


def chunk_of(buf, out: "Outputs", n: int, linktype_of: np.ndarray, iface_base: int,
           ts: np.ndarray | None = None, digits: np.ndarray | None = None) -> RecordChunk:
    return RecordChunk(buf.arr, out.off[:n].copy(), out.cap[:n].copy(), out.wire[:n].copy(),
                       (out.ts[:n] if ts is None else ts).copy(),
                       (out.iface[:n] + iface_base).astype(np.uint16), linktype_of, digits)
