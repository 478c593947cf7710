"""Review of issue 16 item 3: wrapped report text never leaves a number at a line's end and
its unit at the next line's start ('watchdog threshold 100' / 'ms)' at 80 columns)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from roceview.cli import Environment, main
from roceview.render.screen import wrap

SAMPLES = Path(__file__).resolve().parent.parent / "captures"
UNIT_START = re.compile(r"^\s*(ns|us|µs|ms|s|Gb/s|Mb/s|GB|MB|KB)\b")


def test_wrap_keeps_a_number_with_its_unit():
    text = "kept priority 3 paused continuously for 149.992 ms (watchdog threshold 100 ms); at 100 Gb/s"
    for width in range(20, 90):
        lines = wrap(text, width)
        assert " ".join(lines) == text
        assert not any(UNIT_START.match(line) for line in lines[1:]), (width, lines)


def test_wrap_still_breaks_before_words_that_only_start_like_units():
    assert wrap("a 3 sends b", 7) == ["a 3", "sends b"]


@pytest.mark.parametrize("sample", ["pfc-storm.pcap", "incast.pcap", "slow-receiver.pcap", "tail-timeout.pcap"])
def test_report_at_80_columns_has_no_unit_starting_a_line(sample, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    assert main(["analyze", str(SAMPLES / sample)], Environment(stdin=io.StringIO(), stdout=out,
                                                                 stderr=io.StringIO())) == 0
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    bad = [(a, b) for a, b in zip(lines, lines[1:]) if UNIT_START.match(b) and re.search(r"\d$", a)]
    assert not bad, bad
