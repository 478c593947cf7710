"""The decode kernels: C compiled at install time (_ckernel.c), or the numba fallback.

The C build is the normal case: it needs no numba import and no JIT cache at run time
(measured 0.5-0.8 s of a 1 M-packet `analyze`, see benchmarks/). Where it was not built
(no compiler at install), the numba kernels give the same results, a test checks that;
numba is then needed (the `roceview[numba]` extra), else importing this module raises
RoceviewError(NO_KERNEL): one line saying what to install.
ROCEVIEW_KERNEL=numba forces the fallback; ROCEVIEW_KERNEL=c makes a missing build an error.

Every function takes the same numpy arrays in both backends:
  walk_pcap(buf, pos, end, big, frac_ns, off, cap, wire, ts) -> (records, position, status)
  walk_pcapng(buf, pos, end, big, off, cap, wire, ts, iface) -> (records, position, status)
  parse_layers(buf, rec_off, cap, linktype, ports, o, meta)
  decode_records(lo, hi, buf, rec_off, cap, wire, linktype, ports, ext, ext_total, rows,
                 crc_table, crc_fn, projection, o, meta, u8, u16, u32, u64, ok, src, dst, addr_ok, lens,
                 flags, icrc)
    (projection: consts.PROJECTION_CODE; o, meta: the per-packet layer offsets, (n, 15) and
    (n, 10) int64, or None for both: they then stay on the C kernel's stack)
"""
from __future__ import annotations

import os

import numpy as np

from roceview.kernels import consts


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _C:
    name = "c"

    def __init__(self):
        import ctypes

        from roceview.kernels import _ckernel

        lib = ctypes.CDLL(_ckernel.__file__)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        self._walk_pcap = lib.rv_walk_pcap
        self._walk_pcap.argtypes = [vp, i64, i64, i64, i64, i64] + [vp] * 5
        self._walk_pcapng = lib.rv_walk_pcapng
        self._walk_pcapng.argtypes = [vp, i64, i64, i64, i64] + [vp] * 6
        self._parse = lib.rv_parse_layers
        self._parse.argtypes = [vp, i64] + [vp] * 6
        self._decode = lib.rv_decode_records
        self._decode.argtypes = [i64, i64, i64] + [vp] * 10 + [i64, i64] + [vp] * 13
        for f in (self._walk_pcap, self._walk_pcapng, self._parse, self._decode):
            f.restype = None
        self._flow_ids = lib.rv_flow_ids
        self._flow_ids.argtypes = [i64, vp, vp, vp, i64, vp, i64, vp, vp, vp, i64, vp, vp]
        self._flow_ids.restype = i64
        self._stable_order = lib.rv_stable_order
        self._stable_order.argtypes = [i64, vp, i64, vp, vp, vp]
        self._stable_order.restype = i64
        self._format_rows = lib.rv_format_rows
        self._format_rows.argtypes = [i64, i64, vp, vp, vp, vp, vp, vp, vp, i64]
        self._format_rows.restype = i64
        self._ops_direct = lib.rv_ops_direct
        self._ops_direct.argtypes = [i64, vp, vp, vp, i64] + [vp] * 4 + [i64] * 4 + [vp] * 4
        self._ops_direct.restype = i64
        self._op_sums = lib.rv_op_sums
        self._op_sums.argtypes = [i64, vp, i64] + [vp] * 4 + [i64] * 3 + [vp] * 7 + [i64] + [vp] * 2
        self._op_sums.restype = i64
        self._ctypes = ctypes

    def walk_pcap(self, buf, pos, end, big, frac_ns, off, cap, wire, ts):
        res = np.empty(3, np.int64)
        self._walk_pcap(_ptr(buf), pos, end, int(big), frac_ns, len(off), _ptr(off), _ptr(cap), _ptr(wire),
                        _ptr(ts), _ptr(res))
        return int(res[0]), int(res[1]), int(res[2])

    def walk_pcapng(self, buf, pos, end, big, off, cap, wire, ts, iface):
        res = np.empty(3, np.int64)
        self._walk_pcapng(_ptr(buf), pos, end, int(big), len(off), _ptr(off), _ptr(cap), _ptr(wire), _ptr(ts),
                          _ptr(iface), _ptr(res))
        return int(res[0]), int(res[1]), int(res[2])

    def parse_layers(self, buf, rec_off, cap, linktype, ports, o, meta):
        _check(rec_off, np.int64), _check(cap, np.uint32), _check(linktype, np.uint16)
        self._parse(_ptr(buf), len(rec_off), _ptr(rec_off), _ptr(cap), _ptr(linktype), _ptr(ports), _ptr(o),
                    _ptr(meta))

    def decode_records(self, lo, hi, buf, rec_off, cap, wire, linktype, ports, ext, ext_total, rows, crc_table,
                       crc_fn, projection, o, meta, u8, u16, u32, u64, ok, src, dst, addr_ok, lens, flags, icrc):
        n = lens.shape[0]
        _check(rec_off, np.int64), _check(cap, np.uint32), _check(wire, np.uint32), _check(linktype, np.uint16)
        if not (lens.flags.f_contiguous and flags.flags.f_contiguous and (o is None or o.flags.c_contiguous)):
            raise ValueError("decode_records: lens/flags must be (6|9, n).T views, o C-ordered")
        arrays = (buf, rec_off, cap, wire, linktype, ports, ext, ext_total, rows, crc_table)
        outs = (u8, u16, u32, u64, ok, src, dst, addr_ok, lens, flags, icrc)
        offsets = (0, 0) if o is None else (_ptr(o), _ptr(meta))      # NULL: kept on the kernel's stack
        self._decode(lo, hi, n, *map(_ptr, arrays), int(crc_fn), int(projection), *offsets, *map(_ptr, outs))

    def flow_ids(self, src, dst, qp, insert, slots, fsrc, fdst, fqp, n_flows, out) -> int:
        """analysis/flows.py's index (_flowindex.c): rows done; n_flows is a 1-element int64
        array, updated. Checked so that no input can take the C code outside its arrays."""
        for a, dtype in ((src, np.uint64), (dst, np.uint64), (qp, np.uint32), (slots, np.int64), (fsrc, np.uint64),
                         (fdst, np.uint64), (fqp, np.uint32), (n_flows, np.int64), (out, np.int64)):
            _check(a, dtype)
        n, capf = len(qp), len(fqp)
        if not (src.shape == dst.shape == (n, 2) and fsrc.shape == fdst.shape == (capf, 2) and qp.ndim == 1
                and out.ndim == 1 and len(out) >= n and n_flows.shape == (1,) and 0 <= n_flows[0] <= capf
                and len(slots) >= max(2, 2 * int(n_flows[0])) and len(slots) & (len(slots) - 1) == 0):
            raise ValueError("flow_ids: arrays of other shapes, or a slot table that is not a big enough power of 2")
        if not all(a.flags.writeable for a in (slots, fsrc, fdst, fqp, n_flows, out)):
            raise ValueError("flow_ids: read-only output arrays")
        return self._flow_ids(n, _ptr(src), _ptr(dst), _ptr(qp), int(bool(insert)), _ptr(slots), len(slots) - 1,
                              _ptr(fsrc), _ptr(fdst), _ptr(fqp), capf, _ptr(n_flows), _ptr(out))

    def stable_order(self, key, counts) -> np.ndarray:
        """Stable order of the rows by key (0 <= key < len(counts), counts = bincount(key))."""
        _check(key, np.int64), _check(counts, np.int64)
        if key.ndim != 1 or counts.ndim != 1:
            raise ValueError("stable_order: 1-D key and counts")
        order, bounds = np.empty(len(key), dtype=np.int64), np.empty(2 * len(counts), dtype=np.int64)
        if self._stable_order(len(key), _ptr(key), len(counts), _ptr(counts), _ptr(bounds), _ptr(order)):
            raise ValueError("stable_order: a key out of range or counts that are not its bincount")
        return order

    def ops_direct(self, sid, u, idx, rsid, rcov, ridx, rts, pending: int, now: int, linger: int, inf: int):
        """analysis/ops_direct.py's matching (_opsmatch.c): (expire, compl_idx, compl_ts, final)
        per operation, or None when some space's rows or PSNs do not rise (numpy then)."""
        for a in (sid, u, idx, rsid, rcov, ridx, rts):
            _check(a, np.int64)
        n, nr = len(sid), len(rsid)
        if not (sid.ndim == rsid.ndim == 1 and len(u) == len(idx) == n and len(rcov) == len(ridx) == len(rts) == nr):
            raise ValueError("ops_direct: operation and response columns of other lengths")
        expire, compl_idx, compl_ts = (np.empty(n, np.int64) for _ in range(3))
        final = np.empty(n, np.bool_)
        if self._ops_direct(n, _ptr(sid), _ptr(u), _ptr(idx), nr, _ptr(rsid), _ptr(rcov), _ptr(ridx), _ptr(rts),
                            int(pending), int(now), int(linger), int(inf), _ptr(expire), _ptr(compl_idx),
                            _ptr(compl_ts), _ptr(final)):
            return None
        return expire, compl_idx, compl_ts, final

    def op_sums(self, key, span: int, nbytes, retrans, latency, edges, sub_bits: int, n_lat: int):
        """analysis/ops_stats.py's per-chunk sums (_opsmatch.c): per dense key 0..span-1 the
        operations, completed, retransmitted, bytes, latency maximum, size histogram
        (span, len(edges) + 1); and the latency histogram's (dense key * n_lat + bucket, count)
        pairs, each once. A key outside 0..span-1 is a ValueError."""
        for a, dtype in ((key, np.int64), (nbytes, np.int64), (retrans, np.bool_), (latency, np.int64),
                         (edges, np.int64)):
            _check(a, dtype)
        n = len(key)
        if not (key.ndim == 1 and len(nbytes) == len(retrans) == len(latency) == n and span >= 0):
            raise ValueError("op_sums: columns of other lengths")
        sums = np.zeros((5, span), np.int64)
        sums[4] = -1
        sizes = np.zeros((span, len(edges) + 1), np.int64)
        slots = np.full(1 << max(int(2 * n).bit_length(), 4), -1, np.int64)
        lkey, lcount = np.empty(n, np.int64), np.empty(n, np.int64)
        pairs = self._op_sums(n, _ptr(key), span, _ptr(nbytes), _ptr(retrans), _ptr(latency), _ptr(edges), len(edges),
                              int(sub_bits), int(n_lat), *(_ptr(row) for row in sums), _ptr(sizes), _ptr(slots),
                              len(slots) - 1, _ptr(lkey), _ptr(lcount))
        if pairs < 0:
            raise ValueError("op_sums: a key outside 0..span-1")
        return (*sums, sizes, lkey[:pairs], lcount[:pairs])

    def format_rows(self, kinds, decimals, ints, floats, str_off, str_bytes, cap: int) -> bytes | None:
        """CSV rows (_celltext.c): per column a kind code (0-5: int, nint, ts, qp, float,
        str) with, for kinds 0-3, int64 values; float: float64 values and 0-9 decimals; str:
        int64 codes into a table of texts (offsets, bytes). None where a kind has no such array;
        all columns of one length. None when `cap` bytes were not enough."""
        columns = list(zip(kinds, decimals, ints, floats, str_off, str_bytes))
        if not columns or not all(len(g) == len(columns) for g in (kinds, decimals, ints, floats, str_off, str_bytes)):
            raise ValueError("format_rows: one kind, decimals and array slot per column")
        n = len(ints[0] if ints[0] is not None else floats[0] if floats[0] is not None else ())
        for k, d, i, f, o, b in columns:
            values = f if k == 4 else i
            if k not in range(6) or type(d) is not int and not isinstance(d, np.integer) or not 0 <= d <= 9 \
                    or values is None:
                raise ValueError("format_rows: a kind 0-5 with its values, 0-9 decimals")
            _check(values, np.float64 if k == 4 else np.int64)
            if values.ndim != 1 or len(values) != n or k == 5 and not _codes_fit(i, o, b):
                raise ValueError("format_rows: columns of other lengths, or str codes outside their table")
        if cap < 1024:
            return None
        vp = self._ctypes.c_void_p
        ptrs = [(vp * len(columns))(*[None if a is None else _ptr(a) for a in group])
                for group in (ints, floats, str_off, str_bytes)]
        kinds, decimals = np.asarray(kinds, np.int64), np.asarray(decimals, np.int64)
        out = np.empty(cap, np.uint8)
        size = self._format_rows(n, len(columns), _ptr(kinds), _ptr(decimals), *ptrs, _ptr(out), cap)
        return None if size < 0 else out[:size].tobytes()


def _codes_fit(codes, offsets, data) -> bool:
    """A str column's codes index its table of offsets into data (the C code trusts them)."""
    if offsets is None or data is None:
        return False
    _check(offsets, np.int64), _check(data, np.uint8)
    if offsets.ndim != 1 or not len(offsets) or offsets[0] != 0 or offsets[-1] != len(data) \
            or (np.diff(offsets) < 0).any():
        return False
    return not len(codes) or 0 <= int(codes.min()) and int(codes.max()) < len(offsets) - 1


def _check(a: np.ndarray, dtype) -> None:
    if a.dtype != dtype or not a.flags.c_contiguous:
        raise TypeError(f"kernel argument: need contiguous {np.dtype(dtype)}, got {a.dtype}")


class _Numba:
    name = "numba"

    def __init__(self):
        from roceview.kernels import fused, layers, walk

        self.walk_pcap, self.walk_pcapng = walk.walk_pcap, walk.walk_pcapng
        self.parse_layers, self._decode = layers.parse_layers, fused.decode_records

    def decode_records(self, lo, hi, buf, rec_off, cap, wire, linktype, ports, ext, ext_total, rows, crc_table,
                       crc_fn, projection, o, meta, *outs):
        if o is None:                     # numba cannot take None: scratch offsets for rows lo..hi
            n = outs[-3].shape[0]         # lens
            o, meta = np.empty((n, len(consts.OUT_FIELDS)), np.int64), np.empty((n, len(consts.META_FIELDS)), np.int64)
        self._decode(lo, hi, buf, rec_off, cap, wire, linktype, ports, ext, ext_total, rows, crc_table, crc_fn,
                     projection, o, meta, *outs)


NO_KERNEL = ("no decode kernel: roceview's C extension was not built and numba is not installed; "
             "pip install 'roceview[numba]' (or reinstall roceview where a C compiler is available)")


def _load():
    choice = os.environ.get("ROCEVIEW_KERNEL", "")
    if choice != "numba":
        try:
            return _C()
        except (ImportError, OSError, AttributeError):
            if choice == "c":
                raise
    try:
        return _Numba()
    except ImportError as exc:
        if exc.name not in ("numba", "llvmlite"):
            raise
        from roceview.errors import RoceviewError

        raise RoceviewError(NO_KERNEL) from None        # the CLI prints it as one line, exit 2


KERNELS = _load()
BACKEND = KERNELS.name
walk_pcap, walk_pcapng = KERNELS.walk_pcap, KERNELS.walk_pcapng
parse_layers, decode_records = KERNELS.parse_layers, KERNELS.decode_records
flow_ids = getattr(KERNELS, "flow_ids", None)      # C only: analysis/ falls back to numpy
stable_order = getattr(KERNELS, "stable_order", None)
format_rows = getattr(KERNELS, "format_rows", None)   # C only: render/export.py falls back to numpy
ops_direct = getattr(KERNELS, "ops_direct", None)     # C only: analysis/ops_direct.py falls back to numpy
op_sums = getattr(KERNELS, "op_sums", None)           # C only: analysis/ops_stats.py falls back to numpy
