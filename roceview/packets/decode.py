"""RecordChunk -> Batch: one pass of the decode kernel (kernels/backend.py: layer offsets,
every declared field as generated from the header declarations in `dissectors` by
kernels/fieldgen.py, addresses, lengths, ICRC), then the rare protocols in Python."""
from __future__ import annotations

import os
import queue
import threading

import numpy as np

from dissectors import cm, ethernet, ib, opcodes
from dissectors.fields import column_dtype, extract
from roceview.packets.batch import PROTO_CODE, Batch
from roceview.kernels import consts
from roceview.kernels.crc import CRC_TABLES, NATIVE_CRC32
from roceview.kernels.fieldgen import DTYPES, PLACEMENTS, column_layout
from roceview.kernels import backend as kernels
from roceview.kernels.backend import decode_records
from roceview.capture.readers import RecordChunk
from roceview.packets.times import DIGITS_COLUMN

O = {name: k for k, name in enumerate(consts.OUT_FIELDS)}
EXT_BY_NAME = {h.name: h for h in ib.EXT_HEADERS}


class _Layout:
    """The output matrices of one projection (consts.PROJECTIONS; None: every column)."""

    def __init__(self, projection: str | None):
        self.code = consts.PROJECTION_CODE[projection]
        self.columns = column_layout(projection)
        self.counts = {k: sum(1 for v in self.columns.values() if v[0] == k) for k in DTYPES}
        c = self.columns                    # the rows the kernel itself reads: see fused.decode_records
        self.rows = np.array([c["opcode"][1], c["pad"][1], c["slid"][1], c["dlid"][1], c["opcode"][2],
                              c["slid"][2]], np.int64)


LAYOUTS = {p: _Layout(p) for p in consts.PROJECTION_CODE}
LAYOUT = LAYOUTS[None].columns  # every column -> (matrix, row, validity row): the kernels' full layout
LENS_ROWS, FLAG_ROWS = 6, 9  # kernel outputs per record: see kernels/fused.py decode_records
SPLIT_MIN = 4096
THREADS = min(2, os.cpu_count() or 1)
BOOL_COLUMNS = {f.column for h, _ in PLACEMENTS for f in h.columns if f.kind == "bool"}


def _ext_layout():
    """Per opcode: offset of each extended header after the BTH (-1 absent), total length."""
    offs = np.full((len(ib.EXT_HEADERS), 256), -1, np.int64)
    total = np.zeros(256, np.int64)
    for op, (_, _, names) in opcodes.OPCODES.items():
        pos = 0
        for name in names:
            offs[ib.EXT_HEADERS.index(EXT_BY_NAME[name]), op] = pos
            pos += EXT_BY_NAME[name].length
        total[op] = pos
    return offs, total


EXT_OFFSETS, EXT_TOTAL = _ext_layout()


def port_table(roce_ports=()) -> np.ndarray:
    table = np.zeros(65536, dtype=np.bool_)
    table[ib.ROCE_V2_UDP_PORT] = True
    for p in roce_ports:
        table[int(p)] = True
    return table


def decode_chunk(chunk: RecordChunk, ports: np.ndarray, first_frame: int, projection: str | None = None) -> Batch:
    """The chunk's packets table: every column, or with `projection` (consts.PROJECTIONS) only
    that projection's declared columns (and every column not taken from a header field)."""
    n = chunk.n
    layout = LAYOUTS[projection]
    o = meta = None                          # layer offsets: kept on the kernel's stack
    mats = {k: np.zeros((c, n), np.dtype(k.replace("u", "uint"))) for k, c in layout.counts.items()}
    ok = np.zeros((len(layout.columns), n), np.bool_)
    src, dst = np.zeros((n, 16), np.uint8), np.zeros((n, 16), np.uint8)
    addr_ok = np.zeros(n, np.bool_)
    lens = np.zeros((LENS_ROWS, n), np.uint32).T
    flags = np.zeros((FLAG_ROWS, n), np.bool_).T
    icrc = np.zeros(n, np.uint32)
    args = (chunk.buf, chunk.off, chunk.cap, chunk.wire, chunk.linktype, ports, EXT_OFFSETS, EXT_TOTAL,
            layout.rows, CRC_TABLES, NATIVE_CRC32, layout.code, o, meta,
            mats["u8"], mats["u16"], mats["u32"], mats["u64"], ok, src, dst, addr_ok, lens, flags, icrc)
    _run_split(n, args)
    b = Batch(n)
    cols, valid = b.cols, b.valid
    for name, (key, row, vrow) in layout.columns.items():
        values = mats[key][row]
        cols[name] = values.view(np.bool_) if name in BOOL_COLUMNS else values
        valid[name] = ok[vrow]
    for raw, name in (("_src_mac", "src_mac"), ("_dst_mac", "dst_mac")):
        cols[raw], valid[raw] = cols.pop(name), valid.pop(name)
    cols["frame"] = np.arange(first_frame, first_frame + n, dtype=np.int64)
    cols["ts_ns"] = chunk.ts
    if chunk.digits is not None:            # the file's time precision (packets/times.py)
        cols[DIGITS_COLUMN] = chunk.digits
    cols["interface"] = chunk.iface
    cols["_src_addr"], cols["_dst_addr"] = src, dst
    valid["_src_addr"] = valid["_dst_addr"] = addr_ok
    cols["wire_len"], cols["cap_len"] = lens[:, 0], lens[:, 1]
    cols["payload_len"], valid["payload_len"] = lens[:, 2], flags[:, 1]
    cols["truncated"] = flags[:, 0]
    cols["icrc"], valid["icrc"] = icrc, flags[:, 2]
    cols["icrc_ok"], valid["icrc_ok"] = flags[:, 3], flags[:, 4]
    _meta_columns(b, lens, flags)
    _lldp_columns(b, chunk, ports)
    _cm_columns(b, chunk, ports, projection)
    _llc_columns(b, chunk, ports)
    return b


def _offsets(chunk: RecordChunk, rows: np.ndarray, ports: np.ndarray) -> np.ndarray:
    """Layer offsets (consts.OUT_FIELDS) of a few rows, parsed again: rarer than keeping
    120 bytes a packet for every packet."""
    o = np.empty((len(rows), len(consts.OUT_FIELDS)), np.int64)
    meta = np.empty((len(rows), len(consts.META_FIELDS)), np.int64)
    kernels.parse_layers(chunk.buf, chunk.off[rows], chunk.cap[rows], chunk.linktype[rows], ports, o, meta)
    return o


def _run_split(n: int, args) -> None:
    """The kernel releases the GIL: big chunks are decoded by two threads, one half each."""
    if n < SPLIT_MIN or THREADS < 2:
        decode_records(0, n, *args)
        return
    half = n // 2
    done = _submit(decode_records, half, n, *args)
    decode_records(0, half, *args)
    error = done.get()
    if error is not None:
        raise error


_JOBS = None
_JOBS_LOCK = threading.Lock()


def _submit(fn, *args) -> queue.SimpleQueue:
    """Run fn(*args) on the one decode worker thread; returns a queue that receives None or
    the exception. (Not concurrent.futures: it imports logging, ~11 ms of every run.)"""
    global _JOBS
    with _JOBS_LOCK:
        if _JOBS is None:
            _JOBS = queue.SimpleQueue()
            threading.Thread(target=_work, args=(_JOBS,), name="roceview-decode", daemon=True).start()
        jobs = _JOBS
    done: queue.SimpleQueue = queue.SimpleQueue()
    jobs.put((fn, args, done))
    return done


def _work(jobs: queue.SimpleQueue) -> None:
    while True:
        fn, args, done = jobs.get()
        try:
            fn(*args)
            done.put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            done.put(exc)
        # Drop the job before waiting for the next: its arguments hold the chunk's buffer (a
        # view of the capture's memory map, which could not be closed) and ~30 MB of outputs.
        del fn, args, done


def _forget_worker() -> None:
    """A forked child has no worker thread: start a new one on its first decode."""
    global _JOBS, _JOBS_LOCK
    _JOBS, _JOBS_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker)


def _meta_columns(b: Batch, lens: np.ndarray, flags: np.ndarray) -> None:
    """The kernel's meta_columns rows (lens 3-5, flags 5-8), contiguous: cheap to narrow."""
    b.cols["_proto"] = lens[:, 3].astype(np.uint8)
    b.cols["mirror_session"], b.valid["mirror_session"] = lens[:, 4].astype(np.uint16), flags[:, 5]
    b.cols["ethertype"], b.valid["ethertype"] = lens[:, 5].astype(np.uint16), flags[:, 6]
    b.cols["ip_frag"], b.valid["ip_frag"] = flags[:, 7], flags[:, 8]


def _lldp_columns(b: Batch, chunk, ports) -> None:
    from dissectors import lldp

    rows = np.flatnonzero(b.cols["_proto"] == PROTO_CODE["lldp"])
    out = np.zeros(b.n, np.uint8)
    ok = np.zeros(b.n, bool)
    at = _offsets(chunk, rows, ports)[:, O["lldp"]] if len(rows) else rows
    for i, start in zip(rows, at):          # LLDP is rare: one frame every few seconds
        frame = chunk.buf[start:chunk.off[i] + chunk.cap[i]].tobytes()
        bitmap = lldp.pfc_enable(frame, 0)
        if bitmap is not None:
            out[i], ok[i] = bitmap, True
    b.cols["lldp_pfc_enable"], b.valid["lldp_pfc_enable"] = out, ok


class _Zeros:
    """Read-only columns of zeros that cost no memory (one element seen n times), one per dtype,
    shared by every column of that dtype: the rare protocols' columns of a batch without such a
    frame (nearly every batch). Nothing writes a decoded column in place."""

    def __init__(self, n: int):
        self.n, self.views = n, {}

    def __call__(self, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        if dtype not in self.views:
            one = np.full(1, None, object) if dtype == object else np.zeros(1, dtype)
            self.views[dtype] = np.broadcast_to(one, (self.n,))
        return self.views[dtype]


# the MAD and CM columns of the packets table, from the declarations (dissectors/cm.py)
CM_COLUMNS = {f.column: column_dtype(f) for h in (cm.MAD,) + cm.HEADERS for f in h.columns}
# the MAD's 256 bytes (full projection: object column, `bytes` on a MAD's row, None elsewhere: 8 bytes a
# row where a concatenation or a selection makes it a real column), and whether all 256 were captured
MAD_BYTES, MAD_WHOLE = "_cm_mad", "_mad_whole"
UD_SEND_ONLY = 0x64


def _cm_columns(b: Batch, chunk, ports, projection) -> None:
    """MADs on QP0/QP1 (UD SEND_ONLY + DETH + MAD, IBTA 13.5.1): rare, so their rows are parsed again
    and the fields of their message (dissectors/cm.py) read from a small matrix of their bytes.
    Without a MAD in the batch every MAD column is a zero view. The full projection also keeps
    each MAD's 256 bytes (`_cm_mad`: the display filter's and -T fields' infiniband.cm.* fields)."""
    rows = np.flatnonzero(b.cols["opcode"] == UD_SEND_ONLY)       # UD SEND_ONLY: few, filter those
    rows = rows[b.mask("opcode")[rows] & b.mask("dest_qp")[rows] & (b.cols["dest_qp"][rows] <= cm.GSI_QP)]
    n, names = b.n, list(CM_COLUMNS) + [MAD_WHOLE] + ([MAD_BYTES] if projection is None else [])
    if not len(rows):
        zeros = _Zeros(n)
        for name in names:
            b.cols[name] = zeros(CM_COLUMNS.get(name, np.bool_))
            b.valid[name] = zeros(np.bool_)
        return
    mads, room = _mad_bytes(chunk, rows, ports)
    for name in names:
        b.cols[name] = np.full(n, None, object) if name == MAD_BYTES else np.zeros(n, CM_COLUMNS.get(name, np.bool_))
        b.valid[name] = np.zeros(n, bool)
    _fill(b, rows, mads, room, cm.MAD, 0)
    is_cm = mads[:, 1] == cm.MGMT_CLASS_CM
    attr = mads[:, 16].astype(np.uint16) << 8 | mads[:, 17]
    for message in cm.MESSAGES.values():
        at = np.flatnonzero(is_cm & (attr == message.attr) & (room >= cm.MAD_HEADER_LEN))
        _fill(b, rows[at], mads[at], room[at], message.header, cm.MAD_HEADER_LEN)
    whole = room >= cm.MAD_LEN
    b.cols[MAD_WHOLE][rows], b.valid[MAD_WHOLE][rows] = whole, True
    if projection is None:
        b.cols[MAD_BYTES][rows] = [row.tobytes() for row in mads]
        b.valid[MAD_BYTES][rows] = whole


def _mad_bytes(chunk, rows: np.ndarray, ports) -> tuple[np.ndarray, np.ndarray]:
    """(k, 256) bytes of each row's MAD (zero past the captured bytes) and how many were captured."""
    at = _offsets(chunk, rows, ports)[:, O["bth"]] + 12 + 8          # BTH, DETH
    end = chunk.off[rows] + chunk.cap[rows]
    room = np.clip(end - at, 0, cm.MAD_LEN)
    mads = np.zeros((len(rows), cm.MAD_LEN), np.uint8)
    for j, (start, size) in enumerate(zip(at.tolist(), room.tolist())):
        mads[j, :size] = chunk.buf[start:start + size]
    return mads, room


def _fill(b: Batch, rows: np.ndarray, mads: np.ndarray, room: np.ndarray, header, base: int) -> None:
    """The header's columns at `rows` (valid where the field was captured)."""
    for f in header.columns:
        b.cols[f.column][rows] = extract(mads, f, base)
        b.valid[f.column][rows] = room >= base + f.end


LLC_COLUMNS = {f.column: column_dtype(f) for h in (ethernet.LLC, ethernet.STP) for f in h.columns}


def _llc_columns(b: Batch, chunk, ports) -> None:
    """IEEE 802.3 frames (a type field below 0x0600 is a length): the LLC header and, for a
    spanning tree BPDU, its fields; rare on a RoCE link, so parsed again like the MADs."""
    rows = np.flatnonzero(b.cols["ethertype"] < ethernet.ETHERTYPE_MIN)      # few: the valid and proto tests on them
    rows = rows[b.mask("ethertype")[rows] & (b.cols["_proto"][rows] == PROTO_CODE["other"])]
    o = _offsets(chunk, rows, ports) if len(rows) else np.zeros((0, len(consts.OUT_FIELDS)), np.int64)
    keep = o[:, O["eth"]] >= 0                                   # Ethernet: not a cooked capture's protocol
    rows, o = rows[keep], o[keep]
    if not len(rows):
        zeros = _Zeros(b.n)
        for name, dtype in LLC_COLUMNS.items():
            b.cols[name], b.valid[name] = zeros(dtype), zeros(np.bool_)
        return
    for name, dtype in LLC_COLUMNS.items():
        b.cols[name], b.valid[name] = np.zeros(b.n, dtype), np.zeros(b.n, bool)
    at = np.maximum.reduce([o[:, O["eth"]] + 14, o[:, O["vlan1"]] + 4, o[:, O["vlan2"]] + 4])
    room = np.clip(chunk.off[rows] + chunk.cap[rows] - at, 0, 3 + ethernet.STP.length)
    head = np.zeros((len(rows), 3 + ethernet.STP.length), np.uint8)
    for j, (start, size) in enumerate(zip(at.tolist(), room.tolist())):
        head[j, :size] = chunk.buf[start:start + size]
    _fill(b, rows, head, room, ethernet.LLC, 0)
    stp = np.flatnonzero((head[:, 0] == ethernet.SAP_STP) & (head[:, 1] == ethernet.SAP_STP)
                         & (head[:, 2] == ethernet.LLC_UI) & (room >= 3))
    _fill(b, rows[stp], head[stp], room[stp], ethernet.STP, 3)
