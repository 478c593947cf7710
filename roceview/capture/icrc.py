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


def _tables() -> np.ndarray:
    t = np.zeros((8, 256), dtype=np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[0, b] = c
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


CRC_TABLES = _tables()
_jit = nb.njit(cache=True, nogil=True, boundscheck=False)


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
def _masked(t, c, buf, p, n, kind):
    """CRC over a header with its variant bytes set to ones. kind: 4 IPv4, 6 IPv6/GRH,
    17 UDP, 12 BTH, 8 LRH."""
    for k in range(n):
        b = buf[p + k]
        if kind == 4 and (k == 1 or k == 8 or k == 10 or k == 11):
            b = 0xFF
        elif kind == 6 and (k == 1 or k == 2 or k == 3 or k == 7):
            b = 0xFF
        elif kind == 6 and k == 0:
            b = b | 0x0F
        elif kind == 17 and (k == 6 or k == 7):
            b = 0xFF
        elif kind == 12 and k == 4:
            b = 0xFF
        elif kind == 8 and k == 0:
            b = b | 0xF0
        c = _byte(t, c, b)
    return c


@_jit
def compute_icrc(buf, l3, l3kind, udp, lrh, bth, icrc_at, t, out):
    """out[i] = computed ICRC for rows with icrc_at >= 0 (ICRC wholly captured)."""
    for i in range(bth.shape[0]):
        if icrc_at[i] < 0:
            continue
        c = np.uint32(0xFFFFFFFF)
        if lrh[i] >= 0 and l3[i] < 0:       # IBA local packet: LRH covered, VL masked
            c = _masked(t, c, buf, lrh[i], 8, 8)
        else:
            for _ in range(8):
                c = _byte(t, c, 0xFF)
        if l3[i] >= 0:
            if l3kind[i] == 4:
                c = _masked(t, c, buf, l3[i], udp[i] - l3[i], 4)
            else:
                c = _masked(t, c, buf, l3[i], 40, 6)
        if udp[i] >= 0:
            c = _masked(t, c, buf, udp[i], 8, 17)
        c = _masked(t, c, buf, bth[i], 12, 12)
        c = _bulk(t, c, buf, bth[i] + 12, icrc_at[i])
        out[i] = c ^ np.uint32(0xFFFFFFFF)
