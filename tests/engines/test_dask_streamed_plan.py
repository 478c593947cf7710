"""The partitioned Dask run analyzing each file's part as the file is read (dask_stream,
dask_run._streamed): the chunks and decisions handed out file by file are the whole capture's
Plan and gates, and the runs fed them give the local engine's result."""
from __future__ import annotations

import numpy as np
import pytest

from roceview.engines.dask.plan import NONE, Plan, gates
from roceview.engines.dask.plan_stream import StreamPlan
from roceview.generate import generate
from test_dask_partitioned_edge_cases import _backwards, _gzipped, _mirror_ports, _pcapng_sections, _ring, _truncated, in_process, \
    same_as_local  # noqa: F401  (in_process: a fixture)

POOL = np.arange(40, dtype=np.uint64)


def _metas(rng, files: int, target: int) -> tuple[list, list[dict]]:
    """Summaries of files that follow each other in time, as dask_partition.read gives them:
    chunks of any size up to `target` (small ones, joined across files by the plan), some
    without an analyzed row, and flows first seen in any file, in any PSN space or none."""
    metas, t = [], 1_000
    for _ in range(files):
        sizes = rng.integers(1, target + 1, rng.integers(1, 6)).tolist()
        chunks, first_ts, row = [], t, 0
        for n in sizes:
            lo, hi = t, t + n * 10
            at = -1 if rng.random() < 0.2 else row + int(rng.integers(0, n))
            chunks.append((n, lo, hi, at))
            t, row = hi + 10, row + n
        keys = rng.choice(POOL, size=min(len(POOL), int(rng.integers(0, 12))), replace=False)
        first = np.full((4, len(keys)), -1, np.int64)
        first[0] = rng.integers(0, row, len(keys))
        for space in (1, 2, 3):
            seen = rng.random(len(keys)) < 0.6
            first[space] = np.where(seen, np.minimum(first[0] + rng.integers(0, 50, len(keys)), row - 1), -1)
        flows = {"src": np.column_stack([keys % 3, keys % 5]), "dst": np.column_stack([keys % 7, keys]),
                 "qp": (keys * 17).astype(np.uint32), "first": first}
        metas.append({"n": row, "chunks": chunks, "first_ts": first_ts, "flows": flows, "warnings": [],
                      "backwards": (0, 0, [])})
    return [m["first_ts"] for m in metas], metas


@pytest.mark.parametrize("seed", range(40))
def test_stream_plan_hands_out_the_plans_chunks_and_decisions(seed):
    """File by file, the chunks closed and their decisions are the whole capture's Plan and
    gates (only ever chunks whose rows are all read), so the run fed them is the local one."""
    rng = np.random.default_rng(seed)
    target = int(rng.choice([4, 16, 100]))
    starts, metas = _metas(rng, int(rng.integers(1, 7)), target)
    stream, handed, decided = StreamPlan(starts, target), [], []
    for k, meta in enumerate(metas):
        assert stream.follows(k, meta)
        chunk_starts, gate, end = stream.add(meta)
        assert end <= stream.rows and all(s < end for s in chunk_starts.tolist())
        handed.append(chunk_starts)
        decided.append(gate)
    chunk_starts, gate, _ = stream.finish()
    handed.append(chunk_starts)
    decided.append(gate)
    plan = Plan([f"f{k}" for k in range(len(metas))], starts, metas, target, lambda m: None, lambda: None)
    whole, _ = gates(plan, [m["flows"] for m in metas], None)
    assert np.concatenate(handed).tolist() == plan.chunk_starts[:plan.n_chunks].tolist()
    read = plan.last_analyzed != NONE            # the Analyzer reads the decisions of these alone
    assert np.concatenate(decided)[read].tolist() == whole[:plan.n_chunks][read].tolist()
    assert stream.agrees(plan, whole)
    assert not read.any() or not stream.agrees(plan, ~whole)


def test_a_file_not_after_the_one_before_stops_the_stream():
    rng = np.random.default_rng(1)
    starts, metas = _metas(rng, 3, 16)
    stream = StreamPlan(starts, 16)
    assert stream.follows(0, metas[0])
    late = dict(metas[1], first_ts=metas[1]["first_ts"] + 1)      # not the time it was ordered by
    assert not stream.follows(1, late)
    assert not stream.follows(1, dict(metas[1], n=0, chunks=[]))
    touching = [starts[0], metas[0]["chunks"][-1][2], starts[2]]   # starts at file 0's last packet
    assert not StreamPlan(touching, 16).follows(0, metas[0])


@pytest.mark.parametrize("make, chunk", [(_ring, 100), (_ring, 333), (_backwards, 64), (_truncated, 100),
                                         (_gzipped, 100), (_pcapng_sections, 100)])
def test_files_in_sequence_are_analyzed_as_they_come(in_process, tmp_path, monkeypatch, make, chunk):
    """Files that follow each other: never analyzed all at once (partition.analyze_partition), and
    the local engine's CSVs, summary and warnings."""
    import roceview.engines.dask.partition as partition

    def at_once(*args):
        raise AssertionError("analysed at once")
    monkeypatch.setattr(partition, "analyze_partition", at_once)
    same_as_local(make(tmp_path / "in", generate("incast", seed=3, scale=20)), tmp_path, chunk_packets=chunk)


def test_files_overlapping_in_time_are_analyzed_at_once(in_process, tmp_path, monkeypatch):
    import roceview.engines.dask.partition as partition

    def fed(*args):
        raise AssertionError("fed as the files came")
    monkeypatch.setattr(partition, "step", fed)
    same_as_local(_mirror_ports(tmp_path / "in", 20), tmp_path, chunk_packets=500)


def test_a_stream_that_disagrees_with_the_plan_is_analyzed_again(in_process, tmp_path, monkeypatch):
    """Should the chunks or decisions handed out differ from the whole capture's, the streamed
    runs are dropped and every partition analyzed at once: the local result still."""
    import roceview.engines.dask.partition as partition
    import roceview.engines.dask.plan_stream as stream

    again = []
    analyze = partition.analyze_partition
    monkeypatch.setattr(stream.StreamPlan, "agrees", lambda self, plan, gate: False)
    monkeypatch.setattr(partition, "analyze_partition", lambda *args: again.append(1) or analyze(*args))
    same_as_local(_ring(tmp_path / "in", generate("incast", seed=3, scale=20)), tmp_path, chunk_packets=100)
    assert again


def test_each_chunk_is_fed_once_whole_as_when_analyzed_at_once(in_process, tmp_path, monkeypatch):
    """Files whose last chunks are joined with the next file's first (packets.coalesced: 100-row
    chunks, tails of fewer than 50 rows): a file's rows past its last closed chunk wait for the
    next file, so every partition is fed each chunk once, with the rows the run that analyses
    every partition at once feeds it."""
    import roceview
    import roceview.engines.dask.partition_run as run
    import roceview.engines.dask.plan_stream as stream

    fed, chunks = [], run.chunks

    def recorded(pieces, chunk_starts):
        for c, batch in chunks(pieces, chunk_starts):
            fed[-1].append((c, tuple(batch.cols["_gidx"].tolist())))
            yield c, batch
    monkeypatch.setattr(run, "chunks", recorded)
    d = _ring(tmp_path / "in", generate("incast", seed=3, scale=20), pieces=7)
    for agrees in (stream.StreamPlan.agrees, lambda self, plan, gate: False):
        monkeypatch.setattr(stream.StreamPlan, "agrees", agrees)
        fed.append([])
        roceview.analyze(d, engine="dask", chunk_packets=100)
    streamed, at_once = fed[0], fed[-1][len(fed[0]):]      # the second run streamed, then analyzed again
    assert len({c for c, _ in streamed}) > 20
    assert sorted(streamed) == sorted(at_once)


def test_a_later_file_beside_the_one_before_reads_the_files_again(in_process, tmp_path, monkeypatch):
    """The third of four files opens at the second's last nanosecond (the local engine reads them
    side by side): the parts of the files fed before were freed, so every file is read again
    and every partition analyzed at once; the local result."""
    import roceview.engines.dask.partition as partition

    cap = generate("incast", seed=3, scale=20)
    ts = cap.ts_ns.copy()
    cut = np.linspace(0, len(cap), 5).astype(int)[2]
    ts[cut] = ts[cut - 1]
    reads, read = [], partition.read
    monkeypatch.setattr(partition, "read", lambda path, *args: reads.append(path) or read(path, *args))
    same_as_local(_ring(tmp_path / "in", cap, ts, pieces=4), tmp_path, chunk_packets=100)
    assert len(reads) == 8 and sorted(reads[:4]) == sorted(reads[4:])


def test_a_restart_holds_nothing_of_the_first_attempt(in_process, tmp_path, monkeypatch):
    """The stream stopped after parts were fed (the third of four files opens at the second's
    last nanosecond): the first attempt's futures (its reads, the parts not yet fed, its runs)
    are dropped before the files are read again, not held on the workers through the second."""
    import gc

    import roceview.engines.dask.run as run
    from test_dask_partitioned_edge_cases import _Done

    cap = generate("incast", seed=3, scale=20)
    ts = cap.ts_ns.copy()
    cut = np.linspace(0, len(cap), 5).astype(int)[2]
    ts[cut] = ts[cut - 1]
    held, analyze = [], run.analyze

    def again(*args, stream=True, **kwargs):
        if not stream:
            gc.collect()
            held.append(sum(isinstance(o, _Done) for o in gc.get_objects()))
        return analyze(*args, stream=stream, **kwargs)
    monkeypatch.setattr(run, "analyze", again)
    same_as_local(_ring(tmp_path / "in", cap, ts, pieces=4), tmp_path, chunk_packets=100)
    assert held == [0]


def test_the_scheduler_lost_while_the_runs_finish_is_one_line(tmp_path, monkeypatch):
    """The scheduler gone while the driver waits for the partitions' runs (dask_run._kept asks
    it for its workers): one line (BadInput), not a traceback."""
    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.run as run
    from roceview.errors import BadInput

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "2s")
    d = _ring(tmp_path / "in", generate("incast", seed=3, scale=20))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        ready = run._ready_for_merge
        monkeypatch.setattr(run, "_ready_for_merge", lambda rows: c.close() or ready(rows))
        with pytest.raises(BadInput, match="could not complete .analysing partitions"):
            roceview.analyze(d, engine="dask", scheduler=c.scheduler_address, chunk_packets=100)


def test_a_worker_lost_once_its_runs_are_done_analyses_again(tmp_path, monkeypatch):
    """The worker holding a partition's result dies once the runs are all done, before the
    driver has fetched it: the result, lost, would be recomputed from runs pinned to the gone
    worker, waiting for ever; the files are read again and every partition analyzed at once."""
    import os
    import signal
    import threading
    import time

    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.client as engine
    from test_dask_partitioned_edge_cases import _csvs

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    done, exception = [], distributed.Future.exception

    def killing(self, *args, **kwargs):
        out = exception(self, *args, **kwargs)      # TimeoutError while not done
        done.append(self.key)
        if len(done) == 3:                          # the last partition's run (2 workers: 3 partitions)
            (where,) = self.client.who_has([self])[self.key]
            os.kill(self.client.run(os.getpid, workers=[where])[where], signal.SIGKILL)
            for _ in range(100):
                if where not in self.client.nthreads():
                    break
                time.sleep(0.1)
        return out
    monkeypatch.setattr(distributed.Future, "exception", killing)
    d = _ring(tmp_path / "in", generate("incast", seed=3, scale=20))
    out = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        run = threading.Thread(target=lambda: out.append(roceview.analyze(d, engine="dask", chunk_packets=100,
                                                                          scheduler=c.scheduler_address)),
                               daemon=True)
        run.start()
        run.join(60)
        assert not run.is_alive(), "the run waits for a lost result for ever"
    assert len(done) >= 3
    assert _csvs(out[0], tmp_path / "d") == _csvs(roceview.analyze(d, chunk_packets=100), tmp_path / "l")


def _fails(step):
    def failing(run, file_parts, offset, *args):
        if offset:                                  # the second file's part
            raise RuntimeError("a step failed")
        return step(run, file_parts, offset, *args)
    return failing


def test_a_step_that_fails_is_one_line(tmp_path, monkeypatch):
    """A partition's run raising on a later file: the driver tells it in one line (BadInput),
    no result, whether it notices while the runs finish or while their results are fetched."""
    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.partition as partition
    from roceview.errors import BadInput

    monkeypatch.setattr(partition, "step", _fails(partition.step))
    d = _ring(tmp_path / "in", generate("incast", seed=3, scale=20))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        with pytest.raises(BadInput, match=r"analysing partition 1 of 3: RuntimeError: a step failed\); no result"):
            roceview.analyze(d, engine="dask", scheduler=c.scheduler_address, chunk_packets=100)


def test_a_worker_lost_analyzing_overlapping_files_reads_its_rows_again(tmp_path, monkeypatch):
    """test_dask_review2's lost worker now dies in a streamed step; files overlapping in time
    are still analyzed at once from the parts that arrived: a worker lost with them has them
    read again (no future of the reads kept), the local result."""
    distributed = pytest.importorskip("dask.distributed")
    import roceview
    import roceview.engines.dask.client as engine
    import roceview.engines.dask.partition as partition
    from test_dask_partitioned_edge_cases import _csvs
    from test_dask_partitioned_edge_cases import _dies_once

    def fallback(*args, **kwargs):
        raise AssertionError("fell back to the driver-side analysis")
    monkeypatch.setattr(engine, "DaskBatches", fallback)
    monkeypatch.setattr(partition, "analyze_partition", _dies_once(str(tmp_path / "died"), partition.analyze_partition))
    d = _mirror_ports(tmp_path / "in", 20)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        dask = roceview.analyze(d, engine="dask", scheduler=c.scheduler_address, chunk_packets=500)
    assert (tmp_path / "died").exists()
    assert _csvs(dask, tmp_path / "d") == _csvs(roceview.analyze(d, chunk_packets=500), tmp_path / "l")


def _cut_with_pfc(rng, d, cap):
    """`cap` cut at random rows into files in sequence, with files of a few PFC frames (only
    the PFC partition gets rows) or of other frames (no analyzed row) between some of them."""
    from roceview.capture.writer import write_pcap

    d.mkdir(parents=True)
    bounds = np.unique(np.r_[0, rng.integers(1, len(cap), int(rng.integers(0, 6))), len(cap)])
    ends = np.cumsum(cap.lengths)
    starts = ends - cap.lengths
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        write_pcap(d / f"r_{2 * i:03d}.pcap", cap.frames[starts[a]:ends[b - 1]], cap.lengths[a:b], cap.ts_ns[a:b])
        gap = int(cap.ts_ns[b]) - int(cap.ts_ns[b - 1]) if b < len(cap) else 0
        if gap > 8 and rng.random() < 0.6:
            m = min(4, gap // 2 - 1)
            frames = np.zeros((m, 64), np.uint8)
            if rng.random() < 0.7:                  # 802.1Qbb PFC: MAC control opcode 0x0101
                frames[:, 0:16] = (1, 0x80, 0xC2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08, 1, 1)
                frames[:, 17] = rng.integers(0, 256, m)
                frames[:, 18:34] = rng.integers(0, 256, (m, 16))
            else:
                frames[:, 12:14] = (0x88, 0xB5)      # IEEE local experimental EtherType
            write_pcap(d / f"r_{2 * i + 1:03d}.pcap", frames.ravel(), np.full(m, 64),
                       int(cap.ts_ns[b - 1]) + 1 + np.arange(m))
    return d


@pytest.mark.parametrize("seed", range(8))
def test_random_files_in_sequence_identical_to_local(in_process, tmp_path, seed):
    """Scenarios cut into files in sequence at random rows, PFC-only and non-RoCE files between,
    chunks of 1 to 333 rows, facts on or off: the streamed run is the local engine's."""
    from roceview.generate import SCENARIOS

    rng = np.random.default_rng(seed)
    cap = generate(sorted(SCENARIOS)[seed * 5 % len(SCENARIOS)], seed=seed, scale=4)
    chunk = int(rng.choice([1, 2, 3, 7, 50, 101, 333] if len(cap) < 1000 else [7, 50, 101, 333]))
    same_as_local(_cut_with_pfc(rng, tmp_path / "in", cap), tmp_path, chunk_packets=chunk,
                  pmtu=int(rng.choice([1024, 4096])), diagnose=bool(rng.random() < 0.5))


def test_a_worker_paused_for_good_gives_up_the_stream(tmp_path, monkeypatch):
    """A worker that Dask's memory monitor keeps paused runs no task: its partitions' runs,
    pinned to it, would wait for ever. Paused for PAUSED_PATIENCE seconds, it costs the run its
    stream: every partition analyzed at once, on the workers still running; the local result."""
    distributed = pytest.importorskip("dask.distributed")
    import threading

    import dask

    import roceview
    import roceview.engines.dask.run as run
    from distributed.core import Status
    from test_dask_partitioned_edge_cases import _csvs

    monkeypatch.setattr(run, "PAUSED_PATIENCE", 1.0)
    d = _ring(tmp_path / "in", generate("incast", seed=3, scale=20), pieces=4)

    def pause(dask_worker):
        dask_worker.status = Status.paused

    with dask.config.set({"distributed.worker.memory.pause": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c) as client:
        client.run(pause, workers=[sorted(client.nthreads())[1]])
        got = []
        running = threading.Thread(target=lambda: got.append(
            roceview.analyze(d, engine="dask", scheduler=c.scheduler_address, chunk_packets=500)), daemon=True)
        running.start()
        running.join(60)
        assert not running.is_alive(), "waited for the paused worker"
        assert [s["status"] for s in client.scheduler_info(n_workers=-1)["workers"].values()].count("paused") == 1
    assert _csvs(got[0], tmp_path / "d") == _csvs(roceview.analyze(d, chunk_packets=500), tmp_path / "l")
