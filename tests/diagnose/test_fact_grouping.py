"""The fact collector's exact-key grouping (roceview.diagnose.facts) gives the same CaptureFacts
as hashing every row did (the reference below is that collector's RoCE part, kept for this
comparison): many flows (slot collisions, so the order new classes are added in), IPv6 and
random QPs (keys too wide for a direct table, or for 64 bits), values valid on some rows only,
non-RoCE rows among RoCE rows, READ responses broken inside and across chunks."""
import dataclasses

import numpy as np
import pytest

import roceview
from roceview.analysis.opcode_classes import CONTINUES_RESPONSE, OPCLASS, READ_RESPONSE
from roceview.packets.batch import PROTO_CODE, PROTO_NAMES, Batch
from roceview.diagnose import facts as F
from roceview.diagnose import facts_kernels as K
from roceview.diagnose.facts_kernels import distinct, hash_parts
from roceview.packets.read import iter_batches

from conftest import SAMPLES, capture_files


def _col(batch, name, sel, fill=-1):
    if name not in batch.cols:
        return np.full(len(batch.cols["ts_ns"][sel]), fill, dtype=np.int64)
    v = batch.cols[name][sel].astype(np.int64)
    if name in batch.valid:
        v[~batch.valid[name][sel]] = fill
    return v


class Reference(F.FactCollector):
    """Every RoCE row hashed, rows grouped by distinct() of the hash (the collector before)."""

    def __init__(self):
        super().__init__()
        self._ref = {}

    def finish(self):
        self.facts.classes = list(self._ref.values())
        return self.facts

    def _timestamps(self, batch):
        ts = batch.cols["ts_ns"]
        prev = np.empty_like(ts)
        prev[1:] = ts[:-1]
        prev[0] = ts[0] if self._last_ts is None else self._last_ts
        back = np.flatnonzero(ts < prev)
        self._last_ts = int(ts[-1])
        if len(back):
            f = self.facts
            f.ts_backwards += len(back)
            f.ts_backwards_max_ns = max(f.ts_backwards_max_ns, int((prev[back] - ts[back]).max()))
            room = max(self.max_examples - len(f.ts_backwards_frames), 0)
            f.ts_backwards_frames += batch.cols["frame"][back[:room]].tolist()

    def _truncation(self, batch):
        cut = np.flatnonzero(batch.cols["truncated"] & batch.mask("truncated"))
        f = self.facts
        f.truncated_frames += len(cut)
        room = max(self.max_examples - len(f.truncated_first), 0)
        f.truncated_first += batch.cols["frame"][cut[:room]].tolist()

    def _lldp(self, batch):
        rows = np.flatnonzero(batch.mask("lldp_pfc_enable") & (batch.cols["_proto"] == PROTO_CODE["lldp"]))
        for r in rows.tolist():
            self.facts.lldp_pfc[int(batch.cols["_src_mac"][r])] = int(batch.cols["lldp_pfc_enable"][r])

    def feed(self, batch):
        if batch.n == 0:
            return
        self._timestamps(batch)
        self._lldp(batch)
        self._truncation(batch)
        name = "opcode" if "opcode" in batch.cols else "_opcode"
        roce = np.isin(batch.cols["_proto"], F._ROCE) & batch.mask(name) & batch.mask("dest_qp")
        rows = np.flatnonzero(roce)
        if len(rows):
            self._reference_roce(batch, rows, name)

    def _reference_roce(self, batch, rows, opname):
        sel = slice(None) if len(rows) == batch.n else rows
        n = len(rows)
        src = np.ascontiguousarray(batch.cols["_src_addr"][sel]).view("<u8").reshape(n, 2)
        dst = np.ascontiguousarray(batch.cols["_dst_addr"][sel]).view("<u8").reshape(n, 2)
        qp, opcode = batch.cols["dest_qp"][sel], batch.cols[opname][sel]
        small = batch.cols["_proto"][sel].astype(np.int64)
        for name, bits in F._SMALL:
            small = (small << bits) | _col(batch, name, sel, (1 << bits) - 1)
        small = (small << 4) | OPCLASS[opcode]
        macs = [_col(batch, "_src_mac", sel), _col(batch, "_dst_mac", sel)]
        flow_h = hash_parts([src[:, 0], src[:, 1], dst[:, 0], dst[:, 1], qp])
        h = hash_parts([flow_h, small] + macs)
        gid = distinct(h)
        k = int(gid.max()) + 1
        first, last = np.full(k, n), np.zeros(k, dtype=np.int64)
        np.minimum.at(first, gid, np.arange(n))
        np.maximum.at(last, gid, np.arange(n))
        counts = np.bincount(gid, minlength=k)
        bad = np.zeros(k, dtype=np.int64)
        if "icrc_ok" in batch.cols:
            b = batch.mask("icrc_ok")[sel] & ~batch.cols["icrc_ok"][sel]
            room = self.max_examples - len(self.facts.bad_icrc_frames)
            self.facts.bad_icrc_frames += batch.cols["frame"][rows[b]][:max(room, 0)].tolist()
            bad = np.bincount(gid, b, minlength=k).astype(np.int64)
        cut = np.bincount(gid, batch.cols["truncated"][sel], minlength=k)
        ts, psn = batch.cols["ts_ns"][sel], _col(batch, "psn", sel, 0)
        for g in range(k):
            i, j = first[g], last[g]
            c = self._ref.get(int(h[i]))
            if c is None:
                s = int(small[i])
                opclass, ecn, dscp, pcp, proto = s & 15, s >> 4 & 7, s >> 7 & 127, s >> 14 & 15, s >> 18
                c = self._ref[int(h[i])] = F.Klass(
                    tuple(src[i].tolist()), tuple(dst[i].tolist()), int(qp[i]), PROTO_NAMES[proto],
                    -1 if pcp == 15 else pcp, -1 if dscp == 127 else dscp, -1 if ecn == 7 else ecn, opclass,
                    int(macs[0][i]), int(macs[1][i]), first_ts=int(ts[i]), first_psn=int(psn[i]))
            c.packets += int(counts[g])
            c.bad_icrc += int(bad[g])
            c.truncated += int(cut[g])
            c.last_ts, c.last_psn = int(ts[j]), int(psn[j])
        self._reference_reads(opcode, flow_h, psn, src, dst, qp, ts)

    def _reference_reads(self, opcode, flow_h, psn, src, dst, qp, ts):
        sel = np.flatnonzero(OPCLASS[opcode] == READ_RESPONSE)
        if len(sel) == 0:
            return
        g = distinct(flow_h[sel])
        order = np.argsort(g, kind="stable")
        sel, g = sel[order], g[order]
        p, op = psn[sel], opcode[sel].astype(np.int64)
        prev_p, prev_op = np.empty_like(p), np.empty_like(op)
        prev_p[1:], prev_op[1:] = p[:-1], op[:-1]
        head = np.ones(len(sel), dtype=bool)
        head[1:] = g[1:] != g[:-1]
        for r in np.flatnonzero(head).tolist():
            prev_p[r], prev_op[r] = self._read_state.get(int(flow_h[sel[r]]), (-2, -1))
        broken = (prev_op >= 0) & ((CONTINUES_RESPONSE[op] & (p != ((prev_p + 1) & F.PSN_MASK)))
                                   | (F._STARTS_RESPONSE[op] & ~np.isin(prev_op & 0x1F, (0x0F, 0x10))))
        for r in (np.append(np.flatnonzero(head)[1:], len(sel)) - 1).tolist():
            self._read_state[int(flow_h[sel[r]])] = (int(p[r]), int(op[r]))
        for r in np.flatnonzero(broken).tolist():
            i = sel[r]
            self.facts.read_breaks.append((int(ts[i]), tuple(src[i].tolist()), tuple(dst[i].tolist()),
                                           int(qp[i]), int(p[r]), int((prev_p[r] + 1) & F.PSN_MASK)))


OPCODES = np.array([0x04, 0x06, 0x07, 0x08, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x2A, 0x64, 0x81],
                   dtype=np.uint8)
READS = np.array([0x0A, 0x11, 0x0D, 0x0E, 0x0E, 0x0F, 0x10], dtype=np.uint8)   # WRITE, ACK, READ responses


def synthetic(n, flows, seed, hosts=2, ipv6=False, wide_qp=False, partly_valid=False, non_roce=0.0,
              opcodes=OPCODES):
    """One long capture as a Batch: `flows` flows (address pair, QP, MACs) sending random opcodes."""
    rng = np.random.default_rng(seed)
    addr = rng.integers(0, 256, (hosts, 16), dtype=np.uint8)
    if not ipv6:                                   # ::ffff:10.0.x.y, consecutive
        addr[:, :10], addr[:, 10:12], addr[:, 12:14] = 0, 0xFF, (10, 0)
        addr[:, 14], addr[:, 15] = np.divmod(np.arange(1, hosts + 1), 256)
    f_src, f_dst = rng.integers(0, hosts, flows), rng.integers(0, hosts, flows)
    f_qp = rng.integers(0, 1 << 24, flows) if wide_qp else 0x100 + np.arange(flows) % 4096
    f_mac = rng.integers(0, 1 << 48, (flows, 2), dtype=np.uint64) if ipv6 else \
        (0x020000000000 + np.stack([f_src, f_dst], axis=1)).astype(np.uint64)
    flow = rng.integers(0, flows, n)
    roce = rng.random(n) >= non_roce
    proto = np.where(roce, rng.choice([1, 2, 2, 2, 3], n) if opcodes is OPCODES else 2,
                     rng.choice([0, 4, 6], n)).astype(np.uint8)
    ts = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(0, 100, n))
    ts[(rng.random(n) < 0.002) | (np.arange(n) % 1000 == 7)] -= 5000   # a few steps back
    cols = {"frame": np.arange(1, n + 1), "ts_ns": ts, "_proto": proto,
            "_src_addr": addr[f_src[flow]], "_dst_addr": addr[f_dst[flow]],
            "dest_qp": f_qp[flow].astype(np.uint32), "opcode": rng.choice(opcodes, n),
            "psn": ((np.arange(n) // 3 + rng.integers(0, 2, n)) & F.PSN_MASK).astype(np.uint32),
            "pcp": rng.integers(0, 8, n).astype(np.uint8) if partly_valid else np.full(n, 3, np.uint8),
            "dscp": np.full(n, 26, np.uint8), "ecn": rng.choice([0, 1, 2, 3], n).astype(np.uint8),
            "_src_mac": f_mac[flow, 0], "_dst_mac": f_mac[flow, 1],
            "truncated": rng.random(n) < 0.01, "icrc_ok": (rng.random(n) > 0.002) & (np.arange(n) % 1000 != 8),
            "lldp_pfc_enable": rng.integers(0, 256, n).astype(np.uint8)}
    valid = {"opcode": roce, "dest_qp": roce, "psn": roce, "dscp": roce, "ecn": roce, "icrc_ok": roce,
             "pcp": roce & (rng.random(n) < 0.7) if partly_valid else roce,
             "_src_mac": rng.random(n) < 0.9 if partly_valid else np.ones(n, bool),
             "_dst_mac": np.ones(n, bool), "lldp_pfc_enable": proto == PROTO_CODE["lldp"]}
    if opcodes is READS:
        cols["ecn"][:] = 2
    return Batch(n, cols, valid)


def collect(cls, batch, size, flows=False):
    """The facts of `batch` fed in chunks of `size` rows; flows=True also passes flow ids as
    the analysis would (one per RoCE row with an opcode and a dest QP, the same id for the same
    addresses and QP in every chunk; here numbered by np.unique, not in order of appearance)."""
    f = cls()
    ids = _flow_ids(batch) if flows else None
    for i in range(0, batch.n, size):
        rows = np.arange(i, min(i + size, batch.n))
        chunk = batch.select(rows)
        if ids is None:
            f.feed(chunk)
        else:
            keep = (np.isin(chunk.cols["_proto"], F._ROCE) & chunk.mask("opcode") & chunk.mask("dest_qp"))
            f.feed(chunk, ids[rows[keep]])
    return dataclasses.asdict(f.finish())


def _flow_ids(batch) -> np.ndarray:
    key = np.concatenate([batch.cols["_src_addr"], batch.cols["_dst_addr"],
                          batch.cols["dest_qp"].astype(">u4").view(np.uint8).reshape(-1, 4)], axis=1)
    return np.unique(key, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


CASES = {   # name: (synthetic's arguments, how rows are grouped in chunks of 997 and more)
    "128 flows, WRITE/ACK/READ": (dict(n=15_000, flows=128, opcodes=READS), "direct"),
    "3000 flows: slot collisions": (dict(n=15_000, flows=3000, hosts=64, opcodes=READS), "hashed"),
    "IPv6, random MACs": (dict(n=10_000, flows=300, hosts=100, ipv6=True), "every row"),
    "24-bit QPs": (dict(n=10_000, flows=300, wide_qp=True), "hashed"),
    "values valid on some rows": (dict(n=10_000, flows=100, hosts=8, partly_valid=True), "hashed"),
    "non-RoCE rows between": (dict(n=10_000, flows=200, hosts=16, non_roce=0.3), "hashed"),
}


@pytest.mark.parametrize("flows", [False, True], ids=["addresses", "flow ids"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("size", [7, 997, 65536])
def test_same_facts_as_hashing_every_row(case, size, flows, monkeypatch):
    args, path = CASES[case]
    batch = synthetic(seed=len(case) * 31 + size, **args)
    if size == 7:
        batch = batch.select(np.arange(1500))
    paths, keys = set(), set()

    def spy(fields):
        key, size, bounds = K.mixed_radix(fields)
        paths.add("every row" if key is None else "direct" if size <= K._DIRECT else "hashed")
        keys.add("flow" if len(fields[0]) and fields[0].ndim == 1 else "addr")
        return key, size, bounds

    monkeypatch.setattr(F, "mixed_radix", spy)
    new, ref = collect(F.FactCollector, batch, size, flows), collect(Reference, batch, size)
    assert new == ref
    assert new["classes"] and new["read_breaks"] and new["ts_backwards"] and new["bad_icrc_frames"]
    assert keys == {"flow" if flows else "addr"}
    if not flows:       # with flow ids the key is narrower: IPv6 then fits (no "every row")
        assert size == 7 or path in paths


@pytest.mark.parametrize("mask", [0xFFFF_0000_0000_0003, 0x0003_0000_0000_0003])
def test_class_hash_collisions_merge_classes_as_before(mask, monkeypatch):
    """A weakened class hash: classes of one hash are one class, numbered as distinct() did
    (slot collisions in every round), READ state shared as before."""
    def weak(parts, strong=K.hash_parts):
        return strong(parts) & np.uint64(mask)

    monkeypatch.setattr(F, "hash_parts", weak)
    monkeypatch.setitem(globals(), "hash_parts", weak)
    batch = synthetic(n=10_000, flows=300, seed=5, hosts=16)
    for size in (997, 65536):
        new, ref = collect(F.FactCollector, batch, size), collect(Reference, batch, size)
        assert new == ref and len(new["classes"]) > 1


@pytest.mark.parametrize("capture", capture_files(SAMPLES), ids=lambda p: p.name)
def test_analyze_gives_the_facts_of_a_plain_collector(capture, monkeypatch):
    """roceview.analyze hands the analysis's flow ids to the collector: the facts are those of a
    collector that reads only the batches, less the second captures of a frame (the analysis's
    `duplicate` events), which neither counts."""
    given = []
    feed = F.FactCollector.feed

    def spy(self, batch, flows=None):
        given.append(flows is not None)
        return feed(self, batch, flows)

    monkeypatch.setattr(F.FactCollector, "feed", spy)
    result = roceview.analyze(str(capture))
    monkeypatch.setattr(F.FactCollector, "feed", feed)
    plain = F.FactCollector()
    ev = result.events
    copies = ev.frame[ev.kind == "duplicate"].to_numpy()
    for batch in iter_batches(str(capture), projection="analysis"):
        plain.feed(batch.select(np.flatnonzero(~np.isin(batch.cols["frame"], copies))))
    assert dataclasses.asdict(result.facts) == dataclasses.asdict(plain.finish())
    # pmtu-4096: the Analyzer holds every chunk (its READs' path shows no FIRST/MIDDLE payload
    # to take the path MTU from), so no flow ids are handed over until f15a's READ evidence
    assert result.facts.classes and (any(given) or capture.name == "pmtu-4096.pcap")


@pytest.mark.parametrize("seed", range(3))
def test_sorted_map_answers_as_a_dict(seed):
    """facts_kernels.SortedMap (the collector's class index and key -> hash memo) against a dict:
    keys and values over the whole uint64 range, added in several rounds, looked up mixed."""
    rng = np.random.default_rng(seed)
    ref, m, hashes = {}, K.SortedMap(), K.SortedMap(np.uint64)
    assert m.get(np.array([1, 2], np.uint64))[1].tolist() == [False, False]
    for _ in range(5):
        new = np.setdiff1d(rng.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True),
                           np.fromiter(ref, np.uint64, len(ref)))
        values = rng.integers(0, 2**64 - 1, len(new), dtype=np.uint64, endpoint=True)
        m.add(new, np.arange(len(ref), len(ref) + len(new)))
        hashes.add(new, values)
        ref.update({int(k): (len(ref) + i, int(v)) for i, (k, v) in enumerate(zip(new, values))})
        probe = np.concatenate([new[::3], rng.integers(0, 2**64 - 1, 100, dtype=np.uint64, endpoint=True)])
        index, found = m.get(probe)
        h, found_h = hashes.get(probe)
        assert found.tolist() == found_h.tolist() == [int(k) in ref for k in probe.tolist()]
        assert [int(i) for i, f in zip(index, found) if f] == [ref[int(k)][0] for k in probe.tolist() if int(k) in ref]
        assert h.dtype == np.uint64
        assert [int(x) for x, f in zip(h, found_h) if f] == [ref[int(k)][1] for k in probe.tolist() if int(k) in ref]
