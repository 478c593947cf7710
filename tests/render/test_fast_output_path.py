"""The fast output path of `roceview analyze`: vectorised CSV and JSON text, the rich-free report
with its queue-pair limit, and the imports the analyze path avoids.

CSV and JSON text are a user contract, so the vectorised writers are checked against the
per-cell definition (`slow_text` + csv.writer, `records()` + json.dumps) on awkward values; the
speed itself is checked only relatively (vectorised vs per-cell on the same table), which a
loaded machine does not upset.
"""
import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roceview.analysis.tables import (DECIMALS, EVENT_COLUMNS, FLOW_COLUMNS, KINDS, TIMELINE_COLUMNS, Table,
                                      slow_text)
from roceview.cli import Environment, main
from roceview.render import cells, export, json_export
from roceview.render.cells import cells_text, column_parts
from roceview.render.report import MAX_QP_ROWS, print_report, worst_first
from roceview.render.screen import Screen

REPO = Path(__file__).resolve().parents[2]
I64 = np.iinfo(np.int64)


def reference_csv(table: Table) -> bytes:
    """What the CSV writer wrote before it was vectorised: csv.writer over per-cell text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    cols = [slow_text(table.data[c], KINDS.get(c, "int"), DECIMALS.get(c, 6)) for c in table.columns]
    writer.writerows(zip(*cols))
    return out.getvalue().encode("utf-8")


def fast_text(values, kind, decimals=6):
    parts = column_parts(values, kind, decimals)
    assert parts is not None
    return cells_text(parts)


INTS = np.array([0, 1, 9, 10, 99, 100, 12345, -1, -9, -10, -123456789, 2**31, 2**53 + 1, I64.max, I64.min,
                 I64.min + 1], np.int64)


@pytest.mark.parametrize("kind", ["int", "nint", "ts", "qp"])
def test_integer_kinds_match_the_per_cell_text(kind):
    rng = np.random.default_rng(1)
    values = np.concatenate([INTS, rng.integers(-10**12, 10**18, 5000), rng.integers(-3, 2**24 + 5, 5000)])
    if kind == "qp":  # QPs: -1 (or any negative) is empty, values are hex with at least 6 digits
        values = np.concatenate([values, [-1, 0, 0xFFFFFF, 0x1000000]])
    assert fast_text(values, kind) == slow_text(values, kind)


def test_unsigned_and_small_integer_dtypes_match():
    for dtype in (np.uint8, np.uint32, np.uint64, np.int8, np.int32):
        info = np.iinfo(dtype)
        values = np.array([info.min, 0, 1, info.max, info.max // 3], dtype)
        for kind in ("int", "nint", "ts", "qp"):
            assert fast_text(values, kind) == slow_text(values, kind), (dtype, kind)


@pytest.mark.parametrize("decimals", [0, 3, 6, 9])
def test_floats_match_python_fixed_decimals_including_halfway_and_odd_values(decimals):
    rng = np.random.default_rng(2)
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, 0.0625, 0.0078125, 0.0005, 0.000_000_5,
               1e-320, 5e-324, 1e15, 4.5e15, 2.0**52, 1e300, -1.0, -0.0078125, 0.1, 0.7, 1.005, 2.675]
    halves = [(k + 0.5) / 10**decimals for k in range(200)]  # near-halfway decimal values
    values = np.concatenate([special, halves, np.nextafter(halves, 0), np.nextafter(halves, 1),
                             rng.random(3000) * 10.0 ** rng.integers(-9, 12, 3000),
                             np.round(rng.random(2000) * 1000, decimals)])
    assert fast_text(values, "float", decimals) == slow_text(values, "float", decimals)


def test_float_kind_accepts_integer_arrays_and_other_columns_fall_back_cell_by_cell():
    assert fast_text(np.array([1, 2, -3]), "float", 3) == ["1.000", "2.000", "-3.000"]
    assert column_parts([1, None, 3], "int") is None  # an object column: slow_text formats it
    assert column_parts(np.array([1.5, 2.0]), "int") is None  # str(1.5) is not an integer's text
    assert column_parts(np.array([True, False]), "ts") is None


def _awkward_table(n: int) -> Table:
    rng = np.random.default_rng(3)
    words = ["plain", "", None, "a,b", 'say "hi"', "line\nbreak", "cr\rhere", "µs ünïcode", " spaced ", "x" * 300]
    return Table(EVENT_COLUMNS[:5] + ("rtt_p50_us",), {
        "ts": rng.integers(-10**18, 10**18, n), "flow": [words[i % len(words)] for i in range(n)],
        "kind": [f"k{i % 7}" for i in range(n)], "psn": rng.integers(-1, 2**24, n),
        "detail": [f"{i} PSNs, from {i * 3}" if i % 3 else "" for i in range(n)],
        "rtt_p50_us": np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 100)})


@pytest.mark.parametrize("n", [0, 1, 7, 3000])
def test_csv_bytes_equal_csv_writer_over_per_cell_text(n, monkeypatch):
    monkeypatch.setattr(cells, "BLOCK_BYTES", 4096)  # several blocks of rows
    table = _awkward_table(n)
    assert export.table_csv_bytes(table) == reference_csv(table)


def test_csv_of_a_column_holding_none_and_numbers_is_still_exact():
    table = Table(("flow", "packets", "first_ts"), {"flow": ["a", 1, None], "packets": [1, None, 2],
                                                   "first_ts": np.array([1, 2, 3])})
    expected = b"flow,packets,first_ts\na,1,0.000000001\n1,None,0.000000002\n,2,0.000000003\n"
    assert export.table_csv_bytes(table) == expected


def _json_table(n: int) -> Table:
    table = _awkward_table(n)
    rng = np.random.default_rng(5)
    table = Table(table.columns + ("peer_qp", "packets", "goodput_gbps"), dict(table.data))
    table.data["peer_qp"] = rng.integers(-1, 2**24, n)
    table.data["packets"] = rng.integers(-5, 10**15, n)
    gbps = np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 10.0 ** rng.integers(-8, 9, n))
    gbps[: n // 4] = np.resize([0.0, -0.0, 1.5, 1e300, 5e-324, 0.1], n // 4)  # repeats, signed zeros
    table.data["goodput_gbps"] = gbps
    return table


@pytest.mark.parametrize("n", [0, 1, 5, 3000])
def test_json_tables_equal_json_dumps_of_the_records(n, monkeypatch):
    import json

    monkeypatch.setattr(cells, "BLOCK_BYTES", 4096)
    table = _json_table(n)
    expected = json.dumps(table.records(), indent=1, allow_nan=False)
    assert json_export.table_json(table).decode() == expected
    assert json_export.table_json(table, level=2).decode() == expected.replace("\n", "\n  ")
    table.data["flow"] = [1, None] * (n // 2) + [None] * (n % 2)  # not strings: json itself
    assert json_export.table_json(table).decode() == json.dumps(table.records(), indent=1, allow_nan=False)


def test_json_refuses_an_infinite_float_as_before():
    table = _json_table(3)
    table.data["goodput_gbps"][1] = np.inf
    with pytest.raises(ValueError):
        json_export.table_json(table)


def test_json_document_equals_json_dumps_of_the_result_document():
    import json

    from roceview.api import analyze

    result = analyze(str(REPO / "captures" / "pfc-storm.pcap"))
    assert len(result.events_table) and len(result.pfc_table) and len(result.findings_table)
    expected = json.dumps(export.result_document(result), indent=1, allow_nan=False)
    assert json_export.document_json(result).decode() == expected


def _timeline(n: int) -> Table:
    rng = np.random.default_rng(4)
    flows = [f"10.0.{i // 250}.{i % 250}>10.1.0.1:0x{i:06x}" for i in range(128)]
    return Table(TIMELINE_COLUMNS, {
        "bucket_start": 1_700_000_000_000_000_000 + (np.arange(n) // 128) * 1_000_000,
        "flow": [flows[i % 128] for i in range(n)], "bytes": rng.integers(0, 10**7, n),
        "gbps": rng.random(n) * 100, "ecn_ce": rng.integers(0, 3, n), "cnp_packets": np.zeros(n, np.int64),
        "retransmitted_packets": rng.integers(0, 50, n)})


def test_vectorised_csv_equals_per_cell_text_on_a_big_table():
    """The numpy text path at a size where it takes its block-wise route (no timing here:
    speed is measured in benchmarks/, never asserted in tests)."""
    table = _timeline(50_000)
    assert export.table_csv_bytes(table) == reference_csv(table)


def _flows(n: int) -> Table:
    data = {c: np.zeros(n, np.int64) for c in FLOW_COLUMNS}
    data.update(flow=[f"10.0.0.1>10.0.0.2:0x{i:06x}" for i in range(n)], src_ip=["10.0.0.1"] * n,
                dst_ip=["10.0.0.2"] * n, transport=["RC"] * n, peer_qp=np.full(n, -1),
                rtt_p50_us=np.full(n, np.nan), rtt_p99_us=np.full(n, np.nan), goodput_gbps=np.ones(n))
    data["bytes"] = np.arange(n) * 10  # the biggest talker is the last flow
    data["packets"] = np.full(n, 5)
    return Table(FLOW_COLUMNS, data)


def test_worst_first_ranks_broken_then_loss_then_congestion_then_bytes():
    flows = _flows(6)
    d = flows.data
    d["ecn_ce"][1] = 50          # congestion marks only
    d["retransmitted_packets"][2] = 3  # recovery work
    d["naks_other"][3] = 1       # a fatal NAK: broken
    d["unrecovered_psns"][4] = 2  # data never recovered: broken
    d["gap_psns"][4] = 2
    assert worst_first(flows).tolist() == [4, 3, 2, 1, 5, 0]


class _Result:
    def __init__(self, flows):
        self.flows_table = flows
        self.findings_table = Table(("severity",), {"severity": []})
        self.pfc_table = Table(("src_mac",), {"src_mac": []})
        self.summary = {"files": ["x.pcap"], "packets": 1, "duration_ns": 0, "first_ts": None, "last_ts": None,
                        "roce_packets": 1, "protocols": {}, "flows": len(flows), "pmtu": None,
                        "decode_warnings": 0, "detected": {}}


def _report(flows, **kw) -> str:
    out = io.StringIO()
    print_report(_Result(flows), Screen(out), **kw)
    return out.getvalue()


def test_report_lists_the_worst_queue_pairs_and_counts_the_rest():
    flows = _flows(100)
    flows.data["retransmitted_packets"][7] = 4
    flows.data["ecn_ce"][3] = 2
    text = _report(flows)
    rows = [line for line in text.splitlines() if line.startswith("10.0.0.1>")]
    assert len(rows) == MAX_QP_ROWS == 25
    assert rows[0].startswith("10.0.0.1>10.0.0.2:0x000007") and rows[1].startswith("10.0.0.1>10.0.0.2:0x000003")
    assert rows[2].startswith("10.0.0.1>10.0.0.2:0x000063")  # then by bytes
    assert ("… 75 more queue pairs (none with loss or congestion signs): see qps.csv (--csv) or --json; "
            "--max-qps 0 lists them all") in text
    everything = _report(flows, max_qps=0)
    assert len([line for line in everything.splitlines() if line.startswith("10.0.0.1>")]) == 100
    assert "more queue pair" not in everything
    flows.data["naks_seq"][5] = 1
    assert "(1 with loss or congestion signs)" in _report(flows, max_qps=2)


def test_plain_table_is_drawn_as_rich_drew_it():
    rich_table = pytest.importorskip("rich.table")
    from rich.console import Console

    heads = ("flow", "peer", "pkts", "Gb/s")
    rows = [("10.0.0.1>10.0.0.2:0x000001", "0x000002", "7", "1.500000"), ("a", "", "12345", "")]
    out = io.StringIO()
    table = rich_table.Table(show_edge=False, pad_edge=False, header_style="bold")
    for i, h in enumerate(heads):
        table.add_column(h, justify="left" if i < 2 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    Console(file=out, width=200, force_terminal=False, highlight=False, soft_wrap=False).print(table)
    mine = io.StringIO()
    Screen(mine).table(heads, rows, right={2, 3})
    assert mine.getvalue() == out.getvalue()


def test_terminal_output_is_styled_and_cut_at_the_terminal_edge():
    out = io.StringIO()
    Screen(out, is_tty=True, width=30).table(("flow", "pkts"), [("x" * 40, "1")], right={1}, styles=["red"])
    lines = out.getvalue().splitlines()
    assert lines[2] == "\x1b[31m" + "x" * 29 + "…\x1b[0m"
    assert lines[0].startswith("\x1b[1m")


def test_max_qps_option():
    path = REPO / "captures" / "clean.pcap"
    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdin=io.StringIO(), stdout=out, stderr=err)
    assert main(["analyze", str(path), "--max-qps", "1"], env) == 0
    assert "… 3 more queue pairs" in out.getvalue()
    assert main(["analyze", str(path), "--max-qps", "-2"], env) == 2
    usage = err.getvalue()          # argparse's usage errors too: the Environment's stderr
    assert usage.count("\n") == 1 and "--max-qps" in usage


@pytest.mark.parametrize("sample", ["network-loss.pcap", "incast.pcap", "network-loss.pcapng"])
def test_the_analyze_path_imports_neither_rich_pandas_nor_tomllib(tmp_path, sample):
    """Nor numpy.ma (~8 ms: plain np.unique imports it; the incast rule and the pcapng reader used
    to call it)."""
    path = REPO / "captures" / sample
    if sample.endswith(".pcapng"):                 # the same packets, as pcapng
        from roceview.capture.readers import read_records
        from roceview.capture.writer import write_pcapng

        chunk = next(read_records(str(path.with_suffix(".pcap")), 1 << 20, lambda m: None))
        path = tmp_path / sample
        write_pcapng(path, [chunk.frame(i) for i in range(chunk.n)], chunk.ts.tolist())
    script = (
        "import io, sys\n"
        "from roceview.cli import Environment, main\n"
        f"code = main(['analyze', {str(path)!r}, '--csv', {str(tmp_path / 'o')!r}],"
        " Environment(stdout=io.StringIO(), stderr=io.StringIO()))\n"
        "from roceview.kernels.backend import BACKEND\n"
        "unwanted = ('rich', 'pandas', 'tomllib') + (('json', 'numpy.ma') if BACKEND == 'c' else ())\n"  # numba: both
        "print(code, sorted(m for m in unwanted if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.stdout.strip() == "0 []", proc.stderr


def test_the_option_default_is_the_report_default():
    from roceview.commands import analyze

    assert analyze.MAX_QP_ROWS == MAX_QP_ROWS


def test_progress_bar_only_on_a_terminal_and_warnings_above_it():
    from roceview.commands.progress import Progress

    class Err(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    for tty in (False, True):
        err = Err(tty)
        with Progress(err, "analyzing", total_bytes=10_000, delay=0) as bar:
            if tty:
                bar.timer.join()        # the bar is drawn from the timer's thread
            bar.advance(1234, 5000)
            bar.warn("damaged record")
        text = err.getvalue()
        if tty:
            assert "analyzing" in text and "pkt/s" in text
            assert "roceview: warning: damaged record" in text
        else:
            assert text == "roceview: warning: damaged record\n"
            assert bar.timer is None and bar.bar is None


def test_unhashable_values_in_a_string_column_are_written_by_their_text():
    table = Table(("flow", "packets"), {"flow": [["a", "b"], "x"], "packets": np.array([1, 2])})
    assert export.table_csv_bytes(table) == reference_csv(table)
