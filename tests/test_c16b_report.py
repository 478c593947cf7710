"""Issue 16 item 3: the report's numbers in one style, findings' times inside the capture,
the QP table's compact and wide column sets; --each (item 4)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import roceview
from roceview.analysis.tables import format_ts
from roceview.cli import Environment, main
from roceview.render.report import capture_span, print_report
from roceview.render.screen import Screen

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "captures"


def _inside(result) -> list[str]:
    """Findings whose start or end lies outside the capture's first..last packet."""
    span = capture_span(result.summary)
    d = result.findings_table.data
    bad = []
    for kind, start, end in zip(d["kind"], d["start_ts"].tolist(), d["end_ts"].tolist()):
        if span is None or not (span[0] <= start <= end <= span[1]):
            bad.append(f"{kind}: {format_ts(start)} - {format_ts(end)} outside {span}")
    return bad


def test_every_finding_lies_inside_the_sample_capture(sample_capture):
    result = roceview.analyze(sample_capture, warn=lambda m: None)
    assert not _inside(result)


def test_every_finding_lies_inside_the_real_capture(real_capture):
    result = roceview.analyze(real_capture, warn=lambda m: None)
    assert not _inside(result)


def test_the_incast_window_is_cut_at_the_last_packet():
    """incast.pcap lasts ~54 us; the rule's 1 ms window reached 0.95 ms past its end."""
    result = roceview.analyze(SAMPLES / "incast.pcap", warn=lambda m: None)
    d = result.findings_table.data
    incast = [i for i, k in enumerate(d["kind"]) if k == "incast"]
    assert incast and int(d["end_ts"][incast[0]]) == capture_span(result.summary)[1]


def _report(path, width, **kw) -> str:
    out = io.StringIO()
    print_report(roceview.analyze(path, warn=lambda m: None), Screen(out, width=width), **kw)
    return out.getvalue()


def test_report_numbers_have_one_style():
    text = _report(SAMPLES / "pfc-storm.pcap", 120)
    assert "149992.000000" not in text and "0.149992 s" not in text
    assert "58,653,825" in text                                     # quanta, thousands separated
    assert "1,036 packets in 150.018 ms" in text
    assert re.search(r"\(149\.992 ms\)", text)                      # the finding's when
    assert not re.search(r"\d\.\d{5,}", re.sub(r"\d+\.\d{9}\b", "", text)), "6 decimals outside timestamps"
    assert "; 2 flows;" in text and "(2 flows, worst first)" in text
    assert "1 flow into 10.0.0.2" in text and "1 flows" not in text


def test_gbps_and_rtt_cells_of_the_wide_table():
    text = _report(SAMPLES / "network-loss.pcap", 200)
    row = next(line for line in text.splitlines() if line.startswith("10.0.0.1>10.0.0.2"))
    cells = [c.strip() for c in row.split("│")]
    assert cells[-3:] == ["1.829 us", "2.186 us", "17.7"]   # RTT: a NAK p covers p-1 only (issue 15)


def test_narrow_width_gives_the_compact_set_and_wide_everything():
    narrow = _report(SAMPLES / "incast.pcap", 80)
    assert "peer" not in narrow and "NAKs" in narrow and "--wide shows all" in narrow
    assert max(map(len, narrow.splitlines())) <= 80
    wide = _report(SAMPLES / "incast.pcap", 80, wide=True)
    assert "NAK seq" in wide and "RTT p99" in wide and "--wide shows all" not in wide


def test_piped_report_is_120_wide_unless_columns_says(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert Screen(io.StringIO()).width == 120
    monkeypatch.setenv("COLUMNS", "90")
    assert Screen(io.StringIO()).width == 90


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *argv], Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_each_gives_one_report_and_one_csv_folder_per_file(tmp_path):
    files = [str(SAMPLES / "incast.pcap"), str(SAMPLES / "rnr.pcap")]
    code, out, err = _run([*files, "--each", "--csv", str(tmp_path / "out"), "--fail-on", "warning"])
    assert code == 3, err
    assert [line for line in out.splitlines() if line.startswith("Capture")] == [f"Capture {f}" for f in files]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["incast", "rnr"]
    for name in ("incast", "rnr"):
        assert (tmp_path / "out" / name / "qps.csv").is_file()
    merged = _run(files)[1]
    assert merged.count("Capture ") == 1


def test_each_numbers_folders_of_files_with_the_same_name(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.pcap").write_bytes((SAMPLES / "rnr.pcap").read_bytes())
    code, _, err = _run([str(tmp_path / "a" / "x.pcap"), str(tmp_path / "b" / "x.pcap"), "--each",
                         "--csv", str(tmp_path / "out")])
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["x", "x-2"]


def test_each_with_json_is_refused_in_one_line(tmp_path):
    code, _, err = _run([str(SAMPLES / "rnr.pcap"), "--each", "--json", str(tmp_path / "r.json")])
    assert code == 2 and err.count("\n") == 1 and "--each" in err


def test_counts_without_findings_are_singular_or_plural_with_separators():
    from roceview.analysis.tables import Table
    from roceview.render.report import _findings

    class Result:
        findings_table = Table(("severity",), {"severity": []})
        summary = {"detected": {"cnp_packets": 1, "gap_psns": 1234, "naks_rnr": 1, "ecn_ce": 2}}

    out = io.StringIO()
    _findings(Result(), Screen(out))
    assert out.getvalue().splitlines()[2:] == ["  1,234 PSNs skipped by gaps", "  1 RNR NAK",
                                                "  2 ECN CE-marked packets", "  1 CNP"]


def test_compact_table_leaves_out_whole_columns_rather_than_cut_a_number():
    """Long IPv4 flow names (36 characters) at 80 columns: RTT p50 and Gb/s go, named below."""
    from roceview.analysis.tables import Table
    from roceview.render.report import _qp_table

    names = [f"172.17.242.{56 - i}>172.17.242.47:0x00010{i}" for i in range(3)]
    flows = roceview.analyze(SAMPLES / "rnr.pcap", warn=lambda m: None).flows_table
    d = dict(flows.data)
    d["flow"] = names[:len(flows)]
    out = io.StringIO()
    _qp_table(Table(flows.columns, d), Screen(out, width=80))
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and not any(line.endswith("…") for line in lines)
    assert "(RTT p50, Gb/s did not fit)" in out.getvalue()
