"""How far `analyze --engine dask` scales on this machine at best: the same work, less each cost.

    python benchmarks/bench_dask_bounds.py [--dir /tmp/roceview-bench-dask] [--repeat 5]

bench_dask.py measures the product's run. This runs the very tasks its workers run
(engines.dask.partition.read, step and finished, fed the chunks plan_stream.StreamPlan closes,
as run._streamed feeds them) with the driver's plan made beforehand (it needs each file's
summary: every file is read once before the clock starts), on the ring buffer bench_dask.py
makes, in two more ways, 1 and 2 at a time:

- processes: plain processes, no Dask. Process i reads files i, i + n, ... and analyses the
  partitions p with p mod n = i; the parts of the files another process reads it takes from
  its own copy, read before the clock starts: a hand-over that costs nothing. What the
  engine's own work allows (memory and caches shared by the two cores included).
- dask-minimal: the same tasks on a LocalCluster as `analyze --engine dask` makes it
  (engines.dask.client.local_cluster), all submitted at once (no round trip to the driver per file,
  no merge, no diagnoser): file k read on worker k mod n, its own partitions' steps fed from
  the read's result, the other partitions' parts fetched by `arrived` tasks as in the
  product's run. What Dask's own costs leave (its event loops, scheduler and client run on
  the second core in a 1-worker run, and on the cores that do the work with 2).

Round by round (each configuration once, then again: a slow minute slows 1 and 2 alike), the
processes first (started once, a first round to warm them not counted), then the clusters
(a new one each round, timed on its second run): only the configuration measured works (the
other configuration's processes wait on their pipes; one cluster at a time). Prints
the median wall time, packets/s and CPU of each (a Dask row's CPU is its worker processes'),
and the scaling efficiency rate(2) / (2 x rate(1)) from the medians and round by round.
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CHUNK = 1 << 16                            # the local engine's chunk (api.DEFAULT_CHUNK)
OPTIONS = (None, 100.0, 1.0, True)         # pmtu, link_speed, bucket_ms, facts: analyze's defaults


def plan(order: list[str], starts: list, n: int, keep=lambda k: False) -> tuple[list, tuple, list, int]:
    """Every file read once: ((offset, the chunks it closes) per file, the chunks left at the
    end, the parts of each file k with keep(k) (others None), the packets), as
    engines.dask.run._streamed hands them to steps."""
    from roceview.engines.dask.partition import read
    from roceview.engines.dask.plan_stream import StreamPlan

    stream, closed, parts = StreamPlan(starts, CHUNK), [], []
    for k, path in enumerate(order):
        got = read(path, (), CHUNK, "analysis", n)
        offset = stream.rows
        closed.append((offset, stream.add(got["meta"])))
        parts.append(got["parts"] if keep(k) else None)
    return closed, stream.finish()[:2], parts, stream.rows


def process(me: int, n: int, order: list[str], starts: list, conn, barrier) -> None:
    """Plain process `me` of n: on each "go", its files read and its partitions analyzed."""
    from roceview.capture.memory import keep_freed_memory
    from roceview.engines.dask.partition import finished, read, step

    keep_freed_memory()
    closed, last, copy, _ = plan(order, starts, n, keep=lambda k: k % n != me)   # the others' files
    mine = [p for p in range(n + 1) if p % n == me]          # n partitions and the PFC one
    conn.send("ready")
    while conn.recv() == "go":
        barrier.wait()
        t0, cpu0 = time.monotonic(), time.process_time()
        runs = dict.fromkeys(mine)
        for k, path in enumerate(order):
            parts = read(path, (), CHUNK, "analysis", n)["parts"] if k % n == me else copy[k]
            for p in mine:
                runs[p] = step(runs[p], parts[p], closed[k][0], *closed[k][1], *OPTIONS)
        for p in mine:
            finished(runs[p], *last)
        conn.send((t0, time.monotonic(), time.process_time() - cpu0))


class Processes:
    """n plain processes, idle between rounds (blocked on their pipe: no CPU)."""

    def __init__(self, n: int, order: list[str], starts: list):
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(n)
        self.conns = []
        for me in range(n):
            ours, theirs = ctx.Pipe()
            ctx.Process(target=process, args=(me, n, order, starts, theirs, barrier), daemon=True).start()
            theirs.close()                  # a process that dies ends our recv (EOFError), not hangs it
            self.conns.append(ours)
        for conn in self.conns:
            assert conn.recv() == "ready"

    def round(self) -> dict:
        for conn in self.conns:
            conn.send("go")
        done = [conn.recv() for conn in self.conns]
        return {"wall_s": round(max(e for _, e, _ in done) - min(s for s, _, _ in done), 3),
                "cpu_s": sorted(round(c, 2) for _, _, c in done)}

    def close(self) -> None:
        for conn in self.conns:
            conn.send("stop")


def _on_read(run, got: dict, p: int, *args):
    """A step fed its part from the read's result itself (read on this worker: no transfer)."""
    from roceview.engines.dask.partition import step

    return step(run, got["parts"][p], *args)


class Minimal:
    def __init__(self, n: int, order: list[str], closed: list, last: tuple):
        from dask.distributed import Client

        from roceview.engines.dask.client import local_cluster

        self.n, self.order, self.closed, self.last = n, order, closed, last
        self.cluster = local_cluster(n)
        self.client = Client(self.cluster, set_as_default=False)
        self.client.run(lambda: __import__("roceview.engines.dask.partition_run"))
        self.workers = sorted(self.client.nthreads())

    def round(self) -> dict:
        from roceview.engines.dask.partition import arrived, finished, part, read, step

        client, n, submit = self.client, self.n, self.client.submit
        cpu0, t0 = client.run(time.process_time), time.monotonic()
        runs = [None] * (n + 1)
        for k, path in enumerate(self.order):
            got = submit(read, path, (), CHUNK, "analysis", n, pure=False,
                         workers=[self.workers[k % n]], allow_other_workers=True)
            for p in range(n + 1):
                on, args = {"workers": [self.workers[p % n]]}, (self.closed[k][0], *self.closed[k][1], *OPTIONS)
                if p % n == k % n:
                    runs[p] = submit(_on_read, runs[p], got, p, *args, pure=False, priority=1, **on)
                else:
                    moved = submit(arrived, submit(part, got, p, pure=False, priority=1), pure=False, priority=1,
                                   allow_other_workers=True, **on)
                    runs[p] = submit(step, runs[p], moved, *args, pure=False, priority=1, **on)
        client.gather([submit(finished, runs[p], *self.last, pure=False, priority=1, workers=[self.workers[p % n]])
                       for p in range(n + 1)])
        wall, cpu = time.monotonic() - t0, client.run(time.process_time)
        return {"wall_s": round(wall, 3), "cpu_s": sorted(round(cpu[w] - cpu0[w], 2) for w in cpu)}

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "roceview-bench-dask")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    from bench_dask import _median_row, make_ring

    from roceview.capture.memory import keep_freed_memory
    from roceview.capture.source import expand_paths
    from roceview.packets.read import time_ordered

    keep_freed_memory()
    if not a.dir.exists() or len(list(a.dir.glob("ring_*.pcap"))) < 8:
        make_ring(a.dir, 8, 1_000_000)
    order, starts = time_ordered(expand_paths([str(a.dir)]))
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    rounds = _processes(order, starts, a.repeat)
    plans = {n: plan(order, starts, n) for n in (1, 2)}
    rounds.update(_minimal(order, plans, a.repeat))
    packets = plans[1][3]
    for (mode, n), rows in rounds.items():
        row = _median_row(rows)                                     # the median round, every wall beside it
        print(json.dumps({"mode": mode, "workers": n, "packets": packets, **row,
                          "pkt_per_s": round(packets / row["wall_s"])}), flush=True)
    for mode in ("processes", "dask-minimal"):
        one, two = rounds[(mode, 1)], rounds[(mode, 2)]
        median = statistics.median(r["wall_s"] for r in one) / (2 * statistics.median(r["wall_s"] for r in two))
        paired = sorted(x["wall_s"] / (2 * y["wall_s"]) for x, y in zip(one, two))
        print(f"{mode}: scaling efficiency with 2 = {median:.0%} of 2x the rate of 1 (medians); "
              f"round by round {', '.join(f'{e:.0%}' for e in paired)}")


def _processes(order: list[str], starts: list, repeat: int) -> dict:
    """1 and 2 plain processes, round by round (the first round, warming their heaps, not
    counted); no cluster alive meanwhile (an idle one's ~0.1 CPU s a round falls on the
    second core with 1 process and on the work with 2)."""
    runners = {("processes", n): Processes(n, order, starts) for n in (1, 2)}
    rounds: dict[tuple, list] = {c: [] for c in runners}
    try:
        for r in range(repeat + 1):
            for config, runner in runners.items():
                row = runner.round()
                if r:
                    rounds[config].append(row)
    finally:
        for runner in runners.values():
            runner.close()
    return rounds


def _minimal(order: list[str], plans: dict, repeat: int) -> dict:
    """1 and 2 workers, round by round, each round on a new cluster (the only one alive),
    timed on its second run (the first warms its workers, as on a long-lived cluster and as
    bench_dask.py times the product)."""
    import distributed  # noqa: F401  (its loggers, levels set from its configuration)

    for name in [m for m in logging.root.manager.loggerDict if m.startswith("distributed")]:
        logging.getLogger(name).setLevel(logging.ERROR)      # a cluster's closing, told at INFO
    rounds: dict[tuple, list] = {("dask-minimal", n): [] for n in (1, 2)}
    for _ in range(repeat):
        for n in (1, 2):
            runner = Minimal(n, order, *plans[n][:2])
            try:
                runner.round()
                rounds[("dask-minimal", n)].append(runner.round())
            finally:
                runner.close()
    return rounds


if __name__ == "__main__":
    main()
