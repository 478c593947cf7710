"""RecordChunk -> Batch: layer offsets (numba), then every declared field in one pass of a
kernel generated from the header declarations in `dissectors` (see capture/fieldgen.py)."""
from __future__ import annotations

import numpy as np

from dissectors import ib, opcodes
from dissectors.fields import gather_windows
from roceview.batch import Batch
from roceview.capture import _fields_kernel as K
from roceview.capture import layers
from roceview.capture.fieldgen import PLACEMENTS
from roceview.capture.icrc import CRC_TABLES, NATIVE_CRC32, compute_icrc
from roceview.capture.readers import RecordChunk

O = {name: k for k, name in enumerate(layers.OUT_FIELDS)}
M_PROTO, M_L3, M_ROCELEN, M_SESSION, M_INNERLEN, M_FRAG, M_TRUNC, M_ETYPE, M_WIRE, M_DECAP = range(10)
EXT_BY_NAME = {h.name: h for h in ib.EXT_HEADERS}
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


def decode_chunk(chunk: RecordChunk, ports: np.ndarray, first_frame: int) -> Batch:
    n = chunk.n
    o = np.empty((n, len(layers.OUT_FIELDS)), np.int64)
    meta = np.empty((n, 10), np.int64)
    layers.parse_layers(chunk.buf, chunk.off, chunk.cap, chunk.linktype, ports, o, meta)
    cap_end = chunk.off + chunk.cap
    b = Batch(n)
    cols, valid = b.cols, b.valid
    cols["frame"] = np.arange(first_frame, first_frame + n, dtype=np.int64)
    cols["ts_ns"] = chunk.ts
    cols["interface"] = chunk.iface
    _lengths(b, chunk, o, meta, cap_end)
    _fields(b, chunk, o, meta, cap_end)
    _addresses(b, chunk, o, meta, cap_end)
    _transport_columns(b, chunk, o, meta, cap_end)
    _lldp_columns(b, chunk, o, cap_end)
    return b


def _lengths(b: Batch, chunk, o, meta, cap_end) -> None:
    start = np.where(o[:, O["eth"]] >= 0, o[:, O["eth"]], chunk.off)
    start = np.where(o[:, O["lrh"]] >= 0, o[:, O["lrh"]], start)
    decap = meta[:, M_DECAP] == 1
    wire = chunk.wire.astype(np.int64)
    override = meta[:, M_WIRE] >= 0
    wire = np.where(override, meta[:, M_WIRE], wire)
    inner = np.where(meta[:, M_INNERLEN] >= 0, meta[:, M_INNERLEN], wire - (start - chunk.off))
    wire = np.where(decap, inner, wire)
    cap = cap_end - start
    b.cols["wire_len"] = wire.clip(0).astype(np.uint32)
    b.cols["cap_len"] = cap.astype(np.uint32)
    roce_end = np.where(o[:, O["bth"]] >= 0, o[:, O["bth"]] + meta[:, M_ROCELEN], -1)
    b.cols["truncated"] = (cap < wire) | (meta[:, M_TRUNC] == 1) | (roce_end > cap_end)
    b.cols["_proto"] = meta[:, M_PROTO].astype(np.uint8)
    session = meta[:, M_SESSION]
    b.cols["mirror_session"] = session.clip(0).astype(np.uint16)
    b.valid["mirror_session"] = session >= 0
    b.cols["ethertype"] = meta[:, M_ETYPE].clip(0).astype(np.uint16)
    b.valid["ethertype"] = meta[:, M_ETYPE] >= 0
    b.cols["ip_frag"] = meta[:, M_FRAG] == 1
    b.valid["ip_frag"] = meta[:, M_L3] == layers.L3_IPV4


def _fields(b: Batch, chunk, o, meta, cap_end) -> None:
    """Every declared column in one pass (kernel generated from the declarations)."""
    n = b.n
    mats = {k: np.zeros((c, n), np.dtype(k.replace("u", "uint"))) for k, c in K.COUNTS.items()}
    ok = np.zeros((len(K.LAYOUT), n), np.bool_)
    K.extract_fields(chunk.buf, o, meta, cap_end, EXT_OFFSETS, mats["u8"], mats["u16"], mats["u32"], mats["u64"], ok)
    for name, (key, row, vrow) in K.LAYOUT.items():
        values = mats[key][row]
        b.cols[name] = values.view(np.bool_) if name in BOOL_COLUMNS else values
        b.valid[name] = ok[vrow]
    for raw, name in (("_src_mac", "src_mac"), ("_dst_mac", "dst_mac")):
        b.cols[raw], b.valid[raw] = b.cols.pop(name), b.valid.pop(name)


def _addresses(b: Batch, chunk, o, meta, cap_end) -> None:
    n = b.n
    src = np.zeros((n, 16), np.uint8)
    dst = np.zeros((n, 16), np.uint8)
    ok = np.zeros(n, np.bool_)
    layers.extract_addresses(chunk.buf, o, meta, cap_end, b.cols["slid"], b.cols["dlid"], b.valid["slid"],
                             src, dst, ok)
    b.cols["_src_addr"], b.cols["_dst_addr"] = src, dst
    b.valid["_src_addr"] = b.valid["_dst_addr"] = ok


def _transport_columns(b: Batch, chunk, o, meta, cap_end) -> None:
    has = b.valid["opcode"]
    op = b.cols["opcode"]
    roce_len = meta[:, M_ROCELEN]
    pay = roce_len - 12 - EXT_TOTAL[op] - b.cols["pad"] - ib.ICRC_LEN
    b.cols["payload_len"] = pay.clip(0).astype(np.uint32)
    b.valid["payload_len"] = has & (roce_len >= 16)
    _icrc(b, chunk, o, meta, cap_end, has & (roce_len >= 16))


def _icrc(b: Batch, chunk, o, meta, cap_end, has) -> None:
    n, bth = b.n, o[:, O["bth"]]
    at = np.where(has, bth + meta[:, M_ROCELEN] - ib.ICRC_LEN, -1)
    stored_ok = has & (at + 4 <= cap_end)
    stored = np.zeros(n, np.uint32)
    if stored_ok.any():
        stored[stored_ok] = gather_windows(chunk.buf, at[stored_ok], 4).copy().view("<u4").reshape(-1)
    b.cols["icrc"], b.valid["icrc"] = stored, stored_ok
    computed = np.zeros(n, np.uint32)
    at = np.where(stored_ok & ~b.cols["truncated"], at, -1)
    compute_icrc(chunk.buf, o[:, O["l3"]], meta[:, M_L3], o[:, O["udp"]], o[:, O["lrh"]], bth, at,
                 CRC_TABLES, NATIVE_CRC32, computed)
    b.cols["icrc_ok"] = computed == stored
    b.valid["icrc_ok"] = at >= 0


def _lldp_columns(b: Batch, chunk, o, cap_end) -> None:
    from dissectors import lldp

    rows = np.flatnonzero(o[:, O["lldp"]] >= 0)
    out = np.zeros(b.n, np.uint8)
    ok = np.zeros(b.n, bool)
    for i in rows:                          # LLDP is rare: one frame every few seconds
        frame = chunk.buf[o[i, O["lldp"]]:cap_end[i]].tobytes()
        bitmap = lldp.pfc_enable(frame, 0)
        if bitmap is not None:
            out[i], ok[i] = bitmap, True
    b.cols["lldp_pfc_enable"], b.valid["lldp_pfc_enable"] = out, ok
