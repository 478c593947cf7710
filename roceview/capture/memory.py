"""Process memory settings for decoding big captures.

A chunk's columns are ~30 MB for 64 k packets (decode.py). glibc serves blocks over its
adaptive mmap threshold with mmap and trims the heap top above twice that threshold, so with
its defaults a long decode keeps giving chunk buffers back to the kernel and faulting them in
again: on these VMs every fresh 4 KiB page costs a fault of ~2-3 us on first touch, which made
a warm 64 k chunk decode in 25 ms instead of 6 ms (benchmarks/, docs/DESIGN.md).
"""
from __future__ import annotations

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # glibc <malloc.h>
MMAP_THRESHOLD_MAX = 32 << 20                   # glibc's ceiling for M_MMAP_THRESHOLD (64-bit)
TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Make glibc keep freed blocks under 32 MB in the heap for reuse instead of returning
    them to the kernel (False where the C library is not glibc: nothing changes).

    Process-wide, so the CLI calls it (it owns its process) and library callers may: for
    `analyze` of 1 M packets it measured 43 k -> 30 k page faults and ~10 % less CPU time. The
    heap then keeps up to its peak size (~the chunks in flight) until the process ends."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and \
            bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):   # not glibc (musl, macOS): its defaults
        return False
