"""The Dask tail (timeline grid merge, stepped/offset wire encodings, Packed's byte
count): edge cases the session's own tests did not reach. Each test fails under a plausible
slip in the code it covers (noted in its docstring).

Partition_merge._timeline places the partitions' timeline rows on a (bucket, flow) grid
instead of sorting them: its table equals the merge by definition (sums per bucket and flow,
in their order) however the rows are partitioned, numbered, ordered or bucketed."""
import pickle
import numpy as np
import pytest
import roceview.engines.dask.partition_merge as merge
from roceview.analysis.tables import TIMELINE_COLUMNS, Coded, Table
from roceview.analysis.timeline import Rows, Timeline
from roceview.packets.wire import Flat, Packed, _unflattened, array_bytes, pack_split
from roceview.packets.batch import Batch
from roceview.engines.dask.partition_run import from_wire, to_wire


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


def reference(timelines: list[Table], rank: dict, names: list[str], bucket_ns: int) -> Table:
    """The merge by its definition, row by row: sums per (bucket, flow), in (bucket, flow)
    order (what the argsort merge gave)."""
    fields = [c for c in TIMELINE_COLUMNS[2:] if c != "gbps"]
    sums: dict[tuple[int, int], list[int]] = {}
    for t in timelines:
        for i in range(len(t)):
            key = (int(t.data["bucket_start"][i]) // bucket_ns, rank[t.data["flow"][i]])
            row = sums.setdefault(key, [0] * len(fields))
            for j, c in enumerate(fields):
                row[j] += int(t.data[c][i])
    return summed(sums, fields, names, bucket_ns)


def summed(sums: dict, fields, names: list[str], bucket_ns: int) -> Table:
    """A timeline table of sums per (bucket, flow) key, in key order."""
    if not sums:
        return Table.empty(TIMELINE_COLUMNS)
    keys = sorted(sums)
    data = {"bucket_start": np.array([b for b, _ in keys], np.int64) * bucket_ns,
            "flow": Coded(np.array([f for _, f in keys], np.int64), names)}
    for j, c in enumerate(fields):
        data[c] = np.array([sums[k][j] for k in keys], np.int64)
    data["gbps"] = data["bytes"] * 8.0 / bucket_ns
    return Table(TIMELINE_COLUMNS, data)


def assert_same_table(got: Table, expect: Table) -> None:
    assert got.columns == expect.columns
    for c in expect.columns:
        a, b = got.data[c], expect.data[c]
        if isinstance(b, Coded):
            assert a.names == b.names, c
            a, b = a.codes, b.codes
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and np.array_equal(a, b), c
    assert got.text_rows() == expect.text_rows()


def partitioned(rng, n_flows: int, n_parts: int, bucket_ns: int, rows: int, spread: int = 50,
                empty: int = 0) -> tuple[list[Table], list[str]]:
    """Partition timelines (Timeline.table, through the wire) of n_flows flows dealt at random
    to n_parts partitions (`empty` more with no rows), each numbering its flows in its own
    order of first appearance (not the whole capture's)."""
    names = [f"qp{i}" for i in range(n_flows)]
    owner = rng.integers(0, n_parts, n_flows)
    t0 = 1_700_000_000_000_000_000
    ts = np.sort(t0 + rng.integers(0, spread * bucket_ns, rows))
    flow = rng.integers(0, n_flows, rows)
    counters = {"bytes": rng.integers(60, 4200, rows), "ecn_ce": rng.integers(0, 2, rows),
                "cnp_packets": None, "retransmitted_packets": (rng.random(rows) < 0.01).astype(np.int64)}
    tables = []
    for p in range(n_parts):
        mine = owner[flow] == p
        seen, local = np.unique(flow[mine], return_index=True)
        by_first = seen[np.argsort(local)]                 # the partition's flows, first seen first
        number = np.full(n_flows, -1)
        number[by_first] = np.arange(len(by_first))
        timeline = Timeline(bucket_ns)
        timeline.feed(ts[mine], number[flow[mine]], {k: None if v is None else v[mine] for k, v in counters.items()},
                      max(len(by_first), 1), True)
        tables.append(from_wire(to_wire(timeline.table([names[i] for i in by_first]))))
    return tables + [from_wire(to_wire(Timeline(bucket_ns).table([]))) for _ in range(empty)], names


def check(tables: list[Table], names: list[str], bucket_ns: int) -> None:
    rank = {n: i for i, n in enumerate(names)}
    expect = reference(tables, rank, names, bucket_ns)
    assert_same_table(merge._timeline(tables, rank, names, bucket_ns), expect)


@pytest.mark.parametrize("n_parts, empty", [(1, 0), (2, 0), (3, 2), (5, 1), (1, 3)])
@pytest.mark.parametrize("coarser", [0, 1, 3])
def test_the_grid_merge_is_the_sorted_merge(n_parts, empty, coarser):
    """Several partitions, empty ones, a single one; buckets as the partitions' or 2x, 8x as
    long (rows of a partition then share a (bucket, flow) and are summed)."""
    rng = np.random.default_rng(n_parts * 10 + empty + 100 * coarser)
    tables, names = partitioned(rng, 37, n_parts, 1000, 4000, empty=empty)
    check(tables, names, 1000 << coarser)


def test_rows_out_of_order_or_shared_between_partitions_still_merge_exactly():
    """The grid assumes no order of the rows: tables shuffled, flows numbered against the whole
    capture's order, a flow's rows in two partitions (summed as the sort did)."""
    rng = np.random.default_rng(3)
    tables, names = partitioned(rng, 40, 3, 1000, 5000)
    shuffled = [t.take(rng.permutation(len(t))) for t in tables]
    check(shuffled, names, 1000)
    check(shuffled, names, 4000)
    reversed_ = [t.take(np.arange(len(t))[::-1]) for t in tables]
    check(reversed_, names, 1000)
    check(tables + tables[:1], names, 1000)                # the same rows twice: summed


def test_no_rows_at_all_is_the_local_engines_empty_timeline():
    tables = [from_wire(to_wire(Timeline(1000).table([]))) for _ in range(3)]
    got = merge._timeline(tables, {}, [], 1000)
    assert_same_table(got, Table.empty(TIMELINE_COLUMNS))
    assert got.text_rows() == []


def test_a_sparse_grid_falls_back_to_the_sort(monkeypatch):
    """Few rows over many buckets and flows (a grid much larger than the rows) are sorted; both
    ways give the same table."""
    import roceview.analysis.timeline as timeline

    rng = np.random.default_rng(11)
    tables, names = partitioned(rng, 300, 3, 1000, 200, spread=100_000)
    rank = {n: i for i, n in enumerate(names)}
    expect = reference(tables, rank, names, 1000)
    sorted_, dense = [], []
    real_sorted, real_dense = merge._sorted, merge._dense
    monkeypatch.setattr(merge, "_sorted", lambda *a: sorted_.append(1) or real_sorted(*a))
    monkeypatch.setattr(merge, "_dense", lambda *a: dense.append(1) or real_dense(*a))
    assert_same_table(merge._timeline(tables, rank, names, 1000), expect)
    assert sorted_ and not dense
    monkeypatch.setattr(timeline, "GRID_CELLS_A_ROW", 10 ** 9)     # the one limit, timeline.grid_cells's
    assert_same_table(merge._timeline(tables, rank, names, 1000), expect)
    assert dense


def _table_bytes(table) -> int:
    return sum((v.codes if hasattr(v, "codes") else np.asarray(v)).nbytes for v in table.data.values())


def test_a_timeline_crosses_the_wire_without_gbps_and_with_bucket_steps():
    """PartitionRun.result sends a timeline's bucket_start as steps of its bucket_ns (counted
    where in order and fewer than the rows) and no gbps (the merge computes it from bytes):
    from_wire gives the other columns as they were, the merge the same table, and the wire is
    under a third of the table's bytes."""
    import pickle

    from roceview.packets.wire import array_bytes

    rng = np.random.default_rng(5)
    tables, names = partitioned(rng, 50, 2, 1000, 6000)
    sparse, _ = partitioned(rng, 50, 2, 1000, 300, spread=100_000)
    rank = {n: i for i, n in enumerate(names)}
    for given in (tables, [t.take(rng.permutation(len(t))) for t in tables], sparse):
        sent = [to_wire(t, {"bucket_start": 1000}, ("gbps",)) for t in given]
        back = [from_wire(w) for w in sent]
        for t, b in zip(given, back):
            assert b.columns == tuple(c for c in TIMELINE_COLUMNS if c != "gbps")
            for c in b.columns:
                a, e = (b.data[c].codes, t.data[c].codes) if c == "flow" else (b.data[c], t.data[c])
                assert a.dtype == e.dtype and np.array_equal(a, e), c
        assert [from_wire(w).data["bucket_start"].tolist() for w in sent] == \
            [b.data["bucket_start"].tolist() for b in back]                 # the wire left as it came
        assert_same_table(merge._timeline(back, rank, names, 2000), reference(given, rank, names, 2000))
    sent = [to_wire(t, {"bucket_start": 1000}, ("gbps",)) for t in tables]
    assert len(pickle.dumps(sent, protocol=5)) * 3 < sum(_table_bytes(t) for t in tables)
    for t, w in zip(tables, sent):            # in order: a count a bucket, not a value a row
        assert "gbps" not in w["arrays"] and array_bytes(w["arrays"]["bucket_start"]) * 8 < len(t)
    empty = from_wire(to_wire(Timeline(1000).table([]), {"bucket_start": 1000}, ("gbps",)))
    assert len(empty) == 0 and "gbps" not in empty.columns


def timeline_by_definition(chunks: list, bucket_ns: int, names: list[str]) -> Table:
    """Timeline.table by its definition, from every chunk's rows at once."""
    ts = np.concatenate([c[0] for c in chunks])
    flow = np.concatenate([c[1] for c in chunks])
    data = {"bucket_start": ts // bucket_ns * bucket_ns, "flow": Coded(flow, names)}
    for f in ("bytes", "ecn_ce", "cnp_packets", "retransmitted_packets"):
        data[f] = np.concatenate([c[2][f] for c in chunks])
    data["gbps"] = np.zeros(len(ts))
    return reference([Table(TIMELINE_COLUMNS, data)], {n: i for i, n in enumerate(names)}, names, bucket_ns)


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("in_order, max_rows", [(True, 10 ** 9), (False, 10 ** 9), (True, 400), (False, 400)])
def test_the_timelines_merged_rows_are_its_sums_by_bucket_and_flow(monkeypatch, grid, in_order, max_rows):
    """Timeline._merged places its parts' rows on a grid (or sorts them where the grid is too
    large): chunks in time order or not, overlapping buckets, doubled buckets (a small row
    bound) give the sums by definition, both ways."""
    import roceview.analysis.timeline as timeline

    monkeypatch.setattr(timeline, "GRID_CELLS_A_ROW", 10 ** 9 if grid else -10 ** 9)
    rng = np.random.default_rng(max_rows + in_order)
    names = [f"f{i}" for i in range(23)]
    whole, chunks = Timeline(1000, max_rows=max_rows), []
    for k in range(30):
        n = int(rng.integers(0, 400))
        start = (k if in_order else int(rng.integers(0, 30))) * 5000
        ts = np.sort(start + rng.integers(0, 9000, n))
        flow = rng.integers(0, 23, n)
        values = {"bytes": rng.integers(1, 1500, n), "ecn_ce": rng.integers(0, 2, n), "cnp_packets": None,
                  "retransmitted_packets": timeline.Rows(np.flatnonzero(rng.random(n) < 0.05))}
        whole.feed(ts, flow, values, 23, True)
        filled = {f: np.zeros(n, np.int64) if v is None else np.isin(np.arange(n), v.positions).astype(np.int64)
                  if isinstance(v, timeline.Rows) else v for f, v in values.items()}
        chunks.append((ts, flow, filled))
    got = whole.table(names)
    assert (whole.bucket_ns > 1000) == (max_rows == 400)
    expect = timeline_by_definition(chunks, whole.bucket_ns, names)
    assert_same_table(got, expect)


def test_a_stepped_column_comes_back_in_its_own_type_counted_or_not():
    """to_wire's steps (a timeline's bucket_start) come back in the column's own dtype, counted
    (in order, fewer steps than rows) or not, up to the type's extremes (rev6: counted ones
    came back int64 whatever they were)."""
    rng = np.random.default_rng(3)
    for dtype in (np.int64, np.int32, np.uint32, np.uint64, np.int16):
        info = np.iinfo(dtype)
        for step in (1, 7, 1000):
            for counted in (True, False):
                n = 50
                steps = np.sort(rng.integers(0, 10, n)) if counted else rng.integers(0, 10 * n, n)
                high = int(info.max) - step * int(steps.max())
                if high < int(info.min):
                    continue                          # steps wider than the type
                least = int(rng.integers(int(info.min), high, dtype=np.int64 if int(info.min) < 0 else np.uint64,
                                         endpoint=True))
                values = (steps.astype(object) * step + least).astype(dtype)
                back = from_wire(to_wire(Table(("b",), {"b": values}), {"b": step}))
                assert back.data["b"].dtype == values.dtype and np.array_equal(back.data["b"], values), \
                    (dtype, step, counted)
