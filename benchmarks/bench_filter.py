"""Display filter benchmark: `roceview dissect -Y` and `roceview analyze --filter` next to
`tshark -Y` on the same 1 M-packet files and filters, and the filter's share of analyze's time.

    python benchmarks/bench_filter.py [--packets 1000000] [--repeat 3]

Uses the captures of bench_decode.py (built once into benchmarks/data/). For each file:
  * dissect -Y FILTER > /dev/null, whole process, for a one-clause filter matching 1/128 of the
    packets and for the five-clause filter below; tshark -Y on the same file and filter;
  * analyze with and without --filter FIVE (whole process, median of --repeat runs);
  * in-process, in CPU time (a busy machine stretches wall times, not CPU times): analyze, and
    analyze with the filter, of which DisplayFilter.select (the mask and the row selection, on
    the reading thread, beside the analysis), as a share of analyze's (the issue's budget: <=
    10 % on a five-clause filter).
FIVE reads only columns of the analysis projection; FIVE_FULL adds udp.dstport and the P_Key,
which are not, so analyze decodes every column (packets.projection_for): its cost is shown too.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import ROOT, captures, parse_args, wall  # noqa: E402

ONE = "infiniband.bth.destqp == 0x000100"
FIVE = ("ip.src == 10.0.0.0/16 && infiniband.bth.destqp in {0x100..0x13f} && infiniband.bth.psn > 100 "
        "&& frame.len > 60 && !(infiniband.bth.opcode == 17)")
FIVE_FULL = ("udp.dstport == 4791 && ip.src == 10.0.0.0/16 && infiniband.bth.destqp in {0x100..0x13f} "
             "&& infiniband.bth.p_key == 0xffff && !(infiniband.bth.opcode == 17)")

INPROC = r"""
import json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from roceview.capture.memory import keep_freed_memory
keep_freed_memory()
import roceview
from roceview.filter import DisplayFilter
spent = [0.0]
select = DisplayFilter.select
def timed(self, batch):          # CPU time of the calling (reading) thread: immune to a busy machine
    t = time.thread_time()
    try:
        return select(self, batch)
    finally:
        spent[0] += time.thread_time() - t
DisplayFilter.select = timed     # the mask and the row selection
path, text, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
def run(text):
    spent[0] = 0.0
    t, c = time.perf_counter(), time.process_time()
    res = roceview.analyze(path, display_filter=text)
    return {"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "filter": spent[0],
            "n": int(res.summary["packets"])}
run(None)                        # warm: page cache, imports
plain = min((run(None) for _ in range(repeat)), key=lambda r: r["cpu"])
filtered = min((run(text) for _ in range(repeat)), key=lambda r: r["cpu"])
print(json.dumps({"plain": plain, "filtered": filtered}))
"""


def roceview(*args: str) -> list[str]:
    return [sys.executable, "-m", "roceview", *args]


def bench(path: Path, repeat: int, with_tshark: bool, n: int) -> None:
    rate = lambda s: f"{s:7.3f} s {n / s / 1e6:6.2f} M pkt/s"  # noqa: E731
    print(f"\n{path.name}: {n:,} packets, {path.stat().st_size / 1e6:.0f} MB")
    for name, text in (("one clause", ONE), ("five clauses", FIVE)):
        ours = wall(roceview("dissect", str(path), "-Y", text), repeat)
        print(f"  dissect -Y ({name})      {rate(ours)}")
        if with_tshark:
            ts = wall([shutil.which("tshark"), "-r", str(path), "-n", "-Y", text], 1)
            print(f"  tshark -Y  ({name})      {ts:7.3f} s {n / ts / 1e3:6.1f} k pkt/s   ({ts / ours:.0f}x roceview's time)")
    plain = wall(roceview("analyze", str(path)), repeat)
    print(f"  analyze                   {rate(plain)}")
    for name, text in (("five clauses", FIVE), ("five, full decode", FIVE_FULL)):
        filtered = wall(roceview("analyze", str(path), "--filter", text), repeat)
        print(f"  analyze --filter ({name}) {rate(filtered)}  ({100 * (filtered / plain - 1):+.1f} % vs analyze)")
    for name, text in (("five clauses", FIVE), ("five, full decode", FIVE_FULL)):
        r = json.loads(subprocess.run([sys.executable, "-c", INPROC, str(path), text, str(repeat)], cwd=ROOT,
                                      capture_output=True, text=True, check=True).stdout)
        p, f = r["plain"], r["filtered"]
        print(f"  in-process, CPU time ({name}): analyze {p['cpu']:.3f} s; analyze --filter {f['cpu']:.3f} s "
              f"({f['n']:,} packets analysed), of which mask + select {f['filter']:.3f} s = "
              f"{100 * f['filter'] / p['cpu']:.1f} % of analyze's")


def main() -> None:
    a = parse_args(__doc__)
    for path, repeat, with_tshark in captures(a):
        bench(path, repeat, with_tshark, a.packets)


if __name__ == "__main__":
    main()
