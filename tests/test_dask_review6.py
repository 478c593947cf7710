"""Review of the #19 tail (timeline grid merge, stepped/offset wire encodings, Packed's byte
count): edge cases the session's own tests did not reach. Each test fails under a plausible
slip in the code it covers (noted in its docstring)."""
import pickle

import numpy as np
import pytest

import roceview.engines.dask.partition_merge as merge
from roceview.analysis.tables import TIMELINE_COLUMNS, Coded, Table
from roceview.analysis.timeline import Rows, Timeline
from roceview.packets.wire import Flat, Packed, _unflattened, array_bytes, pack_split
from roceview.packets.batch import Batch
from roceview.engines.dask.partition_run import from_wire, to_wire
from test_partition_merge_tail import summed

FIELDS = ("bytes", "ecn_ce", "cnp_packets", "retransmitted_packets")


def by_definition(rows: list[tuple], bucket_ns: int, names: list[str]) -> Table:
    """Timeline.table by its definition: (ts, flow, bytes, ecn, cnp, retx) rows summed by
    (ts // bucket_ns, flow), in that order."""
    sums: dict[tuple[int, int], list[int]] = {}
    for ts, flow, *values in rows:
        row = sums.setdefault((ts // bucket_ns, flow), [0] * len(FIELDS))
        for i, v in enumerate(values):
            row[i] += v
    return summed(sums, FIELDS, names, bucket_ns)


def assert_same(got: Table, expect: Table) -> None:
    assert tuple(got.columns) == tuple(expect.columns)
    for c in expect.columns:
        a, b = got.data[c], expect.data[c]
        if isinstance(b, Coded):
            assert list(a.names) == list(b.names), c
            a, b = a.codes, b.codes
        a, b = np.asarray(a), np.asarray(b)
        if len(b):
            assert a.dtype == b.dtype, (c, a.dtype, b.dtype)
        assert np.array_equal(a, b), c
    assert got.text_rows() == expect.text_rows()


def fed(rng, base: int, spread: int, n_flows: int, chunks: int, bucket_ns: int, max_rows: int):
    """A Timeline fed `chunks` chunks of random rows from `base` over `spread` ns, and the rows."""
    timeline, rows = Timeline(bucket_ns, max_rows=max_rows), []
    for _ in range(chunks):
        n = int(rng.integers(1, 60))
        ts = np.sort(base + rng.integers(0, spread, n)).astype(np.int64)
        flow = rng.integers(0, n_flows, n)
        byte = rng.integers(1, 3000, n)
        ecn = np.flatnonzero(rng.random(n) < 0.3)
        retx = rng.integers(0, 2, n)
        timeline.feed(ts, flow, {"bytes": byte, "ecn_ce": Rows(ecn), "cnp_packets": None,
                                 "retransmitted_packets": retx}, n_flows, True)
        marks = np.isin(np.arange(n), ecn)
        rows += [(int(t), int(f), int(b), int(m), 0, int(r)) for t, f, b, m, r in zip(ts, flow, byte, marks, retx)]
    return timeline, rows


@pytest.mark.parametrize("base", [0, -(10 ** 15) - 7, 1_700_000_000_000_000_000, (1 << 62) + 3])
@pytest.mark.parametrize("spread", [1, 10 ** 4, 10 ** 12])
def test_a_timeline_is_its_sums_at_any_time_and_range(base, spread):
    """Timeline._merged (grid or sort) at negative times, times near 2^62, one bucket, or
    buckets far apart (the grid too large: sorted), with doubled buckets (small max_rows); and
    the partition's wire (bucket_start as steps, from the lowest) gives the table back. Fails
    with the grid's `at += low` left out or the wire's least not added back."""
    rng = np.random.default_rng(abs(base) % 1000 + spread % 997)
    for max_rows in (10 ** 9, 30):
        timeline, rows = fed(rng, base, spread, 9, 12, 1000, max_rows)
        names = [f"f{i}" for i in range(9)]
        table = timeline.table(names)
        assert_same(table, by_definition(rows, timeline.bucket_ns, names))
        back = from_wire(to_wire(table, {"bucket_start": timeline.bucket_ns}, ("gbps",)))
        for c in back.columns:
            a, b = back.data[c], table.data[c]
            a, b = (a.codes, b.codes) if isinstance(b, Coded) else (a, b)
            assert a.dtype == b.dtype and np.array_equal(a, b), c


def test_a_single_row_timeline_crosses_and_merges():
    """One row, one partition: the wire's count a step (one step) and the merge's grid of one
    cell give it back."""
    timeline = Timeline(1000)
    timeline.feed(np.array([5_500], np.int64), np.array([0]), {"bytes": np.array([64]), "ecn_ce": None,
                                                                "cnp_packets": None, "retransmitted_packets": None},
                  1, True)
    table = timeline.table(["a"])
    wire = to_wire(table, {"bucket_start": 1000}, ("gbps",))
    got = merge._timeline([from_wire(wire)], {"a": 0}, ["a"], 1000)
    assert_same(got, by_definition([(5_500, 0, 64, 0, 0, 0)], 1000, ["a"]))


def _read_only(obj):
    if isinstance(obj, np.ndarray):
        obj.flags.writeable = False
    elif isinstance(obj, dict):
        for v in obj.values():
            _read_only(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _read_only(v)
    return obj


@pytest.mark.parametrize("in_order", [True, False])
def test_the_merge_writes_nothing_it_was_sent(in_order):
    """Dask hands a task's result arrays over read-only (views of the message): from_wire and
    the grid merge must not write into them (in order: counts a step; shuffled: steps). Fails
    with an in-place `//=` of a partition's bucket_start."""
    rng = np.random.default_rng(4 + in_order)
    names = [f"f{i}" for i in range(6)]
    tables, rows = [], []
    for p in range(2):
        timeline, r = fed(rng, 1_000_000, 200_000, 6, 5, 1000, 10 ** 9)
        table = timeline.table(names)
        if not in_order:
            table = table.take(rng.permutation(len(table)))
        tables.append(_read_only(from_wire(_read_only(to_wire(table, {"bucket_start": 1000}, ("gbps",))))).data)
        rows += r
    tables = [Table(tuple(c for c in TIMELINE_COLUMNS if c != "gbps"), d) for d in tables]
    for t in tables:
        for v in t.data.values():
            _read_only(v.codes if isinstance(v, Coded) else v)
    rank = {n: i for i, n in enumerate(names)}
    for bucket_ns in (1000, 4000):
        assert_same(merge._timeline(tables, rank, names, bucket_ns), by_definition(rows, bucket_ns, names))


def test_a_part_pickled_the_old_way_counts_its_bytes_again():
    """A part pickled before Packed carried its count (_unflattened with the packs only) is
    counted on arrival: its size is its arrays', not 0 or None."""
    rng = np.random.default_rng(1)
    n = 300
    batch = Batch(n, {"psn": rng.integers(0, 1 << 24, n).astype(np.uint32),
                      "ts_ns": np.arange(n, dtype=np.int64) + (1 << 60)},
                  {"psn": rng.random(n) < 0.5})
    packs = pack_split(batch, [np.arange(0, n, 2), None])
    part = Packed()
    for p in packs:
        part.append(p)
    old = _unflattened([Flat(p) for p in packs])               # the old __reduce__'s arguments
    assert old.nbytes() == part.nbytes() == array_bytes(list(part)) > 0
    back = pickle.loads(pickle.dumps(part, protocol=5))
    assert back.nbytes() == part.nbytes() and len(back) == 2
