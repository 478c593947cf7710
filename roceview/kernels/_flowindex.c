/* The flow index of analysis/flows.py in C: (source address, destination address, dest QP)
   -> dense flow id, ids given in order of first appearance (issue 4's flow: one direction of a
   queue pair). Part of the _ckernel extension, called through ctypes (GIL released).

   Open addressing with linear probing over a power-of-two slot table of flow ids (-1 empty);
   a slot holds no key, the flow's key is read from the registry columns (fsrc, fdst: two
   64-bit words per address; fqp) by id, so keys are always compared whole: no hash
   collision can merge two flows. A row with the same key as the row before it (a burst of
   one flow) skips the hash. The numpy registry (flows.py) computes the same ids; a test
   checks they agree. */
#include <stdint.h>

static inline uint64_t flow_hash(const uint64_t *s, const uint64_t *d, uint32_t q)
{
    uint64_t h = (uint64_t)q * 0xFF51AFD7ED558CCDULL;
    h ^= s[0] * 0x9E3779B97F4A7C15ULL;
    h ^= s[1] * 0xC2B2AE3D27D4EB4FULL;
    h ^= d[0] * 0x165667B19E3779F9ULL;
    h ^= d[1] * 0xD6E8FEB86659FD93ULL;
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 32);
}

static inline int same_key(int64_t id, const uint64_t *s, const uint64_t *d, uint32_t q, const uint64_t *fsrc,
                           const uint64_t *fdst, const uint32_t *fqp)
{
    return fqp[id] == q && fsrc[2 * id] == s[0] && fsrc[2 * id + 1] == s[1] && fdst[2 * id] == d[0]
           && fdst[2 * id + 1] == d[1];
}

/* Flow ids of rows 0..n-1 into out. insert=0: find only (-1 for a key never seen).
   insert=1: a new key becomes flow *n_flows (appended to fsrc/fdst/fqp). Returns the rows
   done: fewer than n when the registry columns are full (capf) or the table would pass half
   full; the caller grows them and calls again from that row. */
int64_t rv_flow_ids(int64_t n, const uint64_t *src, const uint64_t *dst, const uint32_t *qp, int64_t insert,
                    int64_t *slots, int64_t mask, uint64_t *fsrc, uint64_t *fdst, uint32_t *fqp, int64_t capf,
                    int64_t *n_flows, int64_t *out)
{
    int64_t nf = *n_flows, last = -1;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t *s = src + 2 * i, *d = dst + 2 * i;
        uint32_t q = qp[i];
        if (last >= 0 && same_key(last, s, d, q, fsrc, fdst, fqp)) {
            out[i] = last;
            continue;
        }
        int64_t slot = (int64_t)(flow_hash(s, d, q) & (uint64_t)mask), id;
        while ((id = slots[slot]) >= 0 && !same_key(id, s, d, q, fsrc, fdst, fqp))
            slot = (slot + 1) & mask;
        if (id < 0) {
            if (!insert) {
                out[i] = last = -1;
                continue;
            }
            if (nf >= capf || 2 * (nf + 1) > mask + 1) {
                *n_flows = nf;
                return i;
            }
            id = nf++;
            fsrc[2 * id] = s[0], fsrc[2 * id + 1] = s[1];
            fdst[2 * id] = d[0], fdst[2 * id + 1] = d[1];
            fqp[id] = q;
            slots[slot] = id;
        }
        out[i] = last = id;
    }
    *n_flows = nf;
    return n;
}

/* The grouping of a chunk's rows (analysis/chunk.py): the stable order of rows 0..n-1 by key
   (counts[k] rows of key k), by one counting pass (numpy's stable sort of 16-bit keys is a
   radix sort: three times the time). bounds: 2 * n_keys scratch. Returns 0, or -1 (order
   unfinished) for a key out of 0..n_keys-1 or more rows of a key than its count: the writes
   stay in bounds whatever the input. */
int64_t rv_stable_order(int64_t n, const int64_t *key, int64_t n_keys, const int64_t *counts, int64_t *bounds,
                        int64_t *order)
{
    int64_t at = 0, *next = bounds, *end = bounds + n_keys;
    for (int64_t k = 0; k < n_keys; k++) {
        if (counts[k] < 0 || counts[k] > n - at)
            return -1;
        next[k] = at;
        at += counts[k];
        end[k] = at;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t k = key[i];
        if (k < 0 || k >= n_keys || next[k] >= end[k])
            return -1;
        order[next[k]++] = i;
    }
    return 0;
}
