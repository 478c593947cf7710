"""Process memory settings for decoding big captures.

A chunk's columns are ~30 MB for 64 k packets (packets/decode.py). glibc serves blocks over its
adaptive mmap threshold with mmap and trims the heap top above twice that threshold, so with
its defaults a long decode keeps giving chunk buffers back to the kernel and faulting them in
again: on these VMs every fresh 4 KiB page costs a fault of ~2-3 us on first touch, which made
a warm 64 k chunk decode in 25 ms instead of 6 ms (benchmarks/, docs/DESIGN.md).
"""
from __future__ import annotations

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8     # glibc <malloc.h>
MMAP_THRESHOLD_MAX = 32 << 20                   # glibc's ceiling for M_MMAP_THRESHOLD (64-bit)
TRIM_THRESHOLD = 1 << 30
PREFAULT_BLOCK = 16 << 20                       # under the mmap threshold: served from the heap
# The analyze pipeline's own heap at snaplen 128: ~16 k pages reused. (96 MB, sized before the
# analysis projection shrank the decode outputs, left ~8 k pages nobody used and cost more CPU,
# docs/performance.md; full frames reuse fewer.)
PREFAULT_MAX = 64 << 20
_KEEPING = [False]              # whether keep_freed_memory took in this process (touch_heap's condition)


def keep_freed_memory() -> bool:
    """Make glibc keep freed blocks under 32 MB in the heap for reuse instead of returning
    them to the kernel (False where the C library is not glibc: nothing changes).

    Process-wide, so the CLI calls it (it owns its process) and library callers may: for
    `analyze` of 1 M packets it measured 43 k -> 30 k page faults and ~10 % less CPU time. The
    heap then keeps up to its peak size (~the chunks in flight) until the process ends."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        kept = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and \
            bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):   # not glibc (musl, macOS): its defaults
        return False
    _KEEPING[0] = _KEEPING[0] or kept
    return kept


def touch_heap(nbytes: int) -> bool:
    """Touch `nbytes` of heap on this thread, then free them (kept: keep_freed_memory), so that
    this thread's next allocations find their pages faulted in. For a thread about to wait
    (the Dask driver while its workers analyze) that will then allocate: fresh pages cost
    ~2.5-25 us each to fault in here. Only in a process that keeps freed memory already (the
    CLI's; a library caller's malloc settings are its own, keep_freed_memory): elsewhere the
    pages would go back to the kernel as freed. False where nothing was done (that, not glibc,
    too small)."""
    libc = _libc() if nbytes >= PREFAULT_BLOCK and _KEEPING[0] else None
    if libc is None:
        return False
    _touch(libc, nbytes // PREFAULT_BLOCK)
    return True


def prefault_heap(nbytes: int) -> bool:
    """Touch `nbytes` of heap on a thread of its own, then free them (kept: keep_freed_memory).

    A process starts single-threaded (imports, ~0.1 s) while its second core idles; the
    decode pipeline then faults in its ~64 MB of chunk buffers at ~2.5 us a page (16 k
    faults, ~0.04 s of CPU, competing with the decode and analysis threads). Faulting them in
    during the imports moves that work onto the idle core. With one malloc arena (set here,
    before any other thread exists) every thread's allocations reuse the touched pages.
    CLI only: it owns its process. False where nothing was done (not glibc, nbytes < 1 block)."""
    libc = _libc() if nbytes >= PREFAULT_BLOCK else None
    if libc is None or not (libc.mallopt(M_ARENA_MAX, 1) and keep_freed_memory()):
        return False
    import threading

    # ctypes calls release the GIL: the imports go on
    threading.Thread(target=_touch, args=(libc, min(nbytes, PREFAULT_MAX) // PREFAULT_BLOCK),
                     name="roceview-prefault", daemon=True).start()
    return True


def _libc():
    """glibc's malloc, free and memset typed for ctypes (None where the C library cannot be
    loaded)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        malloc, free, memset = libc.malloc, libc.free, libc.memset
    except (OSError, AttributeError):
        return None
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.argtypes, memset.argtypes = [ctypes.c_void_p], [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    return libc


def _touch(libc, blocks: int) -> None:
    """Allocate `blocks` heap blocks, write every page of them, then free them all."""
    held = [libc.malloc(PREFAULT_BLOCK) for _ in range(blocks)]
    for block in held:
        if block:
            libc.memset(block, 0, PREFAULT_BLOCK)
    for block in held:
        libc.free(block)
