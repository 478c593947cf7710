"""ops.csv on random packet sequences (seeded): requests of every kind on two QP pairs and one
UC flow, PSNs that jump, repeat, go back and wrap, ACKs, NAKs, READ responses and ATOMIC ACKs
with random PSNs, cut into random chunks. The analysis never fails, every request packet is an
operation's or counted (late, unmatched), completions come after their operation's start,
latency is blank exactly without one, the per-QP statistics count every operation.
ROCEVIEW_FUZZ_EXAMPLES (default 60; a longer local run: 3000) sets the trials."""
from __future__ import annotations

import os
import random

import numpy as np
from helpers.analysis import T0, A, B, make_batch

from roceview.analysis import Analyzer
from roceview.analysis import opcode_classes as op
from roceview.analysis.ops import OpTracker

TRIALS = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "60"))
REQUESTS = (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x16, 0x17)
RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x11, 0x11, 0x12)
SYNDROMES = (0x1F, 0x1F, 0x1F, 0x60, 0x2E, 0x62)


def random_rows(rng: random.Random) -> list[dict]:
    pairs = [(A, B, 0xD2, 0xC1), (B, A, 0x31, 0x32)]
    base = [rng.choice((0, 1 << 24 - 1, 0xFFFFF0, rng.randrange(1 << 24))) for _ in pairs]
    rows, t = [], T0
    for _ in range(rng.randint(1, 120)):
        t += rng.choice((0, 1, 100, 1000, 5000, 2_000_000))
        k = rng.randrange(len(pairs))
        src, dst, qp, back = pairs[k]
        psn = (base[k] + rng.randint(-6, 12)) & 0xFFFFFF
        if rng.random() < 0.5:
            base[k] = (base[k] + rng.randint(0, 3)) & 0xFFFFFF
        if rng.random() < 0.1:
            rows.append(dict(ts=t, psn=psn, opcode=0x24, src=src, dst=dst, qp=0x77, payload=rng.randint(0, 2048)))
        elif rng.random() < 0.05:
            rows.append(dict(ts=t, psn=psn, opcode=0x64, src=src, dst=dst, qp=1, payload=256))
        elif rng.random() < 0.55:
            opc = rng.choice(REQUESTS)
            rows.append(dict(ts=t, psn=psn, opcode=opc, src=src, dst=dst, qp=qp, ackreq=rng.random() < 0.5,
                             payload=0 if opc in (0x0C, 0x13, 0x14) else rng.choice((1024, 1024, rng.randint(0, 1024))),
                             dmalen=rng.randint(0, 9000) if opc in (0x06, 0x0A, 0x0B, 0x0C) else None))
        else:
            opc = rng.choice(RESPONSES)
            rows.append(dict(ts=t, psn=psn, opcode=opc, src=dst, dst=src, qp=back, payload=rng.choice((0, 1024, 500)),
                             syndrome=None if opc == 0x0E else rng.choice(SYNDROMES)))
    return rows


def requests(rows) -> int:
    return sum(int(op.OPCLASS[r["opcode"]] in (op.REQUEST, op.READ_REQUEST)) for r in rows)


def trial(rng: random.Random) -> None:
    rows = random_rows(rng)
    an = Analyzer(packet_flags=True, pmtu=rng.choice((None, 1024, 4096)))
    an.ops = OpTracker(max_rows=rng.choice((3, 1000)))
    cuts = sorted({0, len(rows), *(rng.randrange(len(rows) + 1) for _ in range(rng.randint(0, 6)))})
    for lo, hi in zip(cuts, cuts[1:]):
        an.feed(make_batch(rows[lo:hi]))
    result = an.finish()
    analyzed = an.take_analyzed()                        # (batches held for path-MTU evidence too)
    flags = np.concatenate([b.cols["flags"] for b in analyzed])          # the rows in order
    copies = sum(op.OPCLASS[r["opcode"]] in (op.REQUEST, op.READ_REQUEST) and bool(f & 0x10)
                 for r, f in zip(rows, flags.tolist()))
    s, d = result.summary["operations"], result.ops_table.data
    stats = result.op_stats_table.data
    assert int(np.sum(stats["operations"])) == s["count"] == len(result.ops_table) + s["not_listed"]
    if not s["not_listed"]:
        assert int(np.sum(d["packets"])) + s["late_packets"] + s["unmatched_packets"] == requests(rows) - copies
    done = np.asarray(d["completion_frame"]) > 0
    assert (np.asarray(d["completion_frame"])[done] > np.asarray(d["first_frame"])[done]).all()
    assert (np.isnan(np.asarray(d["latency_us"])) == ~done).all()
    assert (np.asarray(d["outstanding"]) >= 0).all() and (np.asarray(d["packets"]) >= 1).all()


def test_random_packet_sequences():
    rng = random.Random(32)
    for _ in range(TRIALS):
        trial(rng)
