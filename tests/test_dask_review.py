"""The partitioned Dask run (dask_run.analyze) against the local engine on edge cases of its
plan, wire formats and merge, run in this process: a client that runs each task at once
stands in for the cluster (the LocalCluster runs are in test_dask_partitioned.py)."""
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
    monkeypatch.setattr(run, "connect", lambda scheduler: (_Client(), None))


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
    read(str(Path(__file__).resolve().parents[1] / "captures" / "incast.pcap"), (), 100, "analysis", 2)
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
