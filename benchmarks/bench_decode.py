"""Decode benchmark: roceview's packets table vs `tshark -T fields` on the same files.

    python benchmarks/bench_decode.py [--packets 1000000] [--repeat 3] [--big 10000000]

Builds (once, into benchmarks/data/) 1 M-packet RoCEv2 captures at snaplen 128 and with
full ~1 KB frames, then for each file prints packets/s of
  * decode   - the whole packets table as numpy Batches (all columns, ICRC included),
               timed in-process after imports: the second of two passes over the file (the
               steady state a long capture runs at, as bench_analyze's in-process figure),
               and the first pass (the process's heap growing: fresh pages fault on first
               touch); the kernel backend (C, or the numba fallback) is printed; the process
               is set up as the CLI sets up its own (roceview.cli.entry: one OpenBLAS thread,
               capture.memory.keep_freed_memory);
  * table    - the same as one pandas DataFrame (`roceview.read_packets`);
  * process  - a fresh `python -c "...iter_batches..."` process decoding the file once,
               start-up included;
  * tshark   - `tshark -T fields -e opcode -e destqp -e psn -e ecn` (decodes only);
and the peak RSS of each process. --big adds a longer file to show RSS does not grow.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"

CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # process set-up as roceview.cli.entry does it
from roceview.capture.memory import keep_freed_memory
keep_freed_memory()
import roceview.packets.read as P
from roceview.api import read_packets
from roceview.kernels.backend import BACKEND
mode, path = sys.argv[1], sys.argv[2]
if mode == "table":
    list(P.iter_batches(sys.argv[3]))  # warm-up (the numba fallback loads its JIT cache here)
t1 = time.perf_counter()
passes = []
for _ in range({"decode": 2, "once": 1, "table": 1}[mode]):
    t = time.perf_counter()
    n = len(read_packets(path)) if mode == "table" else sum(b.n for b in P.iter_batches(path))
    passes.append(time.perf_counter() - t)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"n": n, "import_s": t1 - t0, "work_s": passes[-1], "first_s": passes[0], "rss_mb": rss,
                  "backend": BACKEND}))
"""


def ensure(name: str, packets: int, snaplen: int) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / name
    if not path.exists():
        print(f"building {path} ({packets} packets, snaplen {snaplen}) ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_capture.py"), str(path),
                        "--packets", str(packets), "--snaplen", str(snaplen)], check=True)
    return path


def child(mode: str, path: Path) -> tuple[dict, float]:
    t = time.perf_counter()
    warm = ROOT / "captures" / "clean.pcap"
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(warm)], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout), time.perf_counter() - t


def tshark(path: Path) -> float:
    exe = shutil.which("tshark")
    if not exe:
        return float("nan")
    t = time.perf_counter()
    subprocess.run([exe, "-r", str(path), "-T", "fields", "-e", "infiniband.bth.opcode",
                    "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn", "-e", "ip.dsfield.ecn"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def wall(cmd: list[str], repeat: int) -> float:
    """Median wall time of `repeat` whole-process runs of `cmd` (output discarded)."""
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def bench(path: Path, repeat: int, with_tshark: bool) -> None:
    child("once", path)                       # warm the page cache (and the numba fallback's JIT cache)
    best = {}
    for mode in ("decode", "table", "once"):
        runs = [child(mode, path) for _ in range(repeat)]
        best[mode] = min(runs, key=lambda r: (r[0]["work_s"], r[1]))
    n = best["decode"][0]["n"]
    ts = min(tshark(path) for _ in range(max(1, repeat - 1))) if with_tshark else float("nan")
    rate = lambda s: n / s / 1e6  # noqa: E731
    print(f"\n{path.name}: {n:,} packets, {path.stat().st_size / 1e6:.0f} MB, kernel: {best['decode'][0]['backend']}")
    d = best["decode"][0]
    print(f"  decode  (in-process) {d['work_s']:.3f} s  {rate(d['work_s']):6.2f} M pkt/s   RSS {d['rss_mb']:.0f} MB"
          f"   (its first pass, heap growth included: {d['first_s']:.3f} s, {rate(d['first_s']):.2f} M pkt/s)")
    t = best["table"][0]
    print(f"  table   (DataFrame)  {t['work_s']:.3f} s  {rate(t['work_s']):6.2f} M pkt/s   RSS {t['rss_mb']:.0f} MB")
    p = best["once"][1]
    print(f"  process (start-up incl.) {p:.3f} s  {rate(p):6.2f} M pkt/s   (start-up: imports"
          f" {best['once'][0]['import_s']:.2f} s)")
    if with_tshark:
        print(f"  tshark -T fields     {ts:.3f} s  {n / ts / 1e3:6.1f} k pkt/s")
        print(f"  ratio: decode {ts / d['work_s']:.0f}x tshark, whole process {ts / p:.0f}x tshark")


def parse_args(doc: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big", type=int, default=0, help="also a snaplen-128 file of this many packets (RSS check)")
    return ap.parse_args()


def captures(a: argparse.Namespace):
    """(file, repeat, compare with tshark) for each benchmark capture, built when missing."""
    has_tshark = bool(shutil.which("tshark"))
    if not has_tshark:
        print("tshark not found: its column is skipped")
    m = a.packets // 1_000_000
    yield ensure(f"rocev2_{m}M_snap128.pcap", a.packets, 128), a.repeat, has_tshark
    yield ensure(f"rocev2_{m}M_full.pcap", a.packets, 65535), a.repeat, has_tshark
    if a.big:
        yield ensure(f"rocev2_{a.big // 1_000_000}M_snap128.pcap", a.big, 128), 1, False


def main() -> None:
    for path, repeat, with_tshark in captures(parse_args(__doc__)):
        bench(path, repeat, with_tshark)


if __name__ == "__main__":
    main()
