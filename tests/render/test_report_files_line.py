"""The report's Capture line names a few files, or all of them when they are few: a folder of
2,000 captures must not print hundreds of lines of names before the findings."""
from __future__ import annotations

import io
from pathlib import Path

from roceview.cli import Environment, main
from roceview.render.report import files_text

SAMPLE = Path(__file__).resolve().parents[2] / "captures" / "clean.pcap"


def test_a_few_files_are_all_named():
    assert files_text(["a.pcap", "b.pcap"]) == "a.pcap, b.pcap"
    assert files_text([f"{k}.pcap" for k in range(6)]) == ", ".join(f"{k}.pcap" for k in range(6))


def test_many_files_are_counted_and_the_first_five_named():
    text = files_text([f"c{k:04d}.pcap" for k in range(2000)])
    assert text == "2,000 files in .: c0000.pcap, c0001.pcap, c0002.pcap, c0003.pcap, c0004.pcap, … (+1,995 more)"


def test_a_folder_of_many_captures_reports_on_a_few_lines(tmp_path):
    for k in range(40):
        (tmp_path / f"c{k:02d}.pcap").write_bytes(SAMPLE.read_bytes())
    out = io.StringIO()
    assert main(["analyze", str(tmp_path)], Environment(stdout=out, stderr=io.StringIO())) == 0
    head = out.getvalue().split("packets in")[0]
    assert head.count("\n") <= 3 and "(+35 more)" in head, head


def test_files_of_one_folder_are_named_by_the_folder_once():
    text = files_text([f"/data/run7/c{k:02d}.pcap" for k in range(40)])
    assert text == "40 files in /data/run7: c00.pcap, c01.pcap, c02.pcap, c03.pcap, c04.pcap, … (+35 more)"
    assert files_text([f"/d{k}/c.pcap" for k in range(7)]).startswith("7 files: /d0/c.pcap, /d1/c.pcap")


def test_times_are_utc_dates_with_nanoseconds_and_seconds_since_the_first_packet():
    from roceview.render.report import _when, utc_span, utc_text

    assert utc_text(1_700_000_000_000_010_628) == "2023-11-14 22:13:20.000010628"
    assert utc_span(1_700_000_000_000_000_500, 1_700_000_000_000_054_145) == \
        "2023-11-14 22:13:20.000000500 - 22:13:20.000054145 UTC"
    assert utc_span(1_700_006_399_900_000_000, 1_700_006_400_100_000_000) == \
        "2023-11-14 23:59:59.900000000 - 2023-11-15 00:00:00.100000000 UTC"       # another day: its date
    span = (1_700_000_000_000_000_500, 1_700_000_000_000_054_145)
    assert _when(1_700_000_000_000_010_628, 1_700_000_000_000_024_717, span) == \
        "0.000010128 - 0.000024217 s, 2023-11-14 22:13:20.000010628 - 22:13:20.000024717 UTC (14.089 us)"


def test_the_summary_line_gives_the_capture_span_as_utc(tmp_path):
    out = io.StringIO()
    assert main(["analyze", str(SAMPLE)], Environment(stdout=out, stderr=io.StringIO())) == 0
    assert "167 packets in 90.910 us (2023-11-14 22:13:20.000000500 - 22:13:20.000091410 UTC)" in out.getvalue()
