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
