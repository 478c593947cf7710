"""`roceview analyze --csv` on the same packets from each kind of input.

    python benchmarks/bench_inputs.py [--packets 1000000] [--repeat 7]

For bench_decode.py's snaplen-128 and full-frame captures: the pcap file (memory-mapped), a
pcapng copy, a gzip copy, the pcap through a pipe on stdin (`cat FILE | roceview analyze -`)
and a directory of 100 pcap files (a capture ring buffer). Medians of whole processes; the
CSVs of every variant must equal the plain file's. pcapng and the directory need editcap.
"""
from __future__ import annotations

import filecmp
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import ROOT, ensure, parse_args  # noqa: E402

TABLES = ("qps.csv", "pfc.csv", "events.csv", "timeline.csv", "findings.csv")


def variants(plain: Path, packets: int) -> dict[str, Path]:
    """The input variants of `plain`, built once into benchmarks/data/."""
    from zlib_ng import gzip_ng

    out = {"pcap (memory map)": plain}
    gz = plain.with_suffix(".pcap.gz")
    if not gz.exists():
        with open(plain, "rb") as src, gzip_ng.open(gz.with_suffix(".tmp"), "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        gz.with_suffix(".tmp").rename(gz)
    out["gzip"] = gz
    if shutil.which("editcap"):
        ng, ring = plain.with_suffix(".pcapng"), plain.with_suffix(".ring")
        if not ng.exists():
            subprocess.run(["editcap", "-F", "pcapng", plain, ng], check=True)
        if not ring.exists():
            ring.with_suffix(".tmp").mkdir(exist_ok=True)
            subprocess.run(["editcap", "-F", "nsecpcap", "-c", str(packets // 100), plain,
                            ring.with_suffix(".tmp") / "part.pcap"], check=True)
            ring.with_suffix(".tmp").rename(ring)
        out["pcapng"], out["directory of 100 files"] = ng, ring
    else:
        print("editcap not found: the pcapng and directory variants are skipped")
    return out


def timed(command: str, repeat: int, out: Path) -> float:
    walls = []
    for _ in range(repeat + 1):                   # the first warms the page cache
        t = time.perf_counter()
        subprocess.run(command + f" --csv {shlex.quote(str(out))} >/dev/null", shell=True, cwd=ROOT, check=True)
        walls.append(time.perf_counter() - t)
    return statistics.median(walls[1:])


def main() -> None:
    a = parse_args(__doc__)
    m = a.packets // 1_000_000
    analyze = f"{shlex.quote(sys.executable)} -m roceview analyze"
    for name, snaplen in ((f"rocev2_{m}M_snap128.pcap", 128), (f"rocev2_{m}M_full.pcap", 65535)):
        plain = ensure(name, a.packets, snaplen)
        print(f"\n{plain.name}: {a.packets:,} packets, {plain.stat().st_size / 1e6:.0f} MB")
        with tempfile.TemporaryDirectory() as tmp:
            reference = Path(tmp) / "reference"
            for label, path in variants(plain, a.packets).items():
                out = Path(tmp) / label.replace(" ", "_")
                s = timed(f"{analyze} {shlex.quote(str(path))}", a.repeat, out)
                print(f"  {label:<24} median {s:.3f} s  {a.packets / s / 1e6:5.2f} M pkt/s")
                if label == "pcap (memory map)":
                    s = timed(f"cat {shlex.quote(str(path))} | {analyze} -", a.repeat, reference)
                    print(f"  {'pcap on stdin (a pipe)':<24} median {s:.3f} s  {a.packets / s / 1e6:5.2f} M pkt/s")
                same = all(filecmp.cmp(out / t, reference / t, shallow=False) for t in TABLES)
                if not same:
                    raise SystemExit(f"{label}: the CSVs differ from the plain file's")


if __name__ == "__main__":
    main()
