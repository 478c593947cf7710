"""`dissect` writes a duration as the `analyze` report does (roceview.units.duration): the unit
by magnitude, 3 decimals, microseconds spelled "us" (`[RTT 1.105 us to frame 1]`, `[Pause P3
335.539 us]`, the -V sentences), in the tags built column-wise (render/line_tags.py) as in the
per-packet words (render/flag_text.py)."""
from __future__ import annotations

import math
import os
import random
import re

import numpy as np

from roceview.render.cells import cells_text
from roceview.render.flag_text import PFC_PAUSE, RTT_ACK, sentences, tags
from roceview.units import duration
from helpers.cli import run

DURATION = r"(?:-?\d{1,3} ns|-?\d{1,3}\.\d{3} (?:us|ms)|-?\d+\.\d{3} s)"
RTT_TAG = re.compile(rf"\[RTT (?:{DURATION} to frame \d+|sample)\]")
PAUSE_TAG = re.compile(rf"\[Pause(?: all {DURATION}| P\d {DURATION})*\]")
VERBOSE = "(roceview.rtt_ack || roceview.pfc_pause || roceview.gap) && frame.number < 100"
FUZZ_EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "20000"))


def test_every_samples_tags_and_sentences_write_durations_as_the_report(sample_capture):
    code, out, _ = run("dissect", sample_capture)
    assert code == 0 and "µs" not in out
    rtt, pause = re.findall(r"\[RTT[^\]]*\]", out), re.findall(r"\[Pause[^\]]*\]", out)
    assert rtt or pause
    assert [t for t in rtt if not RTT_TAG.fullmatch(t)] == []
    assert [t for t in pause if not PAUSE_TAG.fullmatch(t)] == []
    code, out, _ = run("dissect", sample_capture, "-V", "-Y", VERBOSE)     # -V: rich's tree is slow
    assert code == 0 and "µs" not in out
    said = re.findall(rf"RTT sample of {DURATION} on|Pauses (?:all|P\d) {DURATION} at", out)
    _, lines, _ = run("dissect", sample_capture, "-Y", VERBOSE)
    assert len(said) == lines.count("[RTT ") - lines.count("[RTT sample]") + lines.count("[Pause ")


def test_tags_and_sentences_of_a_row_name_the_same_duration():
    """An RTT of 12.37 ms (a long stall) reads in ms, not '12370.028 us'; a pause at 25 Gb/s too."""
    rtt = {"flags": RTT_ACK, "rtt_ns": 12_370_028, "rel_frame": 7}
    assert tags(rtt, [0] * 8) == [("RTT 12.370 ms to frame 7", "note")]
    assert "an RTT sample of 12.370 ms on" in sentences(rtt, [0] * 8, "A>B:0x1")[0]
    pause = {"flags": PFC_PAUSE, "proto": "pfc", "pfc_enable": 0x88, "pause_quanta": None}
    quanta = [0, 0, 0, 65535, 0, 0, 0, 1]
    assert tags(pause, quanta, 25.0) == [("Pause P3 1.342 ms P7 20 ns", "warn")]
    assert sentences(pause, quanta, "", 25.0) == ["Pauses P3 1.342 ms P7 20 ns at 25 Gb/s (quanta x 512 bit times)."]


def _values(rng: random.Random, n: int) -> list[float]:
    """Durations in ns around every unit's edges (999.9995 us rounds to 1.000 ms), pause times
    (quanta x 512 / Gb/s), whole ns, and anything from 0.1 ns to days, of both signs."""
    out = []
    for exp in range(0, 14):
        for m in (0.9994999, 0.9995, 0.99950001, 0.9999999, 1.0, 1.0000001, 0.5):
            edge = m * 10 ** exp
            out += [edge, math.nextafter(edge, 0), math.nextafter(edge, math.inf)]
    while len(out) < n:
        pick = rng.randrange(4)
        if pick == 0:
            out.append(rng.randrange(0, 65536) * 512 / rng.choice((10.0, 25.0, 40.0, 100.0, 200.0, 400.0)))
        elif pick == 1:
            out.append(float(rng.randrange(0, 10 ** rng.randrange(1, 14))))
        elif pick == 2:
            out.append(10 ** rng.uniform(-1, 14))
        else:
            out.append(-10 ** rng.uniform(-1, 12))
    return out


def test_duration_parts_write_what_units_duration_writes():
    """Fuzzed (seeded; ROCEVIEW_FUZZ_EXAMPLES values, 20,000 by default) in blocks of rows of
    which a random part is shown, as the tags of a `dissect` chunk are."""
    from roceview.render.line_tags import duration_parts

    rng = random.Random(31)
    values = _values(rng, FUZZ_EXAMPLES)
    wrong = []
    for lo in range(0, len(values), 4096):
        block = np.array(values[lo:lo + 4096])
        shown = np.array([rng.random() < 0.7 for _ in block])
        texts = cells_text(duration_parts(block, shown))
        want = [duration(v) if s else "" for v, s in zip(block.tolist(), shown.tolist())]
        wrong += [(v, t, w) for v, t, w in zip(block.tolist(), texts, want) if t != w]
    assert wrong == [], wrong[:5]


def test_duration_parts_of_no_row_shown_are_empty():
    from roceview.render.line_tags import duration_parts

    assert cells_text(duration_parts(np.array([1.0, 2e6]), np.zeros(2, bool))) == ["", ""]
