"""The partitioned Dask run (dask_run): the driver's replay of the local engine's decisions
(chunks, frames, QP-pairing gate, flow order, timeline bucket doubling) against the local
engine's own, and the whole run on a LocalCluster on a capture whose flows fall in several
partitions (incast: six senders to one receiver) beside many QPs between one pair of hosts."""
import sys
from pathlib import Path

import numpy as np
import pytest

import roceview
from roceview.analysis import Analyzer
from roceview.analysis.timeline import Timeline
from roceview.capture.writer import write_pcap
from roceview.generate import generate
from roceview.render.export import CSV_FILES, write_csv_dir, write_json

REPO = Path(__file__).resolve().parents[2]
CSVS = [name for name, _ in CSV_FILES]


def write_cut(cap, pieces: int, directory: Path, stem: str, shift: int = 0) -> None:
    bounds = np.linspace(0, len(cap), pieces + 1).astype(int)
    ends = np.cumsum(cap.lengths)
    starts = ends - cap.lengths
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        write_pcap(directory / f"{stem}_{i:05d}.pcap", cap.frames[starts[a]:ends[b - 1]], cap.lengths[a:b],
                   cap.ts_ns[a:b] + shift)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    """150 k packets of 16 QPs between one pair of hosts (benchmarks/make_capture.py: every
    flow starts at once, so chunks past PAIRING_HORIZON rows may no longer pair QPs), cut in
    3 files; then an incast (six senders, one receiver: new flows, so pairing opens again)
    in 2 files, after it in time."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import make_capture

    d = tmp_path_factory.mktemp("fabric")
    whole = tmp_path_factory.mktemp("whole") / "qps.pcap"
    make_capture.write(whole, 150_000, 128, 1024, flows=16)
    from roceview.capture.readers import read_records

    chunks = list(read_records(str(whole), 1 << 20, lambda m: None))
    last_ts = int(chunks[-1].ts[-1])
    whole.replace(d / "a_00000.pcap")
    incast = generate("incast", seed=2, scale=2)
    write_cut(incast, 2, d, "b", shift=last_ts + 1_000_000 - int(incast.ts_ns[0]))
    return d


def replay(paths, chunk: int):
    """The driver's Plan and gates, the files read in this process (no cluster)."""
    from roceview.capture.source import expand_paths
    from roceview.engines.dask.partition import read, times
    from roceview.engines.dask.plan import Plan, gates
    from roceview.packets.read import time_ordered

    order, starts = time_ordered(expand_paths(paths))
    reads = [read(f, (), chunk, "analysis", 2) for f in order]
    metas = [r["meta"] for r in reads]
    plan = Plan(order, starts, metas, chunk, lambda m: None, lambda: [times(f, chunk) for f in order])
    gate, names = gates(plan, [m["flows"] for m in metas], [r["analyzed"] for r in reads])
    return plan, gate, names


class Recording(Analyzer):
    """The local Analyzer, noting each chunk's start and its pairing decision."""

    def __init__(self):
        super().__init__()
        self.decisions: list[tuple[int, bool]] = []

    def pairing_open(self, last_idx: int) -> bool:
        ok = super().pairing_open(last_idx)
        self.decisions.append((self.last_rows[0], ok))
        return ok


@pytest.mark.parametrize("chunk", [1 << 16, 5000])
def test_replayed_chunks_gates_and_flow_order_are_the_local_engines(fabric, chunk):
    from roceview.packets.read import iter_batches

    plan, gate, names = replay(fabric, chunk)
    an = Recording()
    for batch in iter_batches(fabric, chunk_packets=chunk, projection="analysis"):
        an.feed(batch)
    result = an.finish()
    starts = [s for s, _ in an.decisions]
    assert set(starts) <= set(plan.chunk_starts.tolist())                  # the same chunks
    chunk_of = np.searchsorted(plan.chunk_starts, starts, side="right") - 1
    assert [ok for _, ok in an.decisions] == gate[chunk_of].tolist()
    assert {ok for _, ok in an.decisions} == {True, False}                   # the gate flips
    assert names == list(result.flows["flow"].astype(str))


def test_timeline_doubling_replayed_from_partitions():
    """Two partitions' RecordingTimelines (flows apart) tell when one Timeline over every flow
    doubles its buckets (a small row bound here), and their rows merge into its table."""
    from roceview.engines.dask.partition_run import RecordingTimeline
    from roceview.engines.dask.partition_merge import _timeline, _timeline_level

    rng = np.random.default_rng(7)
    whole = Timeline(1000, max_rows=600)
    parts = [RecordingTimeline(Timeline(1000, max_rows=10**9)) for _ in range(2)]
    t0 = 0
    for chunk in range(40):
        n = 300
        ts = np.sort(t0 + rng.integers(0, 20_000, n))
        flow = rng.integers(0, 12, n)
        t0 += 20_000
        values = {"bytes": rng.integers(60, 1500, n), "ecn_ce": None, "cnp_packets": None,
                  "retransmitted_packets": None}
        whole.feed(ts, flow, values, 12, True)
        for p, part in enumerate(parts):
            mine = flow % 2 == p
            part.chunk = chunk
            part.feed(ts[mine], flow[mine] // 2, {k: v if v is None else v[mine] for k, v in values.items()}, 6,
                      True)
    records = [{"timeline_record": p.record, "timeline_unsure": p.unsure} for p in parts]
    level = _timeline_level(records, 40, max_rows=600)
    assert whole.bucket_ns > 1000 and whole.bucket_ns == 1000 << level
    names = [f"f{i}" for i in range(12)]
    merged = _timeline([p.table([f"f{2 * i + k}" for i in range(6)]) for k, p in enumerate(parts)],
                       {n: i for i, n in enumerate(names)}, names, whole.bucket_ns)
    expect = whole.table(names)
    for c in expect.columns:
        assert list(merged.data[c]) == list(expect.data[c]), c


def test_an_event_budget_reached_is_not_exact():
    from roceview.analysis.events import MAX_PER_KIND
    from roceview.engines.dask.partition_merge import exact

    part = {"held": False, "timeline_record": [], "timeline_unsure": False, "bucket_ns": 10**6,
            "event_counts": {"ecn_ce": MAX_PER_KIND // 2 + 1}}
    assert exact([part], 10**6, 1) == (None, 10**6)
    assert "budget" in exact([part, part], 10**6, 1)[0]
    assert "held back" in exact([dict(part, held=True)], 10**6, 1)[0]


distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as c:
        yield c


def csvs(result, directory):
    write_csv_dir(result, directory)
    return {name: (directory / name).read_bytes() for name in CSVS}


def _not_needed(*args, **kwargs):
    raise AssertionError("a ring buffer's plan walked the files again for their timestamps")


def test_flows_in_several_partitions_identical_to_local(cluster, fabric, tmp_path, monkeypatch):
    """Files in sequence (a ring buffer): planned from the chunks' summaries, no timestamp goes
    to the driver (the task that would walk the files again for them fails here: sent by value
    to the workers). (The analyzed bits are a task per file that runs anyway.)"""
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.partition as partition
    from roceview.analysis.pmtu import path_keys
    from roceview.engines.dask.partition import partition_of

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    monkeypatch.setattr(partition, "times", _not_needed)
    local = roceview.analyze(fabric)
    dask = roceview.analyze(fabric, engine="dask", scheduler=cluster.scheduler_address)
    assert csvs(dask, tmp_path / "d") == csvs(local, tmp_path / "l")
    assert dask.summary == local.summary
    write_json(dask, tmp_path / "d.json")
    write_json(local, tmp_path / "l.json")
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "l.json").read_bytes()
    assert "incast" in set(local.findings["kind"].astype(str))
    pairs = {tuple(sorted(p)) for p in zip(local.flows["src_ip"].astype(str), local.flows["dst_ip"].astype(str))}
    assert {int(partition_of(path_keys(_words(a), _words(b)), 2)[0]) for a, b in pairs} == {0, 1}


def _words(ip: str) -> np.ndarray:
    from ipaddress import IPv6Address

    return np.frombuffer(IPv6Address("::ffff:" + ip).packed, "<u8").reshape(1, 2)


def test_a_run_that_cannot_be_exact_falls_back_to_the_same_result(cluster, fabric, tmp_path, monkeypatch):
    """partition_merge.exact saying no (an event budget reached, a hold for path-MTU evidence):
    the driver-side path on the same cluster, the same CSVs."""
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.partition_merge as merge

    made, original = [], engine.DaskBatches

    def driver_side(*args, **kwargs):
        made.append(kwargs.get("connection"))
        return original(*args, **kwargs)
    monkeypatch.setattr(merge, "exact", lambda parts, bucket_ns, n: ("a test says so", bucket_ns))
    local = roceview.analyze(fabric)
    with monkeypatch.context() as m:
        m.setattr(engine, "DaskBatches", driver_side)
        dask = roceview.analyze(fabric, engine="dask", scheduler=cluster.scheduler_address)
    assert len(made) == 1 and made[0] is not None            # on the partitioned run's connection
    assert csvs(dask, tmp_path / "d") == csvs(local, tmp_path / "l")


def test_real_captures_partitioned_identical_to_local(cluster, real_capture, tmp_path, monkeypatch):
    """Each real capture (RoCE v1 and v2, native IB, CM, bad ICRCs, cut frames, PAUSE, LLDP,
    mixed LAN traffic): the partitioned run, not the fallback, gives the local CSVs."""
    import roceview.engines.dask.client as engine

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    local = roceview.analyze(real_capture, warn=lambda m: None)
    dask = roceview.analyze(real_capture, engine="dask", scheduler=cluster.scheduler_address, warn=lambda m: None)
    assert csvs(dask, tmp_path / "d") == csvs(local, tmp_path / "l")
    assert dask.summary == local.summary


def test_files_overlapping_in_time_send_no_large_graph(cluster, tmp_path, monkeypatch):
    """Two mirror ports' files interleaved in time: every row's frame number is an array per
    file (Plan.gidx, 8 bytes a packet), which the partition tasks must fetch, not carry in
    the task graph (each of them would ship it through the scheduler, and Dask warns on
    stderr of a large graph)."""
    import warnings

    import dask

    import roceview.engines.dask.client as engine

    cap = generate("incast", seed=2, scale=40)
    ends = np.cumsum(cap.lengths)
    for side in (0, 1):
        rows = np.arange(side, len(cap), 2)
        keep = np.concatenate([np.arange(ends[r] - cap.lengths[r], ends[r]) for r in rows])
        write_pcap(tmp_path / f"port{side}.pcap", cap.frames[keep], cap.lengths[rows], cap.ts_ns[rows])

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    local = roceview.analyze(tmp_path)
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "40kB"}), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dask_result = roceview.analyze(tmp_path, engine="dask", scheduler=cluster.scheduler_address)
    assert [str(w.message) for w in caught if "large graph" in str(w.message)] == []
    assert csvs(dask_result, tmp_path / "d") == csvs(local, tmp_path / "l")


def test_timestamps_out_of_order_stay_partitioned_below_the_timeline_bound(cluster, tmp_path, monkeypatch):
    """Packets stamped out of time order within a flow (neighbours swapped, one 5 ms back):
    the timeline's new rows cannot be replayed, but far below its row bound it never doubles
    its buckets, so the partitioned run is exact and must not redo the capture driver-side."""
    import roceview.engines.dask.client as engine
    from roceview.engines.dask.partition_merge import _timeline_level

    cap = generate("network-loss", seed=3)
    ts = cap.ts_ns.copy()
    at = np.random.default_rng(0).choice(len(ts) - 1, 10, replace=False)
    ts[at], ts[at + 1] = ts[at + 1].copy(), ts[at].copy()
    ts[len(ts) // 2] -= 5_000_000
    write_pcap(tmp_path / "back.pcap", cap.frames, cap.lengths, ts)

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    local = roceview.analyze(tmp_path / "back.pcap", chunk_packets=64)    # rows back across chunks
    dask_result = roceview.analyze(tmp_path / "back.pcap", engine="dask", scheduler=cluster.scheduler_address,
                                   chunk_packets=64)
    assert local.facts.ts_backwards > 0
    assert csvs(dask_result, tmp_path / "d") == csvs(local, tmp_path / "l")
    counts = np.zeros((2, 12), np.int64)
    counts[:, 0] = 5
    unsure = {"timeline_record": [(0, counts)], "timeline_unsure": True}
    assert _timeline_level([unsure], 1, max_rows=5) == 0
    assert _timeline_level([unsure], 1, max_rows=4) is None          # past the bound: cannot tell


def test_a_file_of_pfc_frames_bridging_two_captures_warns_as_locally(cluster, tmp_path):
    """Files opened beside others are read in smaller chunks, so their PSN spans are observed
    again on the workers from their RoCE rows; their time spans must still count every frame:
    a file holding only PFC frames, from 2023 to 2029, bridges a 2023 capture and a 2029 one
    (no 'years apart' warning locally)."""
    year = 365 * 86_400 * 10**9
    a = generate("clean", seed=1)
    write_pcap(tmp_path / "a.pcap", a.frames, a.lengths, a.ts_ns)
    write_pcap(tmp_path / "c.pcap", a.frames, a.lengths, a.ts_ns + 6 * year)
    storm = generate("pfc-storm", seed=1)
    ends = np.cumsum(storm.lengths)
    pfc = [r for r in range(len(storm)) if storm.frames[ends[r] - storm.lengths[r] + 12:][:2].tobytes() == b"\x88\x08"]
    keep = np.concatenate([np.arange(ends[r] - storm.lengths[r], ends[r]) for r in pfc[:2]])
    write_pcap(tmp_path / "b.pcap", storm.frames[keep], storm.lengths[pfc[:2]],
               np.array([a.ts_ns[0] + 1000, a.ts_ns[0] + 6 * year + 1000], np.int64))
    told = {"local": [], "dask": []}
    local = roceview.analyze(tmp_path, warn=told["local"].append)
    dask_result = roceview.analyze(tmp_path, engine="dask", scheduler=cluster.scheduler_address,
                                   warn=told["dask"].append)
    assert local.summary["protocols"].get("pfc", 0) == 2
    assert told["dask"] == told["local"]
    assert csvs(dask_result, tmp_path / "d") == csvs(local, tmp_path / "l")


def test_a_partition_per_worker_past_five_workers(tmp_path, monkeypatch):
    """distributed 2025.x's Client.scheduler_info() listed at most 5 workers by default
    (dask/distributed#9045, undone by #9308; pyproject allows both): the partitions (one per
    worker, plus PFC) must count every worker of a 6-worker cluster, as the Client reports them."""
    import roceview.engines.dask.partition_merge as merge

    original, sizes = distributed.Client.scheduler_info, []

    def first_five(self, *args, **kwargs):                 # as distributed 2025.x answered
        info = original(self, *args, **kwargs)
        return dict(info, workers=dict(list(info.get("workers", {}).items())[:5]))
    exact = merge.exact

    def counting(parts, *args):
        sizes.append(len(parts))
        return exact(parts, *args)
    monkeypatch.setattr(distributed.Client, "scheduler_info", first_five)
    monkeypatch.setattr(merge, "exact", counting)
    cap = generate("incast", seed=2)
    write_pcap(tmp_path / "incast.pcap", cap.frames, cap.lengths, cap.ts_ns)
    with distributed.LocalCluster(n_workers=6, threads_per_worker=1, processes=False, dashboard_address=":0") as c:
        dask_result = roceview.analyze(tmp_path, engine="dask", scheduler=c.scheduler_address)
    assert sizes == [7]
    assert csvs(dask_result, tmp_path / "d") == csvs(roceview.analyze(tmp_path), tmp_path / "l")


def _plans(paths, chunk):
    """The driver's Plan of `paths` from the files' summaries and replayed on their
    timestamps, with whether the summaries' Plan asked for the timestamps."""
    from roceview.capture.source import expand_paths
    from roceview.engines.dask.partition import read, times
    from roceview.engines.dask.plan import Plan
    from roceview.packets.read import time_ordered

    files = expand_paths(paths)
    order, starts = time_ordered(files) if len(files) > 1 else (files, [None])
    reads = [read(f, (), chunk, "analysis", 2) for f in order]
    metas, asked, told = [r["meta"] for r in reads], [], ([], [])

    def every_time():
        asked.append(True)
        return [times(f, chunk) for f in order]
    quick = Plan(order, starts, metas, chunk, told[0].append, every_time)
    quick_asked = bool(asked)
    replayed = Plan(order, starts, metas, chunk, told[1].append, every_time, replay=True)
    quick.bits = replayed.bits = [r["analyzed"] for r in reads]
    return (quick, replayed), quick_asked, told


def _frames(plan) -> list:
    from roceview.engines.dask.plan import frames

    return [frames(g, np.arange(n)).tolist() for g, n in zip(plan.gidx, plan.n)]


def _stepped_ring(directory: Path, pieces: int, shift: int = 0) -> Path:
    """An incast cut into `pieces` files (uneven ends: small ones get joined), with rows
    stamped back in time inside a file, `shift` ns later."""
    cap = generate("incast", seed=3, scale=40)       # 6 k packets
    ts = cap.ts_ns.copy()
    ts[[40, 41]] = ts[[41, 40]]                  # 41 now stamped before 40
    ts[[900, 902]] = ts[[902, 900]]              # 901 and 902 now stamped before the row before
    cap.ts_ns = ts
    directory.mkdir(parents=True, exist_ok=True)
    write_cut(cap, pieces, directory, f"r{shift}", shift=shift)
    return directory


@pytest.mark.parametrize("chunk", [1 << 16, 5000, 777])
def test_plan_of_files_in_sequence_is_the_replayed_plan(fabric, tmp_path, chunk):
    """A ring buffer's Plan from the chunks' sizes and time ranges equals the local merge
    replayed on every timestamp (frames, chunks, steps back in time, warnings), and does not
    fetch the timestamps."""
    from roceview.engines.dask.plan import last_analyzed

    ring = _stepped_ring(tmp_path / "ring", 9)
    for paths in ([fabric], [ring], [sorted(fabric.iterdir())[0]], [sorted(ring.iterdir())[0]]):
        (quick, replayed), asked, told = _plans(paths, chunk)
        assert not asked, paths
        assert quick.chunk_starts.tolist() == replayed.chunk_starts.tolist()
        assert quick.n_chunks == replayed.n_chunks
        assert _frames(quick) == _frames(replayed)
        assert quick.ts_backwards == replayed.ts_backwards
        assert quick.span_rows == replayed.span_rows
        assert told[0] == told[1]
        assert replayed.last_analyzed is None and quick.last_analyzed is not None
        assert last_analyzed(quick, quick.bits).tolist() == last_analyzed(replayed, replayed.bits).tolist()
    assert _plans([ring], chunk)[0][0].ts_backwards[0] == 3          # 41; 901 and 902


def test_plan_of_files_overlapping_in_time_is_replayed(tmp_path):
    """Two mirror ports of the same minutes, or a file starting at the very nanosecond the
    one before ends: the local merge interleaves or opens files side by side, so the plan
    fetches the timestamps and replays it."""
    both = _stepped_ring(_stepped_ring(tmp_path / "both", 3), 3, shift=1500)
    assert _plans([both], 5000)[1]
    from roceview.capture.readers import read_records

    ring = _stepped_ring(tmp_path / "touching", 2)
    first, second = sorted(ring.iterdir())
    rec = next(iter(read_records(str(first), 1 << 20, lambda m: None)))
    cap = generate("incast", seed=3, scale=1)
    write_pcap(second, cap.frames, cap.lengths, cap.ts_ns - int(cap.ts_ns[0]) + int(rec.ts.max()))
    (quick, replayed), asked, _ = _plans([ring], 5000)
    assert asked and _frames(quick) == _frames(replayed)


def test_pack_split_gives_the_rows_pack_gives():
    """columns_wire.pack_split (a chunk cut into partitions, each column encoded once) unpacks
    to the rows and validity pack() gives for each selection: masks all valid, none valid or
    mixed, narrowed and zero columns, empty and whole selections."""
    from roceview.packets.batch import Batch
    from roceview.packets.wire import pack, pack_split, unpack

    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 50))
        cols = {"a": rng.integers(0, 300, n).astype(np.uint32), "b": np.zeros(n, np.uint16),
                "addr": np.tile(np.r_[np.zeros(10, np.uint8), 255, 255, 10, 0, 0, 1].astype(np.uint8), (n, 1))}
        cols["addr"][:, 15] = rng.integers(0, 256, n)
        valid = {"a": rng.random(n) < rng.choice([0, 0.5, 1.0]), "b": np.full(n, rng.random() < 0.5)}
        batch = Batch(n, cols, valid)
        selections = [None, np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False))]
        for rows, packed in zip(selections, pack_split(batch, selections, ())):
            if not packed["lengths"][0]:
                continue
            (got,) = unpack(packed)
            (want,) = unpack(pack([batch if rows is None else batch.select(rows)], coded=()))
            for name in cols:
                assert got.cols[name].dtype == want.cols[name].dtype
                assert np.array_equal(got.cols[name], want.cols[name]), name
                assert np.array_equal(got.mask(name), want.mask(name)), name


def test_a_part_crosses_as_one_buffer_a_pack_and_comes_back_whole():
    """columns_wire.Packed (a file's part): pickled (as Dask sends it to another worker, protocol
    5, buffers out of band) one buffer a pack, every array back with its dtype, shape and
    values, other values as they were; unpickled it is a Packed again."""
    import pickle

    from roceview.packets.batch import Batch
    from roceview.packets.wire import Packed, pack

    rng = np.random.default_rng(2)
    packs = []
    for n in (1, 7, 40):
        cols = {"a": rng.integers(0, 1 << 40, n).astype(np.uint64), "b": np.zeros(n, np.uint16),
                "mac": rng.integers(0, 3, n).astype(np.uint64), "g": rng.integers(0, 256, (n, 16)).astype(np.uint8)}
        packs.append(pack([Batch(n, cols, {"a": rng.random(n) < 0.5})], coded=("mac",)))
    packs.append({"lengths": [0], "cols": {"e": ("raw", np.zeros((0, 16), np.uint8))}, "valid": {}})
    buffers = []
    back = pickle.loads(pickle.dumps(Packed(packs), protocol=5, buffer_callback=buffers.append), buffers=buffers)
    assert isinstance(back, Packed) and len(buffers) == len(packs)

    def same(x, y):
        if isinstance(x, np.ndarray):
            return isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
        if isinstance(x, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)):
            return type(x) is type(y) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
        return x == y
    assert same(list(back), packs)


def test_a_part_received_at_an_odd_address_gives_aligned_columns():
    """A Flat's buffer as the receiving worker gets it, inside a message at any address: its
    int64 columns come back aligned (numpy and the C/numba kernels assume it)."""
    import pickle

    from roceview.packets.wire import Flat

    flat = Flat({"a": ("raw", np.arange(9, dtype=np.int64)), "b": ("raw", np.arange(5, dtype=np.uint32))})
    buffers = []
    data = pickle.dumps(flat, protocol=5, buffer_callback=buffers.append)
    (blob,) = [b.raw() for b in buffers]
    shifted = np.zeros(len(blob) + 3, np.uint8)
    shifted[3:] = np.frombuffer(blob, np.uint8)
    value = pickle.loads(data, buffers=[shifted[3:]]).value()
    assert value["a"][1].ctypes.data % 8 == 0 and value["a"][1].tolist() == list(range(9))
    assert value["b"][1].tolist() == list(range(5))


def test_a_part_is_sized_for_dask_by_its_arrays():
    """dask.sizeof of a Packed (what the worker's memory manager counts and spills by) is its
    arrays' bytes: as a plain list it sampled 10 of a pack's columns at random, 0.47x to 1.55x
    of a part's bytes from one call to the next (incast, 2 packs, 20 calls)."""
    from dask.sizeof import sizeof

    import roceview.engines.dask.partition  # noqa: F401 - registers it, as the workers import it
    from roceview.packets.wire import Packed

    cols = {f"c{i}": ("raw", np.zeros(8, np.uint8)) for i in range(29)}
    cols["big"] = ("raw", np.zeros(1 << 20, np.uint8))
    part = Packed([{"lengths": [8], "cols": cols, "valid": {"v": ("bits", np.zeros(1, np.uint8), 8)}}])
    sizes = {sizeof(part) for _ in range(20)}
    assert len(sizes) == 1 and (1 << 20) + 29 * 8 <= sizes.pop() < (1 << 20) + 64 * 1024, sizes


def test_a_part_counts_its_bytes_as_it_grows_and_keeps_the_count_across_workers(tmp_path):
    """Packed counts its arrays' bytes as packs are appended (the workers size a part each time
    it is stored: walking it each time cost 0.1-0.15 CPU s a worker per 8 M packets): the
    count is the walk's (array_bytes) on a file's real parts, and crosses with a pickled part."""
    import pickle

    from roceview.packets.wire import array_bytes
    from roceview.engines.dask.partition import read

    cap = generate("incast", seed=2, scale=20)
    path = tmp_path / "incast.pcap"
    write_pcap(path, cap.frames, cap.lengths, cap.ts_ns)
    parts = read(str(path), (), 500, "analysis", 2)["parts"]
    assert sum(len(p) for p in parts) > 4
    for part in parts:
        assert part.nbytes() == array_bytes(list(part))
        back = pickle.loads(pickle.dumps(part, protocol=5))
        assert back.nbytes() == part.nbytes() and len(back) == len(part)


def test_a_result_column_in_a_narrow_range_crosses_narrowed_and_comes_back_as_it_was():
    """pack_array sends an integer column whose values sit in a narrow range above a large one
    (a timeline's bucket starts) as that one and narrowed distances: lossless for every integer
    type, negative and extreme values included, and smaller where it applies."""
    from roceview.packets.wire import pack_array, unpack_array

    rng = np.random.default_rng(7)
    info = {t: np.iinfo(t) for t in (np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64)}
    for _ in range(400):
        t = rng.choice(list(info))
        lo, hi = int(info[t].min), int(info[t].max)
        base = int(rng.integers(lo, hi, dtype=np.int64 if lo < 0 else np.uint64, endpoint=True))
        span = int(rng.choice([0, 1, 255, 256, 65535, 1 << 20, 1 << 40]))
        values = np.clip(base + rng.integers(0, span + 1, int(rng.integers(1, 40)), dtype=np.uint64).astype(object),
                         lo, hi).astype(t)
        back = unpack_array(pack_array(values))
        assert back.dtype == values.dtype and np.array_equal(back, values), (t, base, span)
    starts = np.arange(1_700_000_000_000_000_000, 1_700_000_001_000_000_000, 1_000_000, dtype=np.int64)
    packed = pack_array(starts)
    assert packed[0] == "offset" and packed[-1].nbytes == starts.nbytes // 2
    assert np.array_equal(unpack_array(packed), starts)


def test_a_chunks_rows_split_into_partitions_in_order_whether_few_or_many():
    """dask_partition._split: each partition's rows, in row order, by a compare a partition
    (up to 8) or by one stable sort (more): both the selection by definition."""
    from roceview.engines.dask.partition import _split

    rng = np.random.default_rng(11)
    for k in (1, 2, 3, 8, 9, 33):
        rows = np.sort(rng.choice(1 << 17, 4000, replace=False))
        part = rng.integers(0, k, len(rows)).astype(np.uint64)
        if k > 2:
            part[:100] = k - 1                         # a run of one partition, as flows send
        got = _split(rows, part, k)
        assert len(got) == k
        for p, g in enumerate(got):
            assert np.array_equal(g, rows[part == p]), (k, p)


def test_a_part_changed_any_way_a_list_can_keeps_its_count():
    """Packed counts as it is appended to; any other change a list allows (extend, +=, insert,
    item assignment, del, pop, remove, clear, sort, reverse) counts it again (rev6: they left
    the count stale, 10 bytes against 30)."""
    from roceview.packets.wire import Packed, array_bytes

    def pack(n):
        return {"lengths": [n], "cols": {"a": ("raw", np.zeros(n, np.uint8))}, "valid": {}}

    part = Packed([pack(3)])
    changes = [lambda p: p.append(pack(5)), lambda p: p.extend([pack(7)]), lambda p: p.__iadd__([pack(11)]),
               lambda p: p.insert(0, pack(13)), lambda p: p.__setitem__(0, pack(1)),
               lambda p: p.__setitem__(slice(0, 2), [pack(2)]), lambda p: p.__delitem__(0), lambda p: p.pop(),
               lambda p: p.remove(p[0]), lambda p: p.sort(key=lambda q: q["lengths"][0]), lambda p: p.reverse(),
               lambda p: p.clear()]
    for change in changes:
        change(part)
        assert type(part) is Packed and part.nbytes() == array_bytes(list(part))
    part += [pack(4)]
    assert type(part) is Packed and part.nbytes() == 4
