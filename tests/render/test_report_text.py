"""The report's numbers in one style, findings' times inside the capture,
the QP table's compact and wide column sets; --each (item 4).

Report wording where the counts are small.

Wrapped report text never leaves a number at a line's end and
its unit at the next line's start ('watchdog threshold 100' / 'ms)' at 80 columns)."""
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
from helpers.analysis import T0, write_rows_pcap
from roceview.render.screen import wrap


REPO = Path(__file__).resolve().parents[2]
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


def _report_through_cli(path) -> str:
    out = io.StringIO()
    assert main(["analyze", str(path)], Environment(stdin=io.StringIO(), stdout=out, stderr=io.StringIO())) == 0
    return out.getvalue()


def test_no_flows_is_not_ranked_worst_first(tmp_path):
    """A PAUSE-only capture said 'Queue pairs (0 flows, worst first)' over 'no RoCE traffic'."""
    rows = [dict(ts=T0 + i * 1000, proto="pause", quanta=q) for i, q in enumerate((0xFFFF, 0))]
    write_rows_pcap(tmp_path / "p.pcap", rows)
    text = _report_through_cli(tmp_path / "p.pcap")
    assert "Queue pairs\n  no RoCE traffic" in text, text
    assert "0 flows, worst first" not in text


def _v6_capture(path) -> None:
    """Two directions of an RC QP over RoCEv2/IPv6 with global addresses (86-character flow names)."""
    import socket
    import struct

    import numpy as np

    from roceview.capture.writer import write_pcap

    def frame(src, dst, qp, psn, opcode):
        body = struct.pack("!BBHI", opcode, 0, 0xFFFF, qp) + struct.pack("!I", 0x80000000 | psn)
        body += struct.pack("!QII", 0x1000, 0x1234, 256) + bytes(256) if opcode == 0x0A else struct.pack("!I", 1)
        udp = struct.pack("!HHHH", 49152, 4791, 8 + len(body) + 4, 0)
        ip6 = struct.pack("!IHBB16s16s", (6 << 28) | (106 << 20), len(udp) + len(body) + 4, 17, 64,
                          socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst))
        return bytes.fromhex("020000000002020000000001") + b"\x86\xdd" + ip6 + udp + body + bytes(4)

    a, b = "2001:db8:1234:5678:9abc:def0:1234:5678", "2001:db8:1234:5678:9abc:def0:1234:9999"
    frames = [f for i in range(20) for f in (frame(a, b, 0x12, 100 + i, 0x0A), frame(b, a, 0x34, 100 + i, 0x11))]
    ts = np.array([T0 + i * 1000 for i in range(len(frames))], np.int64)
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames], ts)


def _qp_lines(text: str) -> list[str]:
    block = text.split("Queue pairs", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()[1:]


def test_ipv6_flows_at_80_columns_keep_qp_numbers_and_the_counters(tmp_path, monkeypatch):
    """86-character IPv6 flow names at 80 columns: the table was the flow name cut at '...:0…',
    both directions alike, and no number at all."""
    _v6_capture(tmp_path / "v6.pcap")
    monkeypatch.setenv("COLUMNS", "80")
    text = _report_through_cli(tmp_path / "v6.pcap")
    lines = _qp_lines(text)
    assert max(map(len, text.splitlines())) <= 80
    assert lines[0].rstrip().endswith("CNP"), lines[0]
    rows = lines[2:4]
    assert rows[0].split(" ")[0].endswith(":0x000012") and rows[1].split(" ")[0].endswith(":0x000034"), rows
    assert "addresses shortened" in " ".join(text.split())
    monkeypatch.setenv("COLUMNS", "120")
    assert "Gb/s" in _qp_lines(_report_through_cli(tmp_path / "v6.pcap"))[0]
    out = io.StringIO()
    main(["analyze", str(tmp_path / "v6.pcap"), "--wide"], Environment(stdin=io.StringIO(), stdout=out,
                                                                        stderr=io.StringIO()))
    assert "2001:db8:1234:5678:9abc:def0:1234:5678>2001:db8:1234:5678:9abc:def0:1234:9999:0x000012" in out.getvalue()


def test_short_flow_names_stay_whole_for_ipv4_and_when_they_would_collide():
    from roceview.render.report import _short_flows

    v4 = ["192.168.242.57>192.168.242.56:0x001315"]
    assert _short_flows(v4, 30, "…") == v4
    alike = ["2001:db8:1111:aaaa:bbbb:cccc:dddd:1>2001:db8::2:0x000001",
             "2001:db8:2222:aaaa:bbbb:cccc:dddd:1>2001:db8::2:0x000001"]
    assert _short_flows(alike, 36, "…") == alike                     # the middles differ: kept whole


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
