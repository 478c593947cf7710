"""Record walks: the one inherently sequential step (each record header gives the next
offset). numba-compiled; everything after it is vectorised numpy.

Each walk fills preallocated output arrays from a byte buffer and returns
(records, position, status). Status tells the caller why it stopped.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from roceview.kernels.consts import ABSURD, BAD_BLOCK, BLOCK, FULL, MAX_CAPLEN, NEED_MORE

_jit = nb.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def _u32(buf, pos, big):
    if big:
        return (np.uint32(buf[pos]) << 24) | (np.uint32(buf[pos + 1]) << 16) | \
               (np.uint32(buf[pos + 2]) << 8) | np.uint32(buf[pos + 3])
    return (np.uint32(buf[pos + 3]) << 24) | (np.uint32(buf[pos + 2]) << 16) | \
           (np.uint32(buf[pos + 1]) << 8) | np.uint32(buf[pos])


@_jit
def walk_pcap(buf, pos, end, big, frac_ns, out_off, out_cap, out_wire, out_ts):
    """Classic pcap records: 16-byte header (ts_sec, ts_frac, incl_len, orig_len)."""
    n = 0
    cap_out = out_off.shape[0]
    while True:
        if n == cap_out:
            return n, pos, FULL
        if pos + 16 > end:
            return n, pos, NEED_MORE
        incl = _u32(buf, pos + 8, big)
        if incl > MAX_CAPLEN:
            return n, pos, ABSURD
        if pos + 16 + incl > end:
            return n, pos, NEED_MORE
        out_ts[n] = np.int64(_u32(buf, pos, big)) * 1_000_000_000 + np.int64(_u32(buf, pos + 4, big)) * frac_ns
        out_off[n] = pos + 16
        out_cap[n] = incl
        out_wire[n] = _u32(buf, pos + 12, big)
        n += 1
        pos += 16 + incl


@_jit
def walk_pcapng(buf, pos, end, big, out_off, out_cap, out_wire, out_ts, out_if):
    """pcapng blocks: EPB (6) and SPB (3) become records; SHB/IDB go back to Python;
    other blocks (NRB, ISB, DSB, custom, unknown) are skipped. `out_ts` gets raw units."""
    n = 0
    cap_out = out_off.shape[0]
    while True:
        if n == cap_out:
            return n, pos, FULL
        if pos + 12 > end:
            return n, pos, NEED_MORE
        btype = _u32(buf, pos, big)
        blen = _u32(buf, pos + 4, big)
        if btype == 0x0A0D0D0A or btype == 1:
            return n, pos, BLOCK
        if blen < 12 or blen % 4 != 0 or blen > MAX_CAPLEN + 64:
            return n, pos, BAD_BLOCK
        if pos + blen > end:
            return n, pos, NEED_MORE
        if (btype == 6 and blen < 32) or (btype == 3 and blen < 16):   # shorter than their fixed part
            return n, pos, BAD_BLOCK
        if btype == 6:
            incl = _u32(buf, pos + 20, big)
            if incl > blen - 32 or incl > MAX_CAPLEN:
                return n, pos, BAD_BLOCK
            out_if[n] = _u32(buf, pos + 8, big)
            out_ts[n] = (np.int64(_u32(buf, pos + 12, big)) << 32) | np.int64(_u32(buf, pos + 16, big))
            out_off[n] = pos + 28
            out_cap[n] = incl
            out_wire[n] = _u32(buf, pos + 24, big)
            n += 1
        elif btype == 3:
            wire = _u32(buf, pos + 8, big)
            out_if[n] = 0
            out_ts[n] = -1
            out_off[n] = pos + 12
            out_cap[n] = min(wire, blen - 16)
            out_wire[n] = wire
            n += 1
        pos += blen
