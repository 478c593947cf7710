"""End-to-end benchmark: `roceview analyze --csv` vs `tshark -T fields` on the same files.

    python benchmarks/bench_analyze.py [--packets 1000000] [--repeat 9] [--big 10000000]

Uses the captures of bench_decode.py (built once into benchmarks/data/). For each file it
prints the wall time of a whole `roceview analyze FILE --csv DIR` process (start-up, imports,
decode, analysis, CSV, report) and its peak RSS, the analysis alone in-process, and
tshark decoding the same file. --big adds a long snaplen-128 file: peak RSS must not grow
with the file's length.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import ROOT, captures, parse_args, tshark  # noqa: E402

INPROC = r"""
import json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # process set-up as roceview.cli.entry does it
from roceview.capture.memory import keep_freed_memory
keep_freed_memory()
import roceview.packets.read as P
from roceview.analysis import analyze_batches
from roceview.render.export import write_csv_dir
list(P.iter_batches(sys.argv[1]))                    # page cache warm (and the numba fallback's JIT cache)
t = time.perf_counter()
res = analyze_batches(P.iter_batches(sys.argv[1]))
write_csv_dir(res, sys.argv[2])
print(json.dumps({"s": time.perf_counter() - t, "n": int(res.summary["packets"])}))
"""


def run_cli(path: Path) -> tuple[float, float]:
    """`python -m roceview analyze FILE --csv DIR` exactly as a user runs it (entry(): its
    process set-up and its os._exit); wall time and peak RSS from the parent's wait4."""
    import os

    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "roceview", "analyze", str(path), "--csv", out], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = status                 # reaped by wait4: Popen must not wait for it again
        if status != 0 or not (Path(out) / "qps.csv").exists():
            err.seek(0)
            raise SystemExit(f"analyze failed: {err.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def run_inproc(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, "-c", INPROC, str(path), out], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    return json.loads(p.stdout)


def bench(path: Path, repeat: int, with_tshark: bool) -> None:
    import statistics

    run_cli(path)                                  # warm the page cache (and the numba fallback's JIT cache)
    runs = [run_cli(path) for _ in range(repeat)]
    walls = sorted(r[0] for r in runs)
    best, median, rss = walls[0], statistics.median(walls), max(r[1] for r in runs)
    inproc = min((run_inproc(path) for _ in range(repeat)), key=lambda r: r["s"])
    n = inproc["n"]
    print(f"\n{path.name}: {n:,} packets, {path.stat().st_size / 1e6:.0f} MB")
    print(f"  analyze --csv, whole process, {repeat} runs: median {median:.3f} s  {n / median / 1e6:5.2f} M pkt/s"
          f"  (best {best:.3f} s  {n / best / 1e6:5.2f} M pkt/s)  peak RSS {rss:.0f} MB")
    cli = (median, rss)
    print(f"  decode + analysis + CSV, in-process  {inproc['s']:.3f} s  {n / inproc['s'] / 1e6:5.2f} M pkt/s")
    if with_tshark:
        ts = min(tshark(path) for _ in range(2))            # 11-20 s each: two are enough
        print(f"  tshark -T fields (decode only)  {ts:.3f} s  {n / ts / 1e3:6.1f} k pkt/s")
        print(f"  ratio: analyze (whole process, median) is {ts / cli[0]:.0f}x faster than tshark's decode")


def main() -> None:
    for path, repeat, with_tshark in captures(parse_args(__doc__)):
        bench(path, repeat, with_tshark)


if __name__ == "__main__":
    main()
