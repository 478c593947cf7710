"""RecordChunk -> Batch: layer offsets (numba), then column-wise field gathers driven by
the header declarations in `dissectors`."""
from __future__ import annotations

import numpy as np

from dissectors import ethernet, ib, ip, macctl, opcodes
from dissectors.fields import decode_columns, gather_windows
from roceview.batch import PROTO_CODE, Batch
from roceview.capture import layers
from roceview.capture.icrc import CRC_TABLES, compute_icrc
from roceview.capture.readers import RecordChunk

O = {name: k for k, name in enumerate(layers.OUT_FIELDS)}
M_PROTO, M_L3, M_ROCELEN, M_SESSION, M_INNERLEN, M_FRAG, M_TRUNC, M_ETYPE, M_WIRE, M_DECAP = range(10)
EXT_BY_NAME = {h.name: h for h in ib.EXT_HEADERS}


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
    _link_columns(b, chunk, o, meta, cap_end)
    _ip_columns(b, chunk, o, meta, cap_end)
    _transport_columns(b, chunk, o, meta, cap_end)
    _macctl_columns(b, chunk, o, cap_end)
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


def _link_columns(b: Batch, chunk, o, meta, cap_end) -> None:
    n = b.n
    decode_columns(ethernet.ETHERNET, chunk.buf, o[:, O["eth"]], cap_end, b.cols, b.valid, n)
    for hdr, key in ((ethernet.SLL, "sll"), (ethernet.SLL2, "sll2")):
        rows = o[:, O[key]]
        if (rows >= 0).any():
            tmp_c, tmp_v = {}, {}
            decode_columns(hdr, chunk.buf, rows, cap_end, tmp_c, tmp_v, n)
            _merge(b, tmp_c, tmp_v)
    decode_columns(ethernet.VLAN, chunk.buf, o[:, O["vlan1"]], cap_end, b.cols, b.valid, n)
    decode_columns(ethernet.INNER_VLAN, chunk.buf, o[:, O["vlan2"]], cap_end, b.cols, b.valid, n)
    decode_columns(ib.LRH, chunk.buf, o[:, O["lrh"]], cap_end, b.cols, b.valid, n)
    b.cols["_src_mac"] = b.cols.pop("src_mac")
    b.cols["_dst_mac"] = b.cols.pop("dst_mac")
    b.valid["_src_mac"] = b.valid.pop("src_mac")
    b.valid["_dst_mac"] = b.valid.pop("dst_mac")


def _merge(b: Batch, cols: dict, valid: dict) -> None:
    """Fill columns from another header on the rows where that header is valid."""
    for name, values in cols.items():
        ok = valid[name]
        if name in b.cols:
            b.cols[name] = np.where(ok, values, b.cols[name])
            b.valid[name] = b.valid[name] | ok
        else:
            b.cols[name], b.valid[name] = values, ok


def _ip_columns(b: Batch, chunk, o, meta, cap_end) -> None:
    n, l3, kind = b.n, o[:, O["l3"]], meta[:, M_L3]
    for hdr, k in ((ip.IPV4, layers.L3_IPV4), (ip.IPV6, layers.L3_IPV6), (ib.GRH, layers.L3_GRH)):
        cols, valid = {}, {}
        decode_columns(hdr, chunk.buf, np.where(kind == k, l3, -1), cap_end, cols, valid, n)
        _merge(b, cols, valid)
    for name in ("dscp", "ecn", "ttl", "flow_label"):
        b.cols.setdefault(name, np.zeros(n, np.uint32 if name == "flow_label" else np.uint8))
        b.valid.setdefault(name, np.zeros(n, bool))
    src = np.zeros((n, 16), np.uint8)
    dst = np.zeros((n, 16), np.uint8)
    v4 = (kind == layers.L3_IPV4) & (l3 + 20 <= cap_end)
    v6 = (kind != layers.L3_IPV4) & (l3 >= 0) & (l3 + 40 <= cap_end)
    if v4.any():
        w = gather_windows(chunk.buf, l3[v4] + 12, 8)
        src[np.ix_(v4, [10, 11])] = 0xFF
        dst[np.ix_(v4, [10, 11])] = 0xFF
        src[v4, 12:] = w[:, :4]
        dst[v4, 12:] = w[:, 4:]
    if v6.any():
        w = gather_windows(chunk.buf, l3[v6] + 8, 32)
        src[v6], dst[v6] = w[:, :16], w[:, 16:]
    lid = (o[:, O["lrh"]] >= 0) & ~v6 & b.valid["slid"]
    if lid.any():                           # IB without GRH: the LID is the address
        src[lid, 10:12] = dst[lid, 10:12] = 0xFE
        src[lid, 14:] = b.cols["slid"][lid].astype(">u2").view(np.uint8).reshape(-1, 2)
        dst[lid, 14:] = b.cols["dlid"][lid].astype(">u2").view(np.uint8).reshape(-1, 2)
    b.cols["_src_addr"], b.cols["_dst_addr"] = src, dst
    b.valid["_src_addr"] = b.valid["_dst_addr"] = v4 | v6 | lid
    decode_columns(ip.UDP, chunk.buf, o[:, O["udp"]], cap_end, b.cols, b.valid, n)


def _transport_columns(b: Batch, chunk, o, meta, cap_end) -> None:
    n, bth = b.n, o[:, O["bth"]]
    decode_columns(ib.BTH, chunk.buf, bth, cap_end, b.cols, b.valid, n)
    has = b.valid["opcode"]
    op = b.cols["opcode"]
    base = np.where(has, bth + 12, -1)
    for k, hdr in enumerate(ib.EXT_HEADERS):
        rel = EXT_OFFSETS[k][op]
        decode_columns(hdr, chunk.buf, np.where(has & (rel >= 0), base + rel, -1), cap_end, b.cols, b.valid, n)
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
                 CRC_TABLES, computed)
    b.cols["icrc_ok"] = computed == stored
    b.valid["icrc_ok"] = at >= 0


def _macctl_columns(b: Batch, chunk, o, cap_end) -> None:
    n, mc, proto = b.n, o[:, O["macctl"]], b.cols["_proto"]
    decode_columns(macctl.PFC, chunk.buf, np.where(proto == PROTO_CODE["pfc"], mc, -1), cap_end, b.cols, b.valid, n)
    decode_columns(macctl.PAUSE, chunk.buf, np.where(proto == PROTO_CODE["pause"], mc, -1), cap_end, b.cols, b.valid, n)


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
