/* The decode kernels, compiled ahead of time (no numba import or JIT-cache load at run
   time: docs/performance.md). Called through ctypes (roceview/kernels/backend.py),
   which releases the GIL, so two threads can decode disjoint rows of one chunk.

   Mirrors the numba fallback line for line (walk.py, layers.py, fused.py, icrc.py); a test
   decodes every sample and real capture with both and requires identical columns.
   The field extraction (extract_one) and every shared constant come from the generated
   _fields_kernel.h (python -m roceview.kernels.fieldgen): headers are declared once. The
   record walks are in _walk.c, the analysis's flow index in _flowindex.c, the CSV text in
   _celltext.c: one extension. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_fields_kernel.h"

#define PREFETCH_AHEAD 4
#define NATIVE_CRC_MIN 256           /* shorter bodies (ACKs: 4 bytes): two zng_crc32 calls cost more
                                        than the slice-by-8 loop over ~52 bytes (-4 % decode, snaplen 128) */

typedef uint32_t (*crc32_fn)(uint32_t crc, const uint8_t *buf, uint32_t len);

static inline int64_t be16(const uint8_t *b, int64_t p) { return ((int64_t)b[p] << 8) | b[p + 1]; }

/* ---- header offsets (layers.py): oi = o[i] (N_OUT), mi = meta[i] (N_META) ---- */

static inline int is_vlan(int64_t et)
{
    return et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ || et == ETHERTYPE_QINQ_OLD;
}

/* Start of the link layer; *et = ethertype, -2 (an Ethernet header follows), -3 (LRH) or -1. */
static int64_t link_layer(const uint8_t *buf, int64_t p, int64_t end, int64_t lt, int64_t *oi,
                          int64_t *et, int64_t *wlen)
{
    *wlen = -1;
    if (lt == LINKTYPE_ETHERNET) { oi[O_ETH] = p; *et = -2; return p; }
    if (lt == LINKTYPE_LINUX_SLL && p + 16 <= end) { oi[O_SLL] = p; *et = be16(buf, p + 14); return p + 16; }
    if (lt == LINKTYPE_LINUX_SLL2 && p + 20 <= end) { oi[O_SLL2] = p; *et = be16(buf, p); return p + 20; }
    if (lt == LINKTYPE_INFINIBAND) { oi[O_LRH] = p; *et = -3; return p; }
    if (lt == LINKTYPE_ERF && p + 16 <= end) {
        int t = buf[p + 8], ext = t & 0x80;
        int64_t h = p + 16;
        while (ext && h + 8 <= end) {               /* ERF extension headers, 8 bytes each */
            ext = buf[h] & 0x80;
            h += 8;
        }
        int64_t wl = be16(buf, p + 14);
        t &= 0x7F;
        if (t == ERF_TYPE_INFINIBAND || t == ERF_TYPE_INFINIBAND_LINK) { oi[O_LRH] = h; *et = -3; *wlen = wl; return h; }
        if (t == ERF_TYPE_ETH) { oi[O_ETH] = h + 2; *et = -2; *wlen = wl - 2; return h + 2; }   /* 2 bytes pad */
    }
    *et = -1;
    return p;
}

/* Native IB: LRH, optional GRH (LNH = 3), BTH (IBTA 7.7.1). */
static void ib_layer(const uint8_t *buf, int64_t p, int64_t end, int64_t *oi, int64_t *mi)
{
    if (p + 8 > end)
        return;
    int lnh = buf[p + 1] & 3;
    int64_t pktlen = (be16(buf, p + 4) & 0x7FF) * 4, b = p + 8;
    mi[M_PROTO] = P_IB;
    if (lnh == 3) { oi[O_L3] = b; mi[M_L3] = L3_GRH; b += 40; }
    else if (lnh != 2) return;
    oi[O_BTH] = b;
    mi[M_ROCELEN] = pktlen - (b - p);               /* BTH .. ICRC inclusive */
}

/* GRE + ERSPAN (I/II: 0x88BE, III: 0x22EB) or transparent bridging (0x6558). */
static int64_t gre_layer(const uint8_t *buf, int64_t g, int64_t end, int64_t *oi, int64_t *mi)
{
    oi[O_GRE] = g;
    int64_t flags = be16(buf, g), proto = be16(buf, g + 2), seq = flags & 0x1000;
    int64_t h = g + 4 + ((flags & 0x8000) ? 4 : 0) + ((flags & 0x2000) ? 4 : 0) + (seq ? 4 : 0);
    if (proto == ETHERTYPE_TEB)
        return h;
    if (proto == ETHERTYPE_ERSPAN_II) {
        if (!seq)                                   /* type I: no ERSPAN header at all */
            return h;
        if (h + 8 > end)
            return -1;
        oi[O_ERSPAN2] = h;
        mi[M_SESSION] = be16(buf, h + 2) & 0x3FF;
        mi[M_TRUNC] = (buf[h + 2] >> 2) & 1;
        return h + 8;
    }
    if (proto == ETHERTYPE_ERSPAN_III) {
        if (h + 12 > end)
            return -1;
        oi[O_ERSPAN3] = h;
        mi[M_SESSION] = be16(buf, h + 2) & 0x3FF;
        mi[M_TRUNC] = (buf[h + 2] >> 2) & 1;
        return h + 12 + ((buf[h + 11] & 1) ? 8 : 0);   /* O bit: platform sub-header */
    }
    return -1;
}

/* IPv4/IPv6 then UDP; returns the offset of a decapsulated frame or -1. */
static int64_t ip_layer(const uint8_t *buf, int64_t q, int64_t end, int ipv6, int64_t *oi, int64_t *mi,
                        const uint8_t *ports)
{
    int64_t nh, l4;
    oi[O_L3] = q;
    if (ipv6) {
        mi[M_L3] = L3_IPV6;
        if (q + 40 > end)
            return -1;
        nh = buf[q + 6];
        l4 = q + 40;
        mi[M_INNERLEN] = oi[O_ETH] >= 0 ? (l4 - oi[O_ETH]) + be16(buf, q + 4) : -1;
    } else {
        mi[M_L3] = L3_IPV4;
        if (q + 20 > end)
            return -1;
        nh = buf[q + 9];
        l4 = q + (buf[q] & 0x0F) * 4;
        mi[M_INNERLEN] = oi[O_ETH] >= 0 ? (q - oi[O_ETH]) + be16(buf, q + 2) : -1;
        if ((be16(buf, q + 6) & 0x3FFF) != 0) {     /* MF or fragment offset: not decoded */
            mi[M_FRAG] = 1;
            return -1;
        }
    }
    if (nh == IPPROTO_UDP && l4 + 8 <= end) {
        oi[O_UDP] = l4;
        int64_t dport = be16(buf, l4 + 2);
        if (ports[dport]) {
            oi[O_BTH] = l4 + 8;
            mi[M_PROTO] = P_ROCE_V2;
            mi[M_ROCELEN] = be16(buf, l4 + 4) - 8;
        } else if (dport == VXLAN_UDP_PORT && l4 + 16 <= end) {   /* RFC 7348 */
            oi[O_VXLAN] = l4 + 8;
            mi[M_SESSION] = (((int64_t)buf[l4 + 13] << 8) | buf[l4 + 14]) & 0xFFFF;
            return l4 + 16;
        }
    } else if (nh == IPPROTO_GRE && l4 + 4 <= end) {
        return gre_layer(buf, l4, end, oi, mi);
    }
    return -1;
}

/* From an Ethernet header (et == -2) or an ethertype already known to the next layer. */
static int64_t eth_layer(const uint8_t *buf, int64_t e, int64_t et, int64_t end, int64_t *oi, int64_t *mi,
                         const uint8_t *ports)
{
    int64_t q = e;
    if (et == -2) {
        if (e + 14 > end)
            return -1;
        et = be16(buf, e + 12);
        q = e + 14;
    }
    for (int nv = 0; is_vlan(et) && q + 4 <= end && nv < 2; nv++) {
        oi[O_VLAN1 + nv] = q;
        et = be16(buf, q + 2);
        q += 4;
    }
    mi[M_ETYPE] = et;
    if (et == ETHERTYPE_IPV4 || et == ETHERTYPE_IPV6)
        return ip_layer(buf, q, end, et == ETHERTYPE_IPV6, oi, mi, ports);
    if (et == ETHERTYPE_ROCE_V1) {                  /* RoCEv1: GRH then BTH, IBTA A16 */
        oi[O_L3] = q;
        mi[M_L3] = L3_GRH;
        if (q + 40 <= end) {
            oi[O_BTH] = q + 40;
            mi[M_PROTO] = P_ROCE_V1;
            mi[M_ROCELEN] = be16(buf, q + 4);
            mi[M_INNERLEN] = oi[O_ETH] >= 0 ? (q - e) + 40 + mi[M_ROCELEN] : -1;
        }
    } else if (et == ETHERTYPE_MAC_CONTROL && q + 2 <= end) {
        oi[O_MACCTL] = q;
        int64_t op = be16(buf, q);
        mi[M_PROTO] = op == MACCTL_OPCODE_PFC ? P_PFC : op == MACCTL_OPCODE_PAUSE ? P_PAUSE : P_OTHER;
    } else if (et == ETHERTYPE_LLDP) {
        oi[O_LLDP] = q;
        mi[M_PROTO] = P_LLDP;
    }
    return -1;
}

static void reset(int64_t *oi, int64_t *mi)
{
    for (int k = 0; k < N_OUT; k++) oi[k] = -1;
    for (int k = 0; k < N_META; k++) mi[k] = -1;
    mi[M_PROTO] = P_OTHER;
    mi[M_FRAG] = mi[M_TRUNC] = mi[M_DECAP] = 0;
}

static void parse_one(const uint8_t *buf, int64_t p, int64_t end, int64_t lt, const uint8_t *ports, int64_t *oi,
                      int64_t *mi)
{
    int64_t et, wlen;
    reset(oi, mi);
    int64_t start = link_layer(buf, p, end, lt, oi, &et, &wlen);
    mi[M_WIRE] = wlen;
    if (et == -3) {
        ib_layer(buf, start, end, oi, mi);
        return;
    }
    if (et == -1)
        return;
    int64_t nxt = eth_layer(buf, start, et, end, oi, mi, ports);
    for (int depth = 0; depth < 3 && nxt >= 0; depth++) {   /* nested mirror encapsulations */
        int64_t session = mi[M_SESSION], trunc = mi[M_TRUNC];
        reset(oi, mi);
        mi[M_SESSION] = session;
        mi[M_TRUNC] = trunc;
        mi[M_DECAP] = 1;
        oi[O_ETH] = nxt;
        nxt = eth_layer(buf, nxt, -2, end, oi, mi, ports);
    }
}

void rv_parse_layers(const uint8_t *buf, int64_t n, const int64_t *rec_off, const uint32_t *cap,
                     const uint16_t *linktype, const uint8_t *ports, int64_t *o, int64_t *meta)
{
    for (int64_t i = 0; i < n; i++)
        parse_one(buf, rec_off[i], rec_off[i] + cap[i], linktype[i], ports, o + i * N_OUT, meta + i * N_META);
}

/* Ethernet + IPv4 (no options, not a fragment) + UDP to a RoCE port, in a few loads: the
   common case of a mirror capture; anything else goes to parse_one. */
static int fast_rocev2(const uint8_t *buf, int64_t p, int64_t end, int64_t lt, const uint8_t *ports, int64_t *oi,
                       int64_t *mi)
{
    if (lt != LINKTYPE_ETHERNET || p + 54 > end || be16(buf, p + 12) != ETHERTYPE_IPV4 || buf[p + 14] != 0x45
        || buf[p + 23] != IPPROTO_UDP || (buf[p + 20] & 0x3F) != 0 || buf[p + 21] != 0)
        return 0;
    if (!ports[be16(buf, p + 36)])
        return 0;
    for (int k = 0; k < N_OUT; k++) oi[k] = -1;
    oi[O_ETH] = p; oi[O_L3] = p + 14; oi[O_UDP] = p + 34; oi[O_BTH] = p + 42;
    mi[M_PROTO] = P_ROCE_V2; mi[M_L3] = L3_IPV4; mi[M_ROCELEN] = be16(buf, p + 38) - 8;
    mi[M_SESSION] = -1; mi[M_INNERLEN] = 14 + be16(buf, p + 16); mi[M_FRAG] = 0; mi[M_TRUNC] = 0;
    mi[M_ETYPE] = ETHERTYPE_IPV4; mi[M_WIRE] = -1; mi[M_DECAP] = 0;
    return 1;
}

/* ---- endpoint addresses, lengths (fused.py) ---- */

static void address_one(const uint8_t *buf, const int64_t *oi, const int64_t *mi, int64_t ce, const uint16_t *slid,
                        const uint16_t *dlid, const uint8_t *lid_ok, uint8_t *src, uint8_t *dst, uint8_t *ok)
{   /* the LID columns are read only for native IB: their rows are cold for everything else */
    int64_t q = oi[O_L3], kind = mi[M_L3];
    if (q >= 0 && kind == L3_IPV4 && q + 20 <= ce) {          /* ::ffff:a.b.c.d */
        src[10] = src[11] = dst[10] = dst[11] = 0xFF;
        memcpy(src + 12, buf + q + 12, 4);
        memcpy(dst + 12, buf + q + 16, 4);
        *ok = 1;
    } else if (q >= 0 && kind != L3_IPV4 && q + 40 <= ce) {   /* IPv6 or GID */
        memcpy(src, buf + q + 8, 16);
        memcpy(dst, buf + q + 24, 16);
        *ok = 1;
    } else if (oi[O_LRH] >= 0 && *lid_ok) {                  /* LID marked 0xfefe */
        src[10] = src[11] = dst[10] = dst[11] = 0xFE;
        src[14] = (uint8_t)(*slid >> 8); src[15] = (uint8_t)*slid;
        dst[14] = (uint8_t)(*dlid >> 8); dst[15] = (uint8_t)*dlid;
        *ok = 1;
    }
}

/* Wire length from the inner IP/GRH length after decapsulation (never from the captured
   bytes); truncated when the record is shorter than the frame it claims. */
static int lengths(int64_t p, int64_t end, int64_t wire_in, const int64_t *oi, const int64_t *mi, int64_t *w,
                   int64_t *c)
{
    int64_t start = oi[O_ETH] >= 0 ? oi[O_ETH] : (oi[O_LRH] >= 0 ? oi[O_LRH] : p);
    int64_t wire = mi[M_WIRE] >= 0 ? mi[M_WIRE] : wire_in;
    if (mi[M_DECAP] == 1)
        wire = mi[M_INNERLEN] >= 0 ? mi[M_INNERLEN] : wire - (start - p);
    else if (mi[M_INNERLEN] > wire)                 /* cut silently (orig_len = caplen) */
        wire = mi[M_INNERLEN];
    int64_t capl = end > start ? end - start : 0;   /* an inner frame said to start past the record */
    int64_t roce_end = oi[O_BTH] >= 0 ? oi[O_BTH] + mi[M_ROCELEN] : -1;
    *w = wire > 0 ? wire : 0;
    *c = capl;
    return capl < wire || mi[M_TRUNC] == 1 || roce_end > end || start > end;
}

/* ---- ICRC (icrc.py; IBTA 7.8.1, RoCE A16.4 / A17.4) ---- */

static uint32_t crc_bulk(const uint32_t *t, uint32_t c, const uint8_t *b, int64_t len)
{
    int64_t k = 0;
    for (; k + 8 <= len; k += 8) {                  /* slice-by-8 */
        uint32_t lo = c ^ (b[k] | ((uint32_t)b[k + 1] << 8) | ((uint32_t)b[k + 2] << 16) | ((uint32_t)b[k + 3] << 24));
        c = t[7 * 256 + (lo & 0xFF)] ^ t[6 * 256 + ((lo >> 8) & 0xFF)] ^ t[5 * 256 + ((lo >> 16) & 0xFF)]
            ^ t[4 * 256 + (lo >> 24)] ^ t[3 * 256 + b[k + 4]] ^ t[2 * 256 + b[k + 5]] ^ t[1 * 256 + b[k + 6]]
            ^ t[b[k + 7]];
    }
    for (; k < len; k++)
        c = (c >> 8) ^ t[(c ^ b[k]) & 0xFF];
    return c;
}

/* Covered headers with their variant fields set to ones, into scratch; returns the length. */
static int64_t masked_prefix(const uint8_t *buf, int64_t l3, int64_t l3kind, int64_t udp, int64_t lrh, int64_t bth,
                             uint8_t *s)
{
    int64_t at = 8, h;
    if (lrh >= 0 && l3 < 0) {                       /* IBA local packet: LRH covered, VL masked */
        memcpy(s, buf + lrh, 8);
        s[0] |= 0xF0;
    } else {
        memset(s, 0xFF, 8);                         /* 8 bytes of ones stand for the LRH */
    }
    if (l3 >= 0) {
        h = at;
        if (l3kind == L3_IPV4) {                    /* TOS, TTL, header checksum */
            if (udp - l3 > 0) { memcpy(s + at, buf + l3, udp - l3); at += udp - l3; }
            s[h + 1] = s[h + 8] = s[h + 10] = s[h + 11] = 0xFF;
        } else {                                    /* traffic class, flow label, hop limit */
            memcpy(s + at, buf + l3, 40);
            at += 40;
            s[h] |= 0x0F;
            s[h + 1] = s[h + 2] = s[h + 3] = s[h + 7] = 0xFF;
        }
    }
    if (udp >= 0) {                                 /* UDP checksum */
        memcpy(s + at, buf + udp, 8);
        at += 8;
        s[at - 2] = s[at - 1] = 0xFF;
    }
    memcpy(s + at, buf + bth, 12);
    at += 12;
    s[at - 8] = 0xFF;                               /* BTH resv8a (FECN, BECN, resv6) */
    return at;
}

static uint32_t icrc_one(const uint8_t *buf, int64_t l3, int64_t l3kind, int64_t udp, int64_t lrh, int64_t bth,
                         int64_t at, const uint32_t *t, crc32_fn fn)
{
    uint8_t s[160];
    int64_t n = masked_prefix(buf, l3, l3kind, udp, lrh, bth, s), body = bth + 12;
    if (fn && at - body >= NATIVE_CRC_MIN)
        return fn(fn(0, s, (uint32_t)n), buf + body, (uint32_t)(at - body));
    return crc_bulk(t, crc_bulk(t, 0xFFFFFFFFu, s, n), buf + body, at - body) ^ 0xFFFFFFFFu;
}

/* ---- the fused per-packet kernel (fused.py decode_records) ---- */

/* The meta the packets table keeps, as contiguous rows (reading them back out of the (n, 10)
   int64 meta matrix was ~1 ms of serial numpy per 64 k chunk): lens rows 3-5 = protocol,
   mirror session, EtherType (as uint16: -1 absent -> 0xffff), flags rows 5-8 = session
   present, EtherType present, IPv4 fragment, IPv4. */
static inline void meta_columns(int64_t i, int64_t n, const int64_t *mi, uint32_t *lens, uint8_t *flags)
{
    lens[3 * n + i] = (uint32_t)mi[M_PROTO];
    lens[4 * n + i] = (uint16_t)mi[M_SESSION];
    lens[5 * n + i] = (uint16_t)mi[M_ETYPE];
    flags[5 * n + i] = mi[M_SESSION] >= 0;
    flags[6 * n + i] = mi[M_ETYPE] >= 0;
    flags[7 * n + i] = mi[M_FRAG] == 1;
    flags[8 * n + i] = mi[M_L3] == L3_IPV4;
}

void rv_decode_records(int64_t lo, int64_t hi, int64_t n, const uint8_t *buf, const int64_t *rec_off,
                       const uint32_t *cap, const uint32_t *wire, const uint16_t *linktype, const uint8_t *ports,
                       const int64_t *ext, const int64_t *ext_total, const int64_t *rows, const uint32_t *crc_table,
                       int64_t crc_fn_addr, int64_t projection, int64_t *o, int64_t *meta, uint8_t *u8,
                       uint16_t *u16, uint32_t *u32, uint64_t *u64, uint8_t *ok, uint8_t *src, uint8_t *dst,
                       uint8_t *addr_ok, uint32_t *lens, uint8_t *flags, uint32_t *icrc)
{
    crc32_fn fn = (crc32_fn)(uintptr_t)crc_fn_addr;
    int64_t o_local[N_OUT], meta_local[N_META];
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = rec_off[i], end = p + cap[i], w, c;
        /* o and meta may be NULL: the offsets then stay on the stack (200 bytes a packet
           nobody reads back; decode.py re-parses the few LLDP / CM frames it needs). */
        int64_t *oi = o ? o + i * N_OUT : o_local, *mi = meta ? meta + i * N_META : meta_local;
        if (i + PREFETCH_AHEAD < hi) {           /* the ICRC reads whole frames: fetch ahead */
            const uint8_t *next = buf + rec_off[i + PREFETCH_AHEAD];
            for (uint32_t k = 0; k < cap[i + PREFETCH_AHEAD]; k += 64)
                __builtin_prefetch(next + k);
        }
        if (!fast_rocev2(buf, p, end, linktype[i], ports, oi, mi))
            parse_one(buf, p, end, linktype[i], ports, oi, mi);
        if (projection)                          /* consts.PROJECTION_CODE: 1 = analysis */
            extract_analysis(buf, i, n, oi, mi, end, ext, u8, u16, u32, u64, ok);
        else
            extract_one(buf, i, n, oi, mi, end, ext, u8, u16, u32, u64, ok);
        address_one(buf, oi, mi, end, u16 + rows[2] * n + i, u16 + rows[3] * n + i, ok + rows[5] * n + i,
                    src + i * 16, dst + i * 16, addr_ok + i);
        int trunc = lengths(p, end, wire[i], oi, mi, &w, &c);
        lens[i] = (uint32_t)w;
        lens[n + i] = (uint32_t)c;
        flags[i] = (uint8_t)trunc;
        meta_columns(i, n, mi, lens, flags);
        int64_t roce_len = mi[M_ROCELEN];
        if (!ok[rows[4] * n + i] || roce_len < 16)
            continue;
        int64_t opc = u8[rows[0] * n + i];
        int64_t payload = roce_len - 12 - ext_total[opc] - u8[rows[1] * n + i] - ICRC_LEN;
        lens[2 * n + i] = (uint32_t)(payload > 0 ? payload : 0);
        flags[n + i] = 1;
        int64_t bth = oi[O_BTH], at = bth + roce_len - ICRC_LEN;
        if (at + ICRC_LEN > end)
            continue;
        icrc[i] = buf[at] | ((uint32_t)buf[at + 1] << 8) | ((uint32_t)buf[at + 2] << 16) | ((uint32_t)buf[at + 3] << 24);
        flags[2 * n + i] = 1;
        if (trunc)
            continue;
        uint32_t computed = icrc_one(buf, oi[O_L3], mi[M_L3], oi[O_UDP], oi[O_LRH], bth, at, crc_table, fn);
        flags[3 * n + i] = computed == icrc[i];
        flags[4 * n + i] = 1;
    }
}

/* A module object so the build names the file for this interpreter and `import` checks it
   loads; the functions above are called through ctypes (ckernel.py). */
static struct PyModuleDef ckernel_module = {PyModuleDef_HEAD_INIT, "_ckernel", "roceview decode kernels (C)", -1, NULL};

PyMODINIT_FUNC PyInit__ckernel(void) { return PyModule_Create(&ckernel_module); }
