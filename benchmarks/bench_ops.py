"""What the operations (ops.csv, op_stats, read_depth) add to `analyze`, in-process.

    python benchmarks/bench_ops.py [--packets 1000000] [--repeat 7]

Two 1 M-packet captures (built once into benchmarks/data/):
  * one-way: bench_decode's snaplen-128 file (make_capture.py: RDMA WRITE ONLYs over 128 QPs,
    ACKs on QPs of their own, so no QP is paired: operations without completion);
  * paired: 128 QP pairs, each between hosts of its own, three RDMA WRITE ONLYs then one
    coalesced ACK covering them (every operation completes; the general path);
and for each the analysis alone (decode done beforehand), with the operations and with their
step skipped (roceview.analysis.ops.OpTracker.feed made a no-op), the minimum of `--repeat`
alternating runs, and the difference. Whole processes before / after a change are timed with
`farm-bench` (docs/performance.md).
"""
from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_decode import DATA, ensure  # noqa: E402
from make_capture import BLOCK, _icrc, _ipv4_checksum, _template  # noqa: E402

from roceview.capture.writer import pcap_header, pcap_records  # noqa: E402


def paired_block(start: int, count: int, flows: int) -> tuple[np.ndarray, np.ndarray]:
    """Packets start..start+count: per QP pair (hosts 10.1.F.1 and 10.1.F.2) three WRITE ONLY
    requests then an ACK of the third, round-robin over the pairs."""
    frames, lens = [], np.empty(count, np.int64)
    tmpl = {False: _template(256, False), True: _template(256, True)}
    for i in range(count):
        k = start + i
        group, slot = divmod(k, 4)
        fl = group % flows
        rnd = group // flows
        ack = slot == 3
        psn = (rnd * 3 + (2 if ack else slot)) & 0xFFFFFF
        f = bytearray(tmpl[ack])
        a, b = (1, 2) if not ack else (2, 1)
        f[26:30] = bytes((10, 1, fl & 0xFF, a))
        f[30:34] = bytes((10, 1, fl & 0xFF, b))
        f[34:36] = (49152 + fl).to_bytes(2, "big")
        f[47:50] = ((0x100 + fl) if not ack else (0x8000 + fl)).to_bytes(3, "big")
        f[50] = 0x80 if slot == 2 else 0
        f[51:54] = psn.to_bytes(3, "big")
        if ack:
            f[54:58] = (0x1F000000 | psn).to_bytes(4, "big")
        else:
            f[54:70] = struct.pack(">QII", 0x7F0000000000 + psn * 256, 0x1234, 256)
        f[24:26] = _ipv4_checksum(f[14:34])
        f[-4:] = _icrc(f[:-4])
        frames.append(bytes(f))
        lens[i] = len(f)
    return np.frombuffer(b"".join(frames), np.uint8), lens


def paired_capture(packets: int, flows: int = 128) -> Path:
    path = DATA / f"rocev2_{packets // 1_000_000}M_paired_writes.pcap"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(pcap_header(snaplen=128))
        for start in range(0, packets, BLOCK):
            count = min(BLOCK, packets - start)
            frames, lens = paired_block(start, count, flows)
            ts = 1_700_000_000_000_000_000 + np.arange(start, start + count) * 250
            cap = np.minimum(lens, 128)
            keep = np.concatenate([np.arange(o, o + c) for o, c in zip(np.cumsum(lens) - lens, cap)])
            fh.write(pcap_records(frames[keep], cap, ts, wire_lengths=lens).tobytes())
    tmp.replace(path)
    return path


def added(path: Path, repeat: int) -> None:
    import roceview.analysis.ops as ops
    import roceview.packets.read as P
    from roceview.analysis import analyze_batches

    batches = list(P.iter_batches(str(path)))
    feed = ops.OpTracker.feed
    best = {"with": [], "without": []}
    result = None
    for _ in range(repeat):
        for name in best:
            ops.OpTracker.feed = feed if name == "with" else (lambda *a, **k: None)
            t = time.perf_counter()
            r = analyze_batches(iter(batches))
            best[name].append(time.perf_counter() - t)
            result = r if name == "with" else result
    ops.OpTracker.feed = feed
    w, wo = min(best["with"]), min(best["without"])
    s = result.summary["operations"]
    done = int(np.sum(result.op_stats_table.data["completed"]))
    print(f"{path.name}: {s['count']:,} operations ({done:,} completed), analysis {wo:.3f} s without, "
          f"{w:.3f} s with: +{w - wo:.3f} s (+{(w / wo - 1) * 100:.0f} %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    added(ensure(f"rocev2_{a.packets // 1_000_000}M_snap128.pcap", a.packets, 128), a.repeat)
    added(paired_capture(a.packets), a.repeat)


if __name__ == "__main__":
    main()
