"""`analyze --engine dask` against the local engine on a ring buffer of FILES x PACKETS files.

    python benchmarks/bench_dask.py [--dir /tmp/roceview-bench-dask] [--files 8] [--packets 1000000] [--repeat 3]

The files are cut (at record boundaries) from one make_capture.py capture, so flows cross every
file boundary (1,024 QPs over 4 pairs of hosts). Each configuration runs in a fresh process:
the local engine (`analyze DIR`); the local Analyzer + FactCollector + diagnoser alone over
batches already in memory; then Dask LocalClusters of 1 and 2 worker processes (1 thread
each; started, and their workers' imports done, before the clock starts): the full analysis
(engines.dask.run: the workers read, decode, cut by connection and analyze their partitions; the
driver plans and merges), and the decode alone on the workers. A Dask analysis is timed twice
on its cluster: the second run (workers warmed by the first, as on a long-lived cluster) is the
row, the first is beside it (`first_run`), and both scaling efficiencies are printed. The
client process takes the CLI's malloc settings. The clusters are made as `analyze --engine dask`
makes its own (engines.dask.client.local_cluster). Each configuration runs --repeat times, round by round
(every configuration once, then again: a slow minute on a shared machine slows both worker
counts, not one); the run of median wall time is printed, and the scaling efficiency of each
round beside that of the medians. Prints packets/s, CPU seconds and
peak RSS of the driver and of each worker, the scaling efficiency rate(2) / (2 x rate(1)),
and checks the five CSV files of every Dask run equal the local engine's. Note the machine's
load: others share it.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CSVS = ("qps.csv", "pfc.csv", "events.csv", "timeline.csv", "findings.csv")


def make_ring(directory: Path, files: int, packets: int) -> None:
    """One capture of files x packets packets (make_capture.py), cut into `files` pcap files."""
    directory.mkdir(parents=True, exist_ok=True)
    whole = directory.parent / (directory.name + "-whole.pcap")
    if not whole.exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "make_capture.py"), str(whole),
                        "--packets", str(files * packets), "--snaplen", "128", "--flows", "1024"], check=True)
    cut_pcap(whole, directory, packets)


def cut_pcap(whole: Path, directory: Path, packets: int) -> None:
    with open(whole, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        header, pos, size, start, count, k = mm[:24], 24, len(mm), 24, 0, 0
        unpack = struct.Struct("<I").unpack_from
        while pos < size:
            pos += 16 + unpack(mm, pos + 8)[0]
            count += 1
            if count == packets or pos >= size:
                (directory / f"ring_{k:05d}.pcap").write_bytes(header + mm[start:pos])
                start, count, k = pos, 0, k + 1


def peak_rss_mb() -> float:
    """VmHWM: this process's own peak (ru_maxrss would carry the parent's across exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(mode: str, workers: int, directory: str, out: str, again: bool) -> dict:
    """One configuration, in this (fresh) process; with `again`, a Dask run is timed twice on
    the same cluster (the second: workers whose heap, caches and lazy imports the first warmed,
    as on a long-lived cluster), the second reported, the first beside it."""
    from roceview.capture.memory import keep_freed_memory

    keep_freed_memory()                            # as the CLI's process does (cli.entry)
    if mode == "ceiling":
        return _ceiling(directory)
    cluster = client = None
    if mode != "local":
        from dask.distributed import Client

        from roceview.engines.dask.client import local_cluster

        cluster = local_cluster(workers)            # as `analyze --engine dask` without --scheduler makes it
        client = Client(cluster)
        client.run(_warm)                          # worker start-up (imports), paid once per cluster
    row = _timed(mode, workers, client, directory, out)
    if mode == "dask" and again:
        first = row
        row = _timed(mode, workers, client, directory, out)
        row["first_run"] = {k: first[k] for k in ("wall_s", "pkt_per_s", "driver_cpu_s", "worker_cpu_s")}
    if client is not None:
        row["worker_peak_rss_mb"] = sorted(round(v) for v in client.run(peak_rss_mb).values())
        client.close()
        cluster.close()
    return row


def _timed(mode: str, workers: int, client, directory: str, out: str) -> dict:
    """One run of `mode` on the cluster `client` (None: the local engine), timed."""
    import roceview
    from roceview.render.export import write_csv_dir

    cpu0, t0 = _cpu_s(), time.perf_counter()
    if client is not None:
        worker_cpu0 = client.run(_cpu_s)
    if mode == "decode":
        from roceview.capture.source import expand_paths

        packets = sum(client.gather(client.map(_decode_count, expand_paths(directory), pure=False)))
    else:
        result = roceview.analyze(directory, engine="local" if mode == "local" else "dask",
                                  scheduler=None if client is None else client.scheduler.address)
        packets = int(result.summary["packets"])
    wall, driver_cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    if mode != "decode":
        write_csv_dir(result, out)
    row = {"mode": mode, "workers": workers, "packets": packets, "wall_s": round(wall, 3),
           "pkt_per_s": round(packets / wall), "driver_cpu_s": round(driver_cpu, 2),
           "driver_peak_rss_mb": round(peak_rss_mb())}
    if client is not None:
        cpu = client.run(_cpu_s)
        row["worker_cpu_s"] = sorted(round(cpu[w] - worker_cpu0[w], 2) for w in cpu)
    return row


def _ceiling(directory: str) -> dict:
    """The driver's own part alone: Analyzer + FactCollector + diagnoser over batches already
    decoded and merged in memory (the rate no number of workers can take the run past)."""
    from roceview.analysis import Analyzer
    from roceview.diagnose import FactCollector, find
    from roceview.packets.read import iter_batches

    batches = list(iter_batches(directory, projection="analysis"))
    cpu0, t0 = _cpu_s(), time.perf_counter()
    analyzer, facts = Analyzer(), FactCollector()
    for batch in batches:
        analyzer.feed(batch)
        facts.feed(batch, analyzer.flow_ids(batch))
    result = analyzer.finish()
    result.facts = facts.finish()
    find(result)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    packets = sum(b.n for b in batches)
    return {"mode": "ceiling", "workers": 0, "packets": packets, "wall_s": round(wall, 3),
            "pkt_per_s": round(packets / wall), "driver_cpu_s": round(cpu, 2),
            "driver_peak_rss_mb": round(peak_rss_mb())}


def _cpu_s() -> float:
    """CPU seconds of this process (all threads): what the work costs whatever the load."""
    return time.process_time()


def _warm() -> None:
    import roceview.packets.wire  # noqa: F401
    import roceview.engines.dask.client  # noqa: F401
    import roceview.engines.dask.partition  # noqa: F401
    import roceview.engines.dask.partition_run  # noqa: F401  (the Analyzer, the FactCollector)
    import roceview.packets.decode  # noqa: F401
    import roceview.packets.table  # noqa: F401


def _decode_count(path: str) -> int:
    from roceview.engines.dask.client import decode_file

    return sum(decode_file(path, (), 1 << 16, "analysis")["chunks"]["lengths"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "roceview-bench-dask")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--one", nargs=4, metavar=("MODE", "WORKERS", "DIR", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.one[2], a.one[3], again=True)))
        return
    if not a.dir.exists() or len(list(a.dir.glob("ring_*.pcap"))) < a.files:
        make_ring(a.dir, a.files, a.packets)
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    configs = (("local", 0), ("ceiling", 0), ("dask", 1), ("dask", 2), ("decode", 1), ("decode", 2))
    runs: dict[tuple, list] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeat):        # round by round: a slow minute slows 1 and 2 workers alike
            for mode, workers in configs:
                out = os.path.join(tmp, f"{mode}{workers}")
                done = subprocess.run([sys.executable, __file__, "--one", mode, str(workers), str(a.dir), out],
                                      capture_output=True, text=True, check=True, cwd=REPO)
                row = json.loads(done.stdout.strip().splitlines()[-1])
                if mode == "dask":
                    row["csvs_equal_local"] = all(Path(out, n).read_bytes() == Path(tmp, "local0", n).read_bytes()
                                                  for n in CSVS)
                row["load_after"] = round(os.getloadavg()[0], 2)
                runs[(mode, workers)].append(row)
        rows = [_median_row(runs[c]) for c in configs]
        for row in rows:
            print(json.dumps(row), flush=True)
    rate = {(r["mode"], r["workers"]): r["pkt_per_s"] for r in rows}
    first = {r["workers"]: r["first_run"]["pkt_per_s"] for r in rows if "first_run" in r}
    print(f"dask, first run on a new cluster: scaling efficiency with 2 workers = "
          f"{first[2] / (2 * first[1]):.0%} of 2x the 1-worker rate")
    for mode in ("dask", "decode"):
        paired = sorted(two["pkt_per_s"] / (2 * one["pkt_per_s"]) for one, two in zip(runs[(mode, 1)], runs[(mode, 2)]))
        print(f"{mode}{', run again' if mode == 'dask' else ''}: scaling efficiency with 2 workers = "
              f"{rate[(mode, 2)] / (2 * rate[(mode, 1)]):.0%} of 2x the 1-worker rate (medians); "
              f"round by round {', '.join(f'{e:.0%}' for e in paired)}")


def _median_row(runs: list[dict]) -> dict:
    """The run of median wall time, with every run's wall time beside it."""
    row = dict(sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2])
    row["walls_s"] = sorted(r["wall_s"] for r in runs)
    return row


if __name__ == "__main__":
    main()
