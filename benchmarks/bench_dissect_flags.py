"""`roceview dissect` with the per-packet analysis flags next to tshark's one-line output.

    python benchmarks/bench_dissect_flags.py [--packets 1000000] [--repeat 3]

Uses the captures of bench_decode.py (built once into benchmarks/data/, make_capture.py). For
each file, whole processes writing to /dev/null: `roceview dissect FILE` (one line per packet,
the analysis run alongside: flags in brackets) and `tshark -r FILE` (its one-line summary); and,
in-process, in CPU time (a busy machine stretches wall times, not CPU times), reading the
packets table with and without the analysis columns (packets.analyzed): what the flags cost;
and building the lines of all packets (render/lines.py batch_text, column-wise): what the text costs.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import ROOT, captures, parse_args, wall  # noqa: E402

INPROC = r"""
import json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import roceview.packets.read as P
from roceview.analysis.annotate import analyzed
path, repeat = sys.argv[1], int(sys.argv[2])
batches = list(P.iter_batches(path))           # decoded once: only the analysis is timed
def run(flags):
    t = time.process_time()
    n = sum(b.n for b in (analyzed(iter(batches)) if flags else batches))
    return time.process_time() - t, n
plain = min(run(False)[0] for _ in range(repeat))
flagged = min(run(True)[0] for _ in range(repeat))
from roceview.render.lines import batch_text
done = list(analyzed(iter(batches)))
def text():
    t = time.process_time()
    size = sum(len(batch_text(b, int(done[0].cols["ts_ns"][0]))) for b in done)
    return time.process_time() - t, size
lines, size = min(text() for _ in range(repeat))
print(json.dumps({"plain": plain, "flags": flagged, "lines": lines, "bytes": size, "n": sum(b.n for b in batches)}))
"""


def bench(path: Path, repeat: int, with_tshark: bool, n: int) -> None:
    print(f"\n{path.name}: {n:,} packets, {path.stat().st_size / 1e6:.0f} MB")
    ours = wall([sys.executable, "-m", "roceview", "dissect", str(path)], repeat)
    print(f"  roceview dissect (flags)  {ours:7.3f} s {n / ours / 1e6:6.2f} M pkt/s")
    if with_tshark:
        ts = wall([shutil.which("tshark"), "-r", str(path), "-n"], 1)
        print(f"  tshark -r (one line)      {ts:7.3f} s {n / ts / 1e6:6.2f} M pkt/s   ({ts / ours:.1f}x roceview's time)")
    r = json.loads(subprocess.run([sys.executable, "-c", INPROC, str(path), str(repeat)], cwd=ROOT,
                                  capture_output=True, text=True, check=True).stdout)
    print(f"  in-process CPU: the analysis for the flags {r['flags'] - r['plain']:.3f} s "
          f"({r['n'] / max(r['flags'] - r['plain'], 1e-9) / 1e6:.1f} M pkt/s) over {r['n']:,} decoded packets")
    print(f"  in-process CPU: the lines  {r['lines']:.3f} s ({r['n'] / max(r['lines'], 1e-9) / 1e6:.1f} M pkt/s, "
          f"{r['bytes'] / 1e6:.0f} MB of text)")


def main() -> None:
    a = parse_args(__doc__)
    for path, repeat, with_tshark in captures(a):
        bench(path, repeat, with_tshark, a.packets)


if __name__ == "__main__":
    main()
