"""Per-frame header offsets: the branchy, sequential part of decoding (numba).

`parse_layers` walks each frame's headers (link layer, VLAN tags, remote-mirror
encapsulations, IP, UDP, GRH/LRH) and writes absolute offsets of every header it finds
(-1 where absent). The field values themselves are then gathered column-wise by
`dissectors.fields.decode_columns` from those offsets.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from roceview.kernels.consts import (ERF_TYPE_ETH, ERF_TYPE_INFINIBAND, ERF_TYPE_INFINIBAND_LINK, L3_GRH,
                                     L3_IPV4, L3_IPV6, LINKTYPE_ERF, LINKTYPE_ETHERNET, LINKTYPE_INFINIBAND,
                                     LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, P_IB, P_LLDP, P_OTHER, P_PAUSE,
                                     P_PFC, P_V1, P_V2)

_jit = nb.njit(cache=True, nogil=True, boundscheck=False)


@_jit
def _be16(buf, p):
    return (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])


@_jit
def _is_vlan(et):
    return et == 0x8100 or et == 0x88A8 or et == 0x9100


@_jit
def _link(buf, i, p, end, lt, o):
    """Start of the link layer; returns (next offset, ethertype or -1, wire override)."""
    if lt == LINKTYPE_ETHERNET:
        o[i, 0] = p
        return p, -2, -1
    if lt == LINKTYPE_LINUX_SLL and p + 16 <= end:
        o[i, 1] = p
        return p + 16, _be16(buf, p + 14), -1
    if lt == LINKTYPE_LINUX_SLL2 and p + 20 <= end:
        o[i, 2] = p
        return p + 20, _be16(buf, p), -1
    if lt == LINKTYPE_INFINIBAND:
        o[i, 7] = p
        return p, -3, -1
    if lt == LINKTYPE_ERF and p + 16 <= end:
        t = buf[p + 8]
        h = p + 16
        ext = t & 0x80
        while ext and h + 8 <= end:          # ERF extension headers, 8 bytes each
            ext = buf[h] & 0x80
            h += 8
        wlen = _be16(buf, p + 14)
        t = t & 0x7F
        if t == ERF_TYPE_INFINIBAND or t == ERF_TYPE_INFINIBAND_LINK:
            o[i, 7] = h
            return h, -3, wlen
        if t == ERF_TYPE_ETH:                # 2 bytes offset/pad before the frame
            o[i, 0] = h + 2
            return h + 2, -2, wlen - 2
    return p, -1, -1


@_jit
def _ib(buf, i, p, end, o, meta):
    """Native IB: LRH, optional GRH (LNH = 3), BTH (IBTA 7.7.1)."""
    if p + 8 > end:
        return
    lnh = buf[p + 1] & 3
    pktlen = (_be16(buf, p + 4) & 0x7FF) * 4
    meta[i, 0] = P_IB
    b = p + 8
    if lnh == 3:
        o[i, 5] = b
        meta[i, 1] = L3_GRH
        b += 40
    elif lnh != 2:
        return
    o[i, 8] = b
    meta[i, 2] = pktlen - (b - p)          # BTH .. ICRC inclusive


@_jit
def _ip(buf, i, q, end, ipv6, o, meta, ports):
    """IPv4/IPv6 then UDP; returns the offset of a decapsulated frame or -1."""
    o[i, 5] = q
    if ipv6:
        meta[i, 1] = L3_IPV6
        if q + 40 > end:
            return -1
        nh = buf[q + 6]
        l4 = q + 40
        meta[i, 4] = (l4 - o[i, 0]) + _be16(buf, q + 4) if o[i, 0] >= 0 else -1
    else:
        meta[i, 1] = L3_IPV4
        if q + 20 > end:
            return -1
        nh = buf[q + 9]
        l4 = q + (buf[q] & 0x0F) * 4
        meta[i, 4] = (q - o[i, 0]) + _be16(buf, q + 2) if o[i, 0] >= 0 else -1
        if (_be16(buf, q + 6) & 0x3FFF) != 0:        # MF or fragment offset: not decoded
            meta[i, 5] = 1
            return -1
    if nh == 17 and l4 + 8 <= end:
        o[i, 6] = l4
        dport = _be16(buf, l4 + 2)
        if ports[dport]:
            o[i, 8] = l4 + 8
            meta[i, 0] = P_V2
            meta[i, 2] = _be16(buf, l4 + 4) - 8
        elif dport == 4789 and l4 + 16 <= end:       # VXLAN, RFC 7348
            o[i, 14] = l4 + 8
            meta[i, 3] = ((np.int64(buf[l4 + 13]) << 8) | buf[l4 + 14]) & 0xFFFF
            return l4 + 16
    elif nh == 47 and l4 + 4 <= end:
        return _gre(buf, i, l4, end, o, meta)
    return -1


@_jit
def _gre(buf, i, g, end, o, meta):
    """GRE + ERSPAN (I/II: 0x88BE, III: 0x22EB) or transparent bridging (0x6558)."""
    o[i, 11] = g
    flags = _be16(buf, g)
    proto = _be16(buf, g + 2)
    h = g + 4 + (4 if flags & 0x8000 else 0) + (4 if flags & 0x2000 else 0)
    seq = flags & 0x1000
    h += 4 if seq else 0
    if proto == 0x6558:
        return h
    if proto == 0x88BE:
        if not seq:                      # type I: no ERSPAN header at all
            return h
        if h + 8 > end:
            return -1
        o[i, 12] = h
        meta[i, 3] = _be16(buf, h + 2) & 0x3FF
        meta[i, 6] = (buf[h + 2] >> 2) & 1
        return h + 8
    if proto == 0x22EB:
        if h + 12 > end:
            return -1
        o[i, 13] = h
        meta[i, 3] = _be16(buf, h + 2) & 0x3FF
        meta[i, 6] = (buf[h + 2] >> 2) & 1
        return h + 12 + (8 if buf[h + 11] & 1 else 0)   # O bit: platform sub-header
    return -1


@_jit
def _ethernet(buf, i, e, et, end, o, meta, ports):
    """From an Ethernet header (or an ethertype already known) to the next layer."""
    q = e
    if et == -2:
        if e + 14 > end:
            return -1
        et = _be16(buf, e + 12)
        q = e + 14
    nv = 0
    while _is_vlan(et) and q + 4 <= end and nv < 2:
        o[i, 3 + nv] = q
        et = _be16(buf, q + 2)
        q += 4
        nv += 1
    meta[i, 7] = et
    if et == 0x0800 or et == 0x86DD:
        return _ip(buf, i, q, end, et == 0x86DD, o, meta, ports)
    if et == 0x8915:                                  # RoCEv1: GRH then BTH, IBTA A16
        o[i, 5] = q
        meta[i, 1] = L3_GRH
        if q + 40 <= end:
            o[i, 8] = q + 40
            meta[i, 0] = P_V1
            meta[i, 2] = _be16(buf, q + 4)
            meta[i, 4] = (q - e) + 40 + meta[i, 2] if o[i, 0] >= 0 else -1
    elif et == 0x8808 and q + 2 <= end:
        o[i, 9] = q
        op = _be16(buf, q)
        meta[i, 0] = P_PFC if op == 0x0101 else P_PAUSE if op == 0x0001 else P_OTHER
    elif et == 0x88CC:
        o[i, 10] = q
        meta[i, 0] = P_LLDP
    return -1


@_jit
def parse_one(buf, i, p, end, lt, ports, o, meta):
    """Offsets of frame i's headers into o[i] (names: OUT_FIELDS) and meta[i]: proto, l3
    kind, roce_len (BTH to ICRC inclusive), mirror session, inner length from IP/GRH
    lengths, ip_frag, ERSPAN truncation bit, ethertype, link-layer wire length override,
    decapsulated flag."""
    for k in range(o.shape[1]):
        o[i, k] = -1
    for k in range(meta.shape[1]):
        meta[i, k] = -1
    meta[i, 0] = P_OTHER
    meta[i, 5] = meta[i, 6] = meta[i, 9] = 0
    start, et, wlen = _link(buf, i, p, end, lt, o)
    meta[i, 8] = wlen
    if et == -3:
        _ib(buf, i, start, end, o, meta)
        return
    if et == -1:
        return
    nxt = _ethernet(buf, i, start, et, end, o, meta, ports)
    for _depth in range(3):                     # nested mirror encapsulations
        if nxt < 0:
            break
        session, trunc = meta[i, 3], meta[i, 6]
        o[i] = -1
        meta[i] = -1
        meta[i, 0] = P_OTHER
        meta[i, 3], meta[i, 5], meta[i, 6], meta[i, 9] = session, 0, trunc, 1
        o[i, 0] = nxt
        nxt = _ethernet(buf, i, nxt, -2, end, o, meta, ports)


@_jit
def parse_layers(buf, rec_off, cap, linktype, ports, o, meta):
    """parse_one for every record (the detail tree uses this; decoding uses the fused
    kernel in capture/fused.py)."""
    for i in range(rec_off.shape[0]):
        parse_one(buf, i, rec_off[i], rec_off[i] + cap[i], linktype[i], ports, o, meta)


@_jit
def address_one(buf, i, o, meta, ce, slid, dlid, lid_ok, src, dst, ok):
    """Endpoint addresses as 16 bytes: IPv4 as ::ffff:a.b.c.d (so that an IPv4-mapped GID
    of RoCEv1 is the same endpoint), IPv6 and GIDs as they are, and for IB without a GRH
    the LID marked by 0xfefe in bytes 10-11 (written `lid:0xNNNN`)."""
    q = o[i, 5]
    kind = meta[i, 1]
    if q >= 0 and kind == L3_IPV4 and q + 20 <= ce:
        src[i, 10] = src[i, 11] = dst[i, 10] = dst[i, 11] = 0xFF
        for k in range(4):
            src[i, 12 + k] = buf[q + 12 + k]
            dst[i, 12 + k] = buf[q + 16 + k]
        ok[i] = True
    elif q >= 0 and kind != L3_IPV4 and q + 40 <= ce:
        for k in range(16):
            src[i, k] = buf[q + 8 + k]
            dst[i, k] = buf[q + 24 + k]
        ok[i] = True
    elif o[i, 7] >= 0 and lid_ok:
        src[i, 10] = src[i, 11] = dst[i, 10] = dst[i, 11] = 0xFE
        src[i, 14], src[i, 15] = slid >> 8, slid & 0xFF
        dst[i, 14], dst[i, 15] = dlid >> 8, dlid & 0xFF
        ok[i] = True
