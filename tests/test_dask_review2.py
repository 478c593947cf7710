"""Second review of the partitioned Dask run (dask_run, dask_partition, dask_plan, columns_wire,
analyze --each): edge cases found wrong, each against the local engine or the wire's contract.
The in-process client of test_dask_review.py stands in for the cluster."""
from pathlib import Path

import numpy as np
import pytest

from test_dask_review import _csvs, _mirror_ports, in_process, same_as_local  # noqa: F401 (fixture)


def _ring(directory: Path) -> None:
    """An incast of 3 k packets in three files that follow each other in time."""
    from test_dask_review import _write_cut

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
    repo = Path(__file__).resolve().parents[1]
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

    _ring(tmp_path)
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


def _dies_once(marker, analyse):
    def analysing(*args):
        import os

        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)                            # the worker dies with its partition's rows
        return analyse(*args)
    return analysing


def test_a_worker_lost_with_arrived_rows_reads_them_again(tmp_path, monkeypatch):
    """No future of the reads is kept once their parts are sent: a worker lost with the rows
    that arrived there (its partition's) has them read again from the file, the result the
    local engine's."""
    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.partition as partition

    _ring(tmp_path / "in")

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    # the first worker to feed a partition its part of a file dies; its partitions' runs are
    # lost with it and every partition is analysed again once all the files are read
    monkeypatch.setattr(partition, "step", _dies_once(str(tmp_path / "died"), partition.step))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        dask = roceview.analyze(tmp_path / "in", engine="dask", scheduler=c.scheduler_address)
    assert (tmp_path / "died").exists()
    assert _csvs(dask, tmp_path / "d") == _csvs(roceview.analyze(tmp_path / "in"), tmp_path / "l")


def _ring_with_other_frames(d: Path) -> Path:
    """Files that follow each other in time, some of a few rows (joined into one chunk with
    their neighbours: packets.coalesced), and two of non-RoCE frames only (chunks without an
    analysed row), one between RoCE files, one at the end."""
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
def test_last_analysed_rows_of_files_in_sequence_from_their_chunks(in_process, tmp_path, chunk):
    """663e01f: a plan of files in sequence takes each chunk's last analysed row (the pairing
    gate, engine.ChunkAnalysis) from the read chunks' (-1: none), not from a bit per row: the
    same per chunk as from the bits, chunks without an analysed row and chunks joined across
    files included; the run is the local engine's."""
    from test_dask_partitioned import _plans

    from roceview.engines.dask.plan import NONE, last_analysed

    d = _ring_with_other_frames(tmp_path / "in")
    (quick, replayed), asked, _ = _plans([d], chunk)
    assert not asked and quick.last_analysed is not None
    got, want = last_analysed(quick, quick.bits), last_analysed(replayed, replayed.bits)
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
    out = subprocess.run([sys.executable, "-c", _LIBRARY_PROBE], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "False", "True"], out
