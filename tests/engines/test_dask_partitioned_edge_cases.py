"""The partitioned Dask run (dask_run.analyze) against the local engine on edge cases of its
plan, wire formats and merge, run in this process: a client that runs each task at once
stands in for the cluster (the LocalCluster runs are in test_dask_partitioned.py).

Edge cases of the partitioned Dask run (dask_run, dask_partition, dask_plan, columns_wire,
analyze --each): edge cases found wrong, each against the local engine or the wire's contract.
The in-process client of test_dask_review.py stands in for the cluster."""
from pathlib import Path
import numpy as np
import pytest
import roceview
from roceview.capture.writer import write_pcap
from roceview.generate import generate
from roceview.render.export import CSV_FILES, write_csv_dir


CSVS = [name for name, _ in CSV_FILES]


class _Done:
    status = "finished"

    def __init__(self, value):
        self.value = value

    def result(self, timeout=None):
        return self.value

    def done(self):
        return True

    def exception(self, timeout=None):
        return None


def _resolved(x):
    if isinstance(x, _Done):
        return x.value
    if isinstance(x, list):
        return [_resolved(v) for v in x]
    return x


class _Client:
    """Runs every task as it is submitted, on `workers` partitions."""

    def __init__(self, workers: int = 2):
        self.workers = workers

    def nthreads(self):
        return {f"tcp://w{i}": 1 for i in range(self.workers)}

    def scheduler_info(self, **_):
        return {"workers": {w: {"status": "running"} for w in self.nthreads()}}

    def submit(self, fn, *args, **_):
        return _Done(fn(*[_resolved(a) for a in args]))

    def scatter(self, values, **_):
        return [_Done(v) for v in values]

    def close(self):
        pass


@pytest.fixture
def in_process(monkeypatch):
    """roceview.analyze(engine="dask") on the in-process client; a fall back to the
    driver-side path fails the test."""
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.run as run

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    monkeypatch.setattr(run, "connect", lambda scheduler, timeout=None: (_Client(), None))


def _csvs(result, directory: Path) -> dict:
    write_csv_dir(result, directory)
    return {name: (directory / name).read_bytes() for name in CSVS}


def same_as_local(paths, tmp_path: Path, **options):
    """The Dask run's CSVs, summary (warnings included) and facts equal the local engine's."""
    told = {"local": [], "dask": []}
    local = roceview.analyze(paths, warn=told["local"].append, **options)
    dask = roceview.analyze(paths, engine="dask", warn=told["dask"].append, **options)
    assert told["dask"] == told["local"]
    assert _csvs(dask, tmp_path / "d") == _csvs(local, tmp_path / "l")
    assert dask.summary == local.summary
    return local, dask


def _write_cut(cap, pieces: int, directory: Path, stem: str, shift: int = 0, ts=None) -> None:
    ts = cap.ts_ns if ts is None else ts
    bounds = np.linspace(0, len(cap), pieces + 1).astype(int)
    ends = np.cumsum(cap.lengths)
    starts = ends - cap.lengths
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        write_pcap(directory / f"{stem}_{i:05d}.pcap", cap.frames[starts[a]:ends[b - 1]], cap.lengths[a:b],
                   ts[a:b] + shift)


def _mirror_ports(directory: Path, scale: int, psn_shift: int = 0) -> Path:
    """Two captures of the same minutes (mirror ports), 333 ns apart; the second one's RoCEv2
    PSNs moved by `psn_shift` (unrelated captures of one flow: merge.FileSpans tells)."""
    cap = generate("incast", seed=3, scale=scale)
    frames = cap.frames.copy()
    starts = np.cumsum(cap.lengths) - cap.lengths
    for s in starts.tolist():      # 802.1Q, IPv4 (20-byte header), UDP to 4791: BTH at 46, PSN 55-57
        if psn_shift and bytes(frames[s + 12:s + 13]) == b"\x81" and bytes(frames[s + 40:s + 42]) == b"\x12\xb7":
            psn = (int.from_bytes(bytes(frames[s + 55:s + 58]), "big") + psn_shift) % (1 << 24)
            frames[s + 55:s + 58] = np.frombuffer(psn.to_bytes(3, "big"), np.uint8)
    directory.mkdir(parents=True, exist_ok=True)
    write_pcap(directory / "port_a.pcap", cap.frames, cap.lengths, cap.ts_ns)
    write_pcap(directory / "port_b.pcap", frames, cap.lengths, cap.ts_ns + 333)
    return directory


def _local_chunks(paths, chunk: int):
    """The chunks the local Analyzer is fed: (their sizes, every row's timestamp and file)."""
    from roceview.packets.read import iter_batches

    batches = list(iter_batches(paths, chunk_packets=chunk, prefetch=False, projection="analysis",
                                warn=lambda m: None))
    return ([b.n for b in batches], np.concatenate([b.cols["ts_ns"] for b in batches]),
            np.concatenate([b.cols["_file"] for b in batches]))


def _plan(paths, chunk: int):
    from roceview.capture.source import expand_paths
    from roceview.engines.dask.partition import read, times
    from roceview.engines.dask.plan import Plan
    from roceview.packets.read import time_ordered

    order, starts = time_ordered(expand_paths([str(paths)]))
    reads = [read(f, (), chunk, "analysis", 2) for f in order]
    return Plan(order, starts, [r["meta"] for r in reads], chunk, lambda m: None,
                lambda: [times(f, chunk) for f in order]), reads, order


@pytest.mark.parametrize("chunk, window", [(200, 50_000), (16384, 1 << 20)])
def test_plan_of_mirror_ports_cuts_files_as_their_reader_does(tmp_path, monkeypatch, chunk, window):
    """Two mirror ports (overlapping in time) of ~1 KB frames: their reader's chunks end at
    the end of its window (readers.MAP_WINDOW, made small here: 32 MB hold ~30 k such frames,
    fewer than the 65,536 rows of a file read alone or 32,768 of one read beside another).
    The plan's chunks and frames are the local engine's, and a file read beside the other has
    its spans observed in the chunks the local engine read it in (merge.FileSpans)."""
    import roceview.capture.readers as readers
    from roceview.engines.dask.partition import spans, times
    from roceview.engines.dask.plan import frames
    from roceview.packets.decode import decode_chunk, port_table
    from roceview.packets.merge import FileSpans
    from roceview.packets.read import MIN_MERGE_CHUNK

    monkeypatch.setattr(readers, "MAP_WINDOW", window)
    two = _mirror_ports(tmp_path / "two", 80 if chunk > MIN_MERGE_CHUNK else 20)
    sizes, ts, files = _local_chunks(two, chunk)
    plan, reads, order = _plan(two, chunk)
    assert plan.chunk_starts.tolist() == np.cumsum([0] + sizes[:-1]).tolist()
    at = [frames(g, np.arange(n)) for g, n in zip(plan.gidx, plan.n)]
    assert np.array_equal(np.concatenate([times(f, chunk) for f in order])[np.argsort(np.concatenate(at))], ts)
    assert np.array_equal(np.repeat(np.arange(2), plan.n)[np.argsort(np.concatenate(at))], files)
    rows = max(min(MIN_MERGE_CHUNK, chunk), chunk // 2)         # port_b, read beside port_a
    local = FileSpans(1)
    for c in readers.read_records(order[1], rows, lambda m: None):
        local.observe(0, decode_chunk(c, port_table(), 1, "analysis"))
    if plan.span_rows[1] == chunk:                              # read so on the worker (dask_run)
        got = reads[1]["meta"]["spans"]
    else:
        got = spans([reads[1]["parts"][p] for p in range(2)], plan.span_rows[1], plan.n[1])
    assert all(np.array_equal(a, b) for a, b in zip(got[2], local.folded()))


def test_mirror_ports_in_short_reader_chunks_identical_to_local(in_process, tmp_path, monkeypatch):
    """The plan cut the files as if every reader chunk held `rows` records: here an event's
    related frame (cnp: the CE-marked packet it answers) came out empty in events.csv."""
    import roceview.capture.readers as readers

    monkeypatch.setattr(readers, "MAP_WINDOW", 50_000)
    same_as_local(_mirror_ports(tmp_path / "two", 20, psn_shift=0x500000), tmp_path, chunk_packets=200)


def test_mirror_ports_read_beside_each_other_identical_to_local(in_process, tmp_path, monkeypatch):
    import roceview.capture.readers as readers

    monkeypatch.setattr(readers, "MAP_WINDOW", 1 << 20)
    same_as_local(_mirror_ports(tmp_path / "two", 80, psn_shift=0x500000), tmp_path, chunk_packets=16384)


def test_read_decodes_on_one_thread_and_puts_threads_back(tmp_path, monkeypatch):
    """A read task decodes on one thread (Dask gives each task a core); a cluster of threads
    (LocalCluster(processes=False)) runs it in the caller's process, whose decodes after it
    kept one thread: decode.THREADS stayed 1."""
    from roceview.packets import decode
    from roceview.engines.dask.partition import read

    monkeypatch.setattr(decode, "THREADS", 2)
    seen, decode_chunk = [], decode.decode_chunk

    def counted(*args, **kwargs):
        seen.append(decode.THREADS)
        return decode_chunk(*args, **kwargs)
    monkeypatch.setattr(decode, "decode_chunk", counted)
    read(str(Path(__file__).resolve().parents[2] / "captures" / "incast.pcap"), (), 100, "analysis", 2)
    assert seen and set(seen) == {1}
    assert decode.THREADS == 2


def _ring(d: Path, cap, ts=None, pieces: int = 3) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    _write_cut(cap, pieces, d, "r", ts=ts)
    return d


def _touching(d: Path, cap) -> Path:
    """The second file's first packet at the first file's last nanosecond: opened beside it."""
    ts = cap.ts_ns.copy()
    ts[len(ts) // 2] = ts[len(ts) // 2 - 1]
    return _ring(d, cap, ts, pieces=2)


def _backwards(d: Path, cap) -> Path:
    """Rows stamped back in time inside a file, and a row of the second file stamped before
    the first file's end (its first row after it: the files still follow each other)."""
    ts = cap.ts_ns.copy()
    ts[[40, 41]] = ts[[41, 40]]
    ts[[900, 902]] = ts[[902, 900]]
    k = len(ts) // 3
    ts[k + 5] = ts[k - 50]
    return _ring(d, cap, ts)


def _named_against_time(d: Path, cap) -> Path:
    d.mkdir(parents=True)
    for i, p in enumerate(sorted(_ring(d / "x", cap).iterdir())):
        p.rename(d / f"z_{9 - i}.pcap")
    return d


def _with_empty_and_other(d: Path, cap) -> Path:
    """A file without a packet (opened first by the local merge) and one of non-RoCE frames."""
    _ring(d, cap)
    write_pcap(d / "e.pcap", np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    frames = np.zeros((50, 64), np.uint8)
    frames[:, 12:14] = (0x88, 0xB5)                  # IEEE local experimental EtherType
    write_pcap(d / "z.pcap", frames.ravel(), np.full(50, 64), int(cap.ts_ns[-1]) + 1000 + 10 * np.arange(50))
    return d


def _truncated(d: Path, cap) -> Path:
    """The middle file ends inside a record: its warning, then the next file."""
    _ring(d, cap)
    middle = sorted(d.iterdir())[1]
    middle.write_bytes(middle.read_bytes()[:-30])
    return d


def _gzipped(d: Path, cap) -> Path:
    import gzip

    for p in list(_ring(d, cap).iterdir()):
        (d / (p.name + ".gz")).write_bytes(gzip.compress(p.read_bytes()))
        p.unlink()
    return d


def _pcapng_sections(d: Path, cap) -> Path:
    """pcapng files of two sections each (a section header and interface block mid-file: the
    reader ends a chunk there), the second on a microsecond interface."""
    from roceview.capture.writer import pcapng_bytes

    d.mkdir(parents=True)
    frames, ts = cap.frame_list(), cap.ts_ns.tolist()
    cuts = np.linspace(0, len(frames), 7).astype(int).tolist()
    for i in range(3):
        a, m, b = cuts[2 * i], cuts[2 * i] + (cuts[2 * i + 2] - cuts[2 * i]) // 3, cuts[2 * i + 2]
        first = pcapng_bytes(frames[a:m], ts[a:m])
        second = pcapng_bytes(frames[m:b], [t // 1000 * 1000 for t in ts[m:b]], interfaces=[(1, 6)])
        (d / f"s_{i}.pcapng").write_bytes(first + second)
    return d


@pytest.mark.parametrize("make, chunk", [
    (_ring, 100), (_ring, 333), (_ring, 1 << 16), (_touching, 100), (_backwards, 64), (_backwards, 1000),
    (_named_against_time, 100), (_with_empty_and_other, 100), (_truncated, 100), (_gzipped, 100),
    (_pcapng_sections, 100), (_pcapng_sections, 1000)])
def test_directories_identical_to_local(in_process, tmp_path, make, chunk):
    """Directories of captures (files that follow each other or not) through the plan from
    chunk summaries or the replayed merge: the local engine's CSVs, summary and warnings."""
    cap = generate("incast", seed=3, scale=20)                  # 3 k packets
    same_as_local(make(tmp_path / "in", cap), tmp_path, chunk_packets=chunk)


def test_one_file_of_a_directory_identical_to_local(in_process, tmp_path):
    cap = generate("incast", seed=3, scale=20)
    same_as_local(sorted(_backwards(tmp_path / "in", cap).iterdir())[1], tmp_path, chunk_packets=100)


def _incast_ring(directory: Path) -> None:
    """An incast of 3 k packets in three files that follow each other in time."""
    from test_dask_partitioned_edge_cases import _write_cut

    from roceview.generate import generate

    directory.mkdir(parents=True, exist_ok=True)
    _write_cut(generate("incast", seed=3, scale=20), 3, directory, "r")


def _appended(path: Path, cap, extra: int) -> None:
    """`extra` more records at the end of the pcap at `path` (a live capture still writing it)."""
    from roceview.capture.writer import write_pcap

    ends = np.cumsum(cap.lengths)
    grown = path.with_suffix(".tmp")
    write_pcap(grown, cap.frames[:ends[extra - 1]], cap.lengths[:extra], cap.ts_ns[-1] + 1000 + np.arange(extra))
    with open(path, "ab") as out:
        out.write(grown.read_bytes()[24:])          # the records, not the file header
    grown.unlink()


@pytest.mark.parametrize("chunk, window", [(200, 50_000), (16384, 50_000), (16384, 1 << 20)])
def test_files_growing_during_the_run_planned_as_read(in_process, tmp_path, monkeypatch, chunk, window):
    """Two mirror ports' captures still being written (overlapping in time: the plan is
    replayed on their timestamps and on the reader's cuts, both walked again on the workers):
    records appended after a file was read must not enter the plan, whose rows are those the
    read decoded (was: IndexError in Plan._positions). The local engine reads the files as
    they were; a reader window of 50 kB cuts chunks short (test_dask_review.py)."""
    import roceview
    import roceview.capture.readers as readers
    import roceview.engines.dask.partition as partition
    from roceview.generate import generate

    monkeypatch.setattr(readers, "MAP_WINDOW", window)
    two = _mirror_ports(tmp_path / "two", 20, psn_shift=0x500000)
    local = roceview.analyze(two, chunk_packets=chunk)       # the files as they were read
    cap, read = generate("incast", seed=3, scale=20), partition.read

    def read_then_grow(path, *args):
        out = read(path, *args)
        _appended(Path(path), cap, 50)
        return out
    monkeypatch.setattr(partition, "read", read_then_grow)
    dask = roceview.analyze(two, engine="dask", chunk_packets=chunk)
    assert _csvs(dask, tmp_path / "d") == _csvs(local, tmp_path / "l")


def test_a_file_cut_short_after_it_was_read_is_one_line(in_process, tmp_path, monkeypatch):
    """A file rewritten shorter after its read (a ring buffer reusing its oldest file): the
    replayed plan cannot have the rows the read decoded: BadInput naming the file (was an
    IndexError traceback in Plan._positions)."""
    import roceview
    import roceview.engines.dask.partition as partition
    from roceview.errors import BadInput

    two, read = _mirror_ports(tmp_path / "two", 20), partition.read

    def read_then_cut(path, *args):
        out = read(path, *args)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[:len(data) // 2])
        return out
    monkeypatch.setattr(partition, "read", read_then_cut)
    with pytest.raises(BadInput, match=r"port_a.pcap: changed while it was analysed \(\d+ records read, \d+ now\)"):
        roceview.analyze(two, engine="dask", chunk_packets=200)


def test_an_unreadable_file_on_the_local_cluster_is_one_line(tmp_path):
    """--engine dask without --scheduler (one LocalCluster, for --each one for every file): a
    file that is not a capture is one error line, as with the local engine; the workers' own
    "Compute Failed" log records (ERROR level, a traceback each) stay off stderr."""
    import subprocess
    import sys

    pytest.importorskip("dask.distributed")
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.pcap").write_bytes((repo / "captures" / "incast.pcap").read_bytes())
    (tmp_path / "in" / "b.pcap").write_bytes(b"not a capture at all" * 10)
    for each in ([], ["--each", "--csv", str(tmp_path / "out")]):
        run = subprocess.run([sys.executable, "-m", "roceview", "analyze", str(tmp_path / "in"), "--engine", "dask",
                              *each], cwd=repo, capture_output=True, text=True, timeout=300)
        lines = run.stderr.splitlines()
        assert run.returncode == 2, run.stderr
        assert [line for line in lines if not line.startswith("roceview: wrote ")] == \
            [f"roceview: error: {tmp_path / 'in' / 'b.pcap'}: not a pcap or pcapng capture"], run.stderr
        assert len(lines) == (2 if each else 1), run.stderr


def test_a_result_column_of_negative_zeros_crosses_the_wire_as_it_was():
    """columns_wire.pack_array (c4c4fb0: the partitions' result tables, dask_partition_run.
    to_wire) is lossless: a float column whose values are all zero, some of them -0.0, was
    sent as 'zeros' and came back +0.0."""
    from roceview.packets.wire import pack_array, unpack_array

    for values in (np.array([0.0, -0.0]), np.array([-0.0], np.float32), np.zeros((2, 2)) * -1,
                   np.array([0j, complex(-0.0, 0)])):
        back = unpack_array(pack_array(values))
        assert back.dtype == values.dtype and back.shape == values.shape
        assert np.array_equal(np.signbit(back.real), np.signbit(values.real)), values
    for values in (np.zeros(3), np.zeros(0), np.zeros(4, np.int64)):
        assert pack_array(values)[0] == "zeros"


def test_a_files_rows_are_not_kept_on_its_reader_once_they_arrived(tmp_path, monkeypatch):
    """c4c4fb0 sends a file's parts to their partitions' workers as soon as it is read; the
    driver still held every read's future (and every part's) until the analysis was submitted,
    so each row moved was in memory twice (on the worker that read it and on its partition's)
    through the read of the other files and the plan. Once the parts have arrived, no read
    and no part is kept in memory; the result is the local engine's."""
    import time

    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.plan as dask_plan

    _incast_ring(tmp_path)
    kept, gates = [], dask_plan.gates

    def looking(*args):
        client = distributed.default_client()
        for _ in range(600):                       # the arrived tasks run on: up to 30 s for them
            held = [k for k, where in client.who_has().items() if where]
            kept[:] = [k for k in held if str(k).startswith(("read-", "part-"))]
            arrived = [k for k in held if str(k).startswith("arrived-")]
            if not kept and len(arrived) == 3 * (2 + 1):      # files x (partitions + PFC)
                break
            time.sleep(0.05)
        return gates(*args)
    monkeypatch.setattr(dask_plan, "gates", looking)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as c:
        dask = roceview.analyze(tmp_path, engine="dask", scheduler=c.scheduler_address)
    assert not kept, kept
    assert _csvs(dask, tmp_path / "d") == _csvs(roceview.analyze(tmp_path), tmp_path / "l")


def _dies_once(marker, analyze):
    def analyzing(*args):
        import os

        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)                            # the worker dies with its partition's rows
        return analyze(*args)
    return analyzing


def test_a_worker_lost_with_arrived_rows_reads_them_again(tmp_path, monkeypatch):
    """No future of the reads is kept once their parts are sent: a worker lost with the rows
    that arrived there (its partition's) has them read again from the file, the result the
    local engine's."""
    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.partition as partition

    _incast_ring(tmp_path / "in")

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    # the first worker to feed a partition its part of a file dies; its partitions' runs are
    # lost with it and every partition is analyzed again once all the files are read
    monkeypatch.setattr(partition, "step", _dies_once(str(tmp_path / "died"), partition.step))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        dask = roceview.analyze(tmp_path / "in", engine="dask", scheduler=c.scheduler_address)
    assert (tmp_path / "died").exists()
    assert _csvs(dask, tmp_path / "d") == _csvs(roceview.analyze(tmp_path / "in"), tmp_path / "l")


def _ring_with_other_frames(d: Path) -> Path:
    """Files that follow each other in time, some of a few rows (joined into one chunk with
    their neighbours: packets.coalesced), and two of non-RoCE frames only (chunks without an
    analyzed row), one between RoCE files, one at the end."""
    from roceview.capture.writer import write_pcap
    from roceview.generate import generate

    cap = generate("incast", seed=3, scale=20)
    cap.ts_ns = cap.ts_ns.copy()
    cap.ts_ns[7:] += 10 ** 9                     # room for the non-RoCE file after the first 7 rows
    ends = np.cumsum(cap.lengths)
    starts, bounds = ends - cap.lengths, [0, 7, 1000, 1003, 2000, len(cap)]
    d.mkdir(parents=True)
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        write_pcap(d / f"r_{2 * i:02d}.pcap", cap.frames[starts[a]:ends[b - 1]], cap.lengths[a:b], cap.ts_ns[a:b])
    for name, n, t0 in (("r_01", 30, int(cap.ts_ns[6]) + 1000), ("r_11", 500, int(cap.ts_ns[-1]) + 10)):
        frames = np.zeros((n, 64), np.uint8)
        frames[:, 12:14] = (0x88, 0xB5)          # IEEE local experimental EtherType
        write_pcap(d / f"{name}.pcap", frames.ravel(), np.full(n, 64), t0 + 10 * np.arange(n))
    return d


@pytest.mark.parametrize("chunk", [64, 100, 333, 1 << 16])
def test_last_analyzed_rows_of_files_in_sequence_from_their_chunks(in_process, tmp_path, chunk):
    """663e01f: a plan of files in sequence takes each chunk's last analyzed row (the pairing
    gate, engine.ChunkAnalysis) from the read chunks' (-1: none), not from a bit per row: the
    same per chunk as from the bits, chunks without an analyzed row and chunks joined across
    files included; the run is the local engine's."""
    from test_dask_partitioned import _plans

    from roceview.engines.dask.plan import NONE, last_analyzed

    d = _ring_with_other_frames(tmp_path / "in")
    (quick, replayed), asked, _ = _plans([d], chunk)
    assert not asked and quick.last_analyzed is not None
    got, want = last_analyzed(quick, quick.bits), last_analyzed(replayed, replayed.bits)
    assert got.tolist() == want.tolist()
    assert (got == NONE).any() or chunk > 1000
    same_as_local(d, tmp_path, chunk_packets=chunk)


_LIBRARY_PROBE = r"""
import roceview.capture.memory as memory
from roceview.engines.dask.run import _ready_for_merge
calls, keep = [], memory.keep_freed_memory
memory.keep_freed_memory = lambda: calls.append(1) or keep()
_ready_for_merge(2_000_000)                 # the Dask driver, in a library caller's process
print(len(calls), memory.touch_heap(64 << 20))
keep()                                      # the CLI's process (cli.entry)
print(memory.touch_heap(64 << 20))
"""


def test_the_dask_driver_leaves_a_library_callers_malloc_settings_alone():
    """dask_run._ready_for_merge (c4c4fb0) faulted in the merge's heap through touch_heap,
    which set keep_freed_memory (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD: up to 1 GB of freed heap
    kept) in the caller's process: 'the CLI calls it (it owns its process)'. It touches only
    where the process keeps freed memory already."""
    import platform
    import subprocess
    import sys

    if not (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"):
        pytest.skip("glibc malloc only")
    out = subprocess.run([sys.executable, "-c", _LIBRARY_PROBE], cwd=Path(__file__).resolve().parents[2],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "False", "True"], out
