"""Invariant CRC (IBTA 7.8.1; RoCE A16.4 / A17.4), computed per packet in numba.

ICRC = CRC-32 (IEEE 802.3 polynomial, as zlib) over: for RoCE, 8 bytes of 0xFF standing
for the LRH, then the IP header / GRH, UDP header, BTH and everything up to the ICRC, with
the variant fields replaced by ones (measured on ibdump captures: a native IB packet with
a GRH also has its whole LRH replaced by ones, exactly like RoCE): IPv4 TOS, TTL, header checksum; IPv6/GRH traffic
class, flow label, hop limit; UDP checksum; BTH resv8a (byte 4, FECN/BECN). For native IB local
packets (no GRH) the LRH itself is covered with its VL replaced by ones. Stored little-endian.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_jit = nb.njit(cache=True, nogil=True, boundscheck=False)


@intrinsic
def _call_crc32(typingctx, fn, crc, addr, length):
    """crc32(crc, addr, length) through a C function pointer given as an integer (keeps the
    kernel cacheable: numba cannot cache functions that hold ctypes objects)."""
    sig = types.uint32(types.int64, types.uint32, types.int64, types.uint32)

    def codegen(context, builder, signature, args):
        f, c, a, n = args
        byte_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), byte_ptr, ir.IntType(32)])
        return builder.call(builder.inttoptr(f, fnty.as_pointer()), [c, builder.inttoptr(a, byte_ptr), n])

    return sig, codegen


@_jit
def _byte(t, c, b):
    return (c >> np.uint32(8)) ^ t[0, (c ^ np.uint32(b)) & np.uint32(0xFF)]


@_jit
def _bulk(t, c, buf, p, end):
    """Slice-by-8 over buf[p:end]."""
    while p + 8 <= end:
        lo = c ^ ((np.uint32(buf[p + 3]) << 24) | (np.uint32(buf[p + 2]) << 16)
                  | (np.uint32(buf[p + 1]) << 8) | np.uint32(buf[p]))
        c = (t[7, lo & 0xFF] ^ t[6, (lo >> 8) & 0xFF] ^ t[5, (lo >> 16) & 0xFF] ^ t[4, lo >> 24]
             ^ t[3, buf[p + 4]] ^ t[2, buf[p + 5]] ^ t[1, buf[p + 6]] ^ t[0, buf[p + 7]])
        p += 8
    while p < end:
        c = _byte(t, c, buf[p])
        p += 1
    return c


@_jit
def _copy(buf, p, n, scratch, at):
    for k in range(n):
        scratch[at + k] = buf[p + k]
    return at + n


@_jit
def _masked_prefix(buf, l3, l3kind, udp, lrh, bth, scratch):
    """Copy the covered headers (LRH stand-in, IP/GRH, UDP, BTH) into scratch and set
    their variant fields to ones; returns the length."""
    at = 0
    if lrh >= 0 and l3 < 0:           # IBA local packet: LRH covered, VL masked
        at = _copy(buf, lrh, 8, scratch, 0)
        scratch[0] |= 0xF0
    else:                                   # 8 bytes of ones stand for the LRH
        for k in range(8):
            scratch[k] = 0xFF
        at = 8
    if l3 >= 0:
        h = at
        if l3kind == 4:
            at = _copy(buf, l3, udp - l3, scratch, at)
            scratch[h + 1] = scratch[h + 8] = scratch[h + 10] = scratch[h + 11] = 0xFF
        else:
            at = _copy(buf, l3, 40, scratch, at)
            scratch[h] |= 0x0F
            scratch[h + 1] = scratch[h + 2] = scratch[h + 3] = scratch[h + 7] = 0xFF
    if udp >= 0:
        at = _copy(buf, udp, 8, scratch, at)
        scratch[at - 2] = scratch[at - 1] = 0xFF
    at = _copy(buf, bth, 12, scratch, at)
    scratch[at - 8] = 0xFF                  # BTH resv8a (FECN, BECN, resv6)
    return at


@_jit
def icrc_one(buf, l3, l3kind, udp, lrh, bth, at, t, fn, scratch):
    """Computed ICRC of the packet whose headers start at these offsets (-1: absent) and
    whose stored ICRC starts at `at`.
    `fn`: address of a zlib-compatible crc32(crc, ptr, len), or 0 for the table loop."""
    n = _masked_prefix(buf, l3, l3kind, udp, lrh, bth, scratch)
    body = bth + 12
    if fn != 0:
        c = _call_crc32(fn, np.uint32(0), scratch.ctypes.data, np.uint32(n))
        return _call_crc32(fn, c, buf.ctypes.data + body, np.uint32(at - body))
    c = _bulk(t, np.uint32(0xFFFFFFFF), scratch, 0, n)
    return _bulk(t, c, buf, body, at) ^ np.uint32(0xFFFFFFFF)
