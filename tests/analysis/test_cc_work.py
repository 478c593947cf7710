"""The DCQCN reaction collector's work per chunk (analysis/cc.py): numpy over the chunk's CNPs,
samples and cuts, never a Python step per CNP or per cut (a capture's CNPs number in the
hundreds of thousands). Counted in Python function calls, not timed."""
from __future__ import annotations

import os
import random
import sys

import numpy as np

from helpers.analysis import A, B, CNP, T0, WRITE_ONLY, make_batch
from roceview.analysis.cc import CnpReactions
from roceview.analysis.cc_match import _names, flow_columns


def _reacting(n_messages: int) -> list[dict]:
    """A sender of 16-packet messages at 100 Gb/s and a CNP to it every other message; it halves
    its rate for the message after each CNP (a cut, then a recovery)."""
    rows, t = [], T0
    ops = [0x06] + [0x07] * 14 + [0x08]
    for m in range(n_messages):
        spacing = 174 if m % 2 == 1 else 87
        for k, op in enumerate(ops):
            rows.append(dict(ts=t + k * spacing, psn=m * 16 + k, opcode=op, src=A, dst=B, qp=0xD2, payload=1024,
                             wire=1086))
        if m % 2 == 0:
            rows.append(dict(ts=t + 16 * spacing, psn=0, opcode=CNP, src=B, dst=A, qp=0xC1, payload=0, wire=78))
        t += 16 * spacing + 500
    return sorted(rows, key=lambda r: r["ts"])


def _python_calls(batch) -> tuple[int, CnpReactions]:
    """Python function calls made while feeding one chunk and finishing."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event == "call"

    cc = CnpReactions()
    sys.setprofile(count)
    try:
        cc.feed(batch)
        cc.finish()
    finally:
        sys.setprofile(None)
    return calls, cc


def test_feeding_more_cnps_and_cuts_makes_no_more_python_calls():
    small, large = make_batch(_reacting(100)), make_batch(_reacting(400))
    _python_calls(small)                            # imports and caches out of the count
    few, cc_few = _python_calls(small)
    many, cc_many = _python_calls(large)
    assert sum(cc_many.cnp.received.values()) == 4 * sum(cc_few.cnp.received.values()) == 200
    assert cc_many.n_cuts >= 4 * cc_few.n_cuts - 4 and cc_few.n_cuts >= 40
    assert len(cc_many.recovery) >= 4 * len(cc_few.recovery) - 4 and len(cc_few.recovery) >= 40
    assert many - few < 40, (few, many)


def test_a_cnp_before_a_senders_first_packet_is_not_for_that_sender():
    """Two QPs between one host pair; the second starts sending after the CNP, in the same chunk:
    the CNP is the first QP's (its only sender then), whether fed in one chunk or row by row."""
    first = [dict(ts=T0 + k * 100, psn=k, opcode=op, src=A, dst=B, qp=0xD2, payload=1024, wire=1086)
             for k, op in enumerate([0x06] + [0x07] * 14 + [0x08])]
    cnp = [dict(ts=T0 + 1_700, psn=0, opcode=CNP, src=B, dst=A, qp=0xC1, payload=0, wire=78)]
    later = [dict(ts=T0 + 2_000 + k * 100, psn=k, opcode=op, src=A, dst=B, qp=0xD3, payload=1024, wire=1086)
             for k, op in enumerate([0x06] + [0x07] * 14 + [0x08])]
    rows = first + cnp + later
    whole, by_row = _fed(rows, lambda: len(rows)), _fed(rows, lambda: 1)
    assert whole[0][0][0] == ["10.0.0.1>10.0.0.2:0x0000d2"]
    assert whole == by_row


def _random_stream(rnd: random.Random) -> list[dict]:
    """One to three senders (two QPs between one host pair: such a CNP has two candidate data
    flows) of 1- to 24-packet messages paced at a rate that drops after most CNPs and climbs
    back, with stalls, CE marks, CNPs closer than the NP's spacing at times, and now and then
    two packets swapped out of time order (as merged mirror copies can be)."""
    rows = []
    senders = [(A, B, 0xD2, 0xC1), (A, B, 0xD3, 0xC3), ("10.0.0.3", B, 0xD4, 0xC4)][: rnd.randint(1, 3)]
    for src, dst, qp, cnp_qp in senders:
        t, rate, psn = T0 + rnd.randrange(20_000), 100.0, 0
        for _ in range(rnd.randint(20, 70)):
            n = rnd.choice([1, 2, 4, 16, 24])
            for op in [WRITE_ONLY] if n == 1 else [0x06] + [0x07] * (n - 2) + [0x08]:
                rows.append(dict(ts=int(t), psn=psn, opcode=op, src=src, dst=dst, qp=qp, payload=1024, wire=1086,
                                 ecn=3 if rnd.random() < 0.1 else 2))
                psn += 1
                t += 1110 * 8 / rate * (rnd.uniform(2, 8) if rnd.random() < 0.05 else rnd.uniform(1, 1.03))
            if rnd.random() < 0.5:
                rows.append(dict(ts=int(t) + rnd.randrange(3_000), psn=0, opcode=CNP, src=dst, dst=src, qp=cnp_qp,
                                 payload=0, wire=78))
                rate = max(rate * rnd.uniform(0.3, 0.85), 5.0) if rnd.random() < 0.7 else rate
            else:
                rate = min(100.0, rate * rnd.uniform(1.0, 1.5))
            t += rnd.choice([0, 200, 3_000, 40_000])
    rows.sort(key=lambda r: r["ts"])
    for _ in range(rnd.choice([0, 0, 3])):
        i = rnd.randrange(len(rows) - 1)
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    return rows


def _fed(rows: list[dict], sizes) -> tuple:
    """cc.csv without and with peers (each CNP flow paired with the last by name of its host
    pair's senders), and the qps.csv columns, from rows fed in chunks of the sizes drawn."""
    batch, cc, i = make_batch(rows), CnpReactions(), 0
    while i < batch.n:
        n = sizes()
        cc.feed(batch.select(np.arange(i, min(batch.n, i + n))))
        i += n
    cc.finish()
    names = _names(cc.registry)
    peers = {names[f]: max(names[d] for d in cc.senders[cc.endpoints[f][::-1]]) for f in cc.cnp.received
             if cc.endpoints[f][::-1] in cc.senders}
    tables = [cc.table(), cc.table(peers)]
    text = [[[str(v) for v in t.data[c]] for c in t.columns] for t in tables]
    return text, {k: {c: str(v) for c, v in row.items()} for k, row in flow_columns(cc, tables[1], peers).items()}


def test_random_senders_give_the_same_tables_in_random_chunks():
    """Seeded; ROCEVIEW_FUZZ_EXAMPLES runs more (the default keeps CI short)."""
    rnd = random.Random(33)
    for _ in range(int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "4"))):
        rows = _random_stream(rnd)
        whole = _fed(rows, lambda: len(rows))
        assert any(whole[0][1][0]), "no CNP was given a data flow"
        assert _fed(rows, lambda: rnd.randint(1, 60)) == whole
