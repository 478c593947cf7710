/* The direct path's completion matching (analysis/ops_direct.py) in one pass: per operation of
   a paired space sending small messages without loss, the first covering response after it,
   its expiry and whether it is final. Part of the _ckernel extension, called through ctypes.
   The numpy code in ops_direct.py (ops_match.first_covering: two binary searches and a range
   maximum per operation, ~430 ns an operation) computes the same; a test checks they agree.

   Operations (sid, u: the last PSN, idx: the row, ts) come grouped by space, capture order in
   a group; responses (rsid ascending, ridx ascending within a space, rcov: the last PSN each
   acknowledges, rts). Within a group both the row and the PSN of the operations rise (the
   direct path's rows are new PSNs, in order), so each answer is at or after the one before:
   one merge-like walk per group. A group where they do not rise is refused (return 1), the
   caller then uses numpy: no input makes this walk quadratic. */
#include <stdint.h>

static int64_t lower_bound(const int64_t *a, int64_t lo, int64_t hi, int64_t v)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Per operation j: expire[j] = the row of its group's operation pending + 1 later (inf when not
   in the arrays); the first response p of its space with ridx[p] > idx[j] and rcov[p] >= u[j];
   it completes when there is one before its expiry: compl_idx = ridx[p], compl_ts = rts[p]
   (else -1 and 0); final when it expires here or completed linger before `now`.
   Returns 0, or 1 (nothing usable written) when some group's rows or PSNs do not rise. */
int64_t rv_ops_direct(int64_t n, const int64_t *sid, const int64_t *u, const int64_t *idx, int64_t nr,
                      const int64_t *rsid, const int64_t *rcov, const int64_t *ridx, const int64_t *rts,
                      int64_t pending, int64_t now, int64_t linger, int64_t inf, int64_t *expire,
                      int64_t *compl_idx, int64_t *compl_ts, uint8_t *final)
{
    int64_t g = 0;
    while (g < n) {
        int64_t s = sid[g], e = g + 1;
        while (e < n && sid[e] == s)
            e++;
        for (int64_t j = g + 1; j < e; j++)
            if (idx[j] < idx[j - 1] || u[j] < u[j - 1])
                return 1;
        int64_t lo = lower_bound(rsid, 0, nr, s), hi = lower_bound(rsid, lo, nr, s + 1);
        int64_t a = lo, p = lo;        /* a: first response after the row; p: the answer's walk */
        for (int64_t j = g; j < e; j++) {
            while (a < hi && ridx[a] <= idx[j])
                a++;
            if (p < a)
                p = a;
            while (p < hi && rcov[p] < u[j])
                p++;
            int64_t later = j + pending + 1;
            int64_t exp = later < e ? idx[later] : inf;
            int done = p < hi && ridx[p] < exp;
            expire[j] = exp;
            compl_idx[j] = done ? ridx[p] : -1;
            compl_ts[j] = done ? rts[p] : 0;
            final[j] = exp < inf || (done && rts[p] + linger < now);
        }
        g = e;
    }
    return 0;
}

/* OpStats.add's sums over a chunk's final operations (analysis/ops_stats.py), one pass instead
   of a numpy pass per column and a sort: per dense key k (0 <= key[j] < span) the operations,
   completed ones (latency >= 0), retransmitted ones, bytes, the largest latency (-1 none) and
   the size histogram (n_edges + 1 buckets: the first edge at or above the size); and the
   latency histogram as (k * n_lat + bucket, count) pairs, each pair once, in order of first
   appearance (SparseSums sums per key, in any order). `slots` (a power of two > 2 n, -1
   filled) is the pairs' hash table. Returns the number of pairs, or -1 for a key out of range. */
int64_t rv_op_sums(int64_t n, const int64_t *key, int64_t span, const int64_t *nbytes, const uint8_t *retrans,
                   const int64_t *latency, const int64_t *edges, int64_t n_edges, int64_t sub_bits,
                   int64_t n_lat, int64_t *count, int64_t *completed, int64_t *retransmitted, int64_t *bytes,
                   int64_t *lmax, int64_t *sizes, int64_t *slots, int64_t mask, int64_t *lkey, int64_t *lcount)
{
    int64_t pairs = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t k = key[j], b = nbytes[j], s = 0;
        if (k < 0 || k >= span)
            return -1;
        count[k]++;
        retransmitted[k] += retrans[j] != 0;
        bytes[k] += b;
        while (s < n_edges && edges[s] < b)
            s++;
        sizes[k * (n_edges + 1) + s]++;
        int64_t ns = latency[j];
        if (ns < 0)
            continue;
        completed[k]++;
        if (ns > lmax[k])
            lmax[k] = ns;
        int64_t bits = ns ? 64 - __builtin_clzll((uint64_t)ns) : 0;
        int64_t shift = bits - (sub_bits + 1) > 0 ? bits - (sub_bits + 1) : 0;
        int64_t lk = k * n_lat + (shift << sub_bits) + (ns >> shift);
        uint64_t h = (uint64_t)lk * 0x9E3779B97F4A7C15ULL;
        int64_t slot = (int64_t)((h ^ (h >> 29)) & (uint64_t)mask), at;
        while ((at = slots[slot]) >= 0 && lkey[at] != lk)
            slot = (slot + 1) & mask;
        if (at < 0) {
            at = slots[slot] = pairs++;
            lkey[at] = lk;
            lcount[at] = 0;
        }
        lcount[at]++;
    }
    return pairs;
}
