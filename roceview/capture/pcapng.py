"""pcapng sections, interfaces and timestamps; the block walk itself is in the kernels (kernels/backend.py)."""
from __future__ import annotations

import struct
from typing import Iterator

import numpy as np

from roceview.arrays import sorted_distinct
from roceview.kernels import consts
from roceview.kernels import backend as kernels
from roceview.errors import BadInput

SHB, IDB = 0x0A0D0D0A, 1
SHB_MIN_BYTES = 28      # type, length, byte-order magic, version, section length, length again
OPT_IF_TSRESOL, OPT_IF_TSOFFSET = 9, 14


class _Interfaces:
    """Per-interface link type and timestamp conversion, across sections."""

    def __init__(self):
        self.linktype: list[int] = []
        self.tsresol: list[int] = []        # byte as in if_tsresol (default 6: microseconds)
        self.tsoffset: list[int] = []
        self.section_base = 0
        self.last_ts = 0                    # of the last record, for SPBs (no timestamp)

    def add(self, linktype: int, tsresol: int, tsoffset: int) -> None:
        self.linktype.append(linktype)
        self.tsresol.append(tsresol)
        self.tsoffset.append(tsoffset)

    def to_ns(self, raw: np.ndarray, local_if: np.ndarray) -> np.ndarray:
        ts = np.zeros(len(raw), np.int64)
        for k in sorted_distinct(local_if):
            g = self.section_base + int(k)
            rows = local_if == k
            offset = max(-(1 << 62), min(1 << 62, self.tsoffset[g] * 1_000_000_000))   # damaged IDBs
            ts[rows] = _units_to_ns(raw[rows], self.tsresol[g]) + offset
        return ts


def tsresol_digits(resol: int) -> int:
    """The decimals tshark shows for an if_tsresol byte: 10^-n shows n, 2^-n the decimals of the
    largest power of ten it reaches (2^-10: 3, as ms), at most 9."""
    exp = resol & 0x7F
    if resol & 0x80:
        return min(9, exp * 30103 // 100000)
    return min(exp, 9)


def _units_to_ns(raw: np.ndarray, resol: int) -> np.ndarray:
    raw = raw.astype(np.int64)
    exp = resol & 0x7F
    if resol & 0x80:                       # 2^-exp seconds
        exp = min(exp, 63)                 # wider units than int64 only come from damaged IDBs
        whole = raw >> exp
        frac = raw & ((1 << exp) - 1)
        return whole * 1_000_000_000 + ((frac * 1_000_000_000) >> exp if exp <= 33 else 0)
    if exp <= 9:
        return raw * 10 ** (9 - exp)
    return raw // 10 ** (exp - 9) if exp - 9 <= 18 else np.zeros_like(raw)


def _options(body: bytes, e: str) -> dict[int, bytes]:
    opts, pos = {}, 0
    while pos + 4 <= len(body):
        code, length = struct.unpack(e + "HH", body[pos:pos + 4])
        if code == 0:
            break
        opts[code] = body[pos + 4:pos + 4 + length]
        pos += 4 + length + (-length % 4)
    return opts


def _block(buf, e: str) -> tuple[int, bytes] | None:
    if buf.filled - buf.pos < 12 and not buf.eof:
        buf.refill()
    head = bytes(buf.store[buf.pos:buf.pos + 12])
    if len(head) < 12 or buf.filled - buf.pos < 12:
        return None
    btype = struct.unpack(e + "I", head[:4])[0]
    if btype == SHB:                       # byte order comes from the SHB's own magic
        e = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    blen = struct.unpack(e + "I", head[4:8])[0]
    if blen < 12 or blen > (1 << 24):
        raise _Damaged(f"a pcapng block claims {blen} bytes")
    data = buf.take(blen)
    if len(data) < blen:
        raise _Damaged("file ends in the middle of a block")
    return btype, data


class _Damaged(Exception):
    pass


def _pcapng(buf, chunk_packets: int, warn, iface_base: int) -> Iterator:
    from roceview.capture.records import Outputs, chunk_of, linktype_checked

    if buf.filled - buf.pos < SHB_MIN_BYTES and not buf.eof:
        buf.refill()
    if buf.filled - buf.pos < SHB_MIN_BYTES:     # as readers._pcap refuses a cut pcap header
        raise BadInput(f"{buf.name}: pcapng section header is cut short")
    e = "<" if bytes(buf.store[8:12]) == b"\x4d\x3c\x2b\x1a" else ">"
    ifs = _Interfaces()
    out = Outputs(chunk_packets)
    while True:
        try:
            blk = _block(buf, e)
        except _Damaged as exc:
            warn(f"{buf.name}: {exc}; file damaged, stopped reading there")
            return
        if blk is None:
            return
        btype, data = blk
        if btype == SHB:
            e = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
            ifs.section_base = len(ifs.linktype)
        elif btype == IDB:
            if len(data) < 20:
                warn(f"{buf.name}: an interface description block is too short; file damaged, stopped reading there")
                return
            lt, _, _snap = struct.unpack(e + "HHI", data[8:16])
            opts = _options(data[16:-4], e)
            resol = (opts.get(OPT_IF_TSRESOL) or b"\x06")[0]       # an empty option: the default
            off = opts.get(OPT_IF_TSOFFSET, b"")
            tsoff = struct.unpack(e + "q", off[:8])[0] if len(off) >= 8 else 0
            ifs.add(linktype_checked(lt, buf.name), resol, tsoff)
        big = e == ">"
        while True:
            if not buf.eof and buf.filled - buf.pos < consts.MAX_CAPLEN + 64:
                buf.refill()
            end = buf.limit()
            n, pos, status = kernels.walk_pcapng(buf.arr, buf.pos, end, big, out.off, out.cap,
                                              out.wire, out.ts, out.iface)
            buf.pos = pos
            good = _described(out, n, ifs)
            if good:
                yield _records(buf, out, good, ifs, iface_base, chunk_of)
                buf.release()
            if good < n:
                warn(f"{buf.name}: packet {good + 1} of this chunk refers to an interface that was never "
                     "described; file damaged, stopped reading there")
                return
            if status == consts.BLOCK:
                break
            if status == consts.BAD_BLOCK:
                warn(f"{buf.name}: a pcapng block has an impossible length; file damaged, stopped reading there")
                return
            if status == consts.NEED_MORE and end == buf.filled and buf.eof:
                if buf.filled > buf.pos:
                    warn(f"{buf.name}: file ends in the middle of a block "
                         f"({buf.filled - buf.pos} bytes left over); stopped reading there")
                return


def _described(out, n: int, ifs: _Interfaces) -> int:
    """How many leading records refer to an interface described so far in this section."""
    bad = np.flatnonzero(out.iface[:n].astype(np.int64) >= len(ifs.linktype) - ifs.section_base)
    return int(bad[0]) if len(bad) else n


def _records(buf, out, n, ifs: _Interfaces, iface_base: int, make_chunk):
    local = out.iface[:n].astype(np.int64)
    ts = ifs.to_ns(out.ts[:n], local)
    spb = out.ts[:n] < 0
    if spb.any():                           # SPBs carry no timestamp: keep the previous one
        prev = np.maximum.accumulate(np.where(spb, -1, np.arange(n)))
        ts = np.where(prev >= 0, ts[prev.clip(0)], ifs.last_ts)
    ifs.last_ts = int(ts[-1])
    glob = ifs.section_base + local
    linktype = np.asarray(ifs.linktype, np.uint16)[glob]
    digits = np.asarray([tsresol_digits(r) for r in ifs.tsresol], np.uint8)[glob]    # each interface's precision
    out.iface[:n] = glob
    return make_chunk(buf, out, n, linktype_of=linktype, iface_base=iface_base, ts=ts, digits=digits)
