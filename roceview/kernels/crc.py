"""CRC-32 (IEEE 802.3 polynomial, as zlib) for the ICRC: slice-by-8 tables for the
fallback loop, and the address of zlib-ng's `zng_crc32` for the kernels to call.
Imports neither numba nor the kernels."""
from __future__ import annotations

import ctypes

import numpy as np


def _tables() -> np.ndarray:
    t = np.zeros((8, 256), dtype=np.uint32)
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):                      # all 256 bytes at once (a Python loop: ~1 ms a run)
        c = np.where(c & 1, (c >> 1) ^ np.uint32(0xEDB88320), c >> 1)
    t[0] = c
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


CRC_TABLES = _tables()


def _zlib_ng() -> int:
    from zlib_ng import zlib_ng
    return ctypes.cast(ctypes.CDLL(zlib_ng.__file__).zng_crc32, ctypes.c_void_p).value or 0


def native_crc32(source=_zlib_ng) -> int:
    """Address of zlib-ng's `zng_crc32` (carry-less multiply folding: ~14x as fast as the
    table-driven loop below), or 0 when zlib-ng is unavailable. The system zlib's crc32
    (CPython's `zlib` links it) was measured as a second choice and gained nothing over the
    table loop on 1 KB frames (docs/performance.md), so there is none."""
    try:
        return source()
    except (ImportError, OSError, AttributeError):
        return 0


NATIVE_CRC32 = native_crc32()
