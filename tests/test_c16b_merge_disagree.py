"""Issue 16 item 4: files merged in time that cannot be one capture are named, with --each
suggested; files that belong together (a ring buffer, two mirror ports) stay quiet."""
from __future__ import annotations

import io
import shutil

import numpy as np

from analysis_helpers import T0, ack, req, write_rows_pcap
from roceview.cli import Environment, main
from roceview.packets.read import iter_batches

US = 1000
DAY_NS = 86_400 * 10**9


def _flow(t0: int, first_psn: int, n: int = 40) -> list[dict]:
    rows = [req(t0 + i * US, (first_psn + i) % (1 << 24), ackreq=True) for i in range(n)]
    return rows + [ack(t0 + n * US, (first_psn + n - 1) % (1 << 24))]


def _warnings(paths) -> list[str]:
    got: list[str] = []
    for _ in iter_batches([str(p) for p in paths], warn=got.append):
        pass
    return got


def test_same_flow_same_time_psns_far_apart_warns_and_suggests_each(tmp_path):
    write_rows_pcap(tmp_path / "a.pcap", _flow(T0, 100))
    write_rows_pcap(tmp_path / "b.pcap", _flow(T0 + 500, 9_000_000))
    got = _warnings([tmp_path / "a.pcap", tmp_path / "b.pcap"])
    assert len(got) == 1, got
    assert "overlap in time but disagree" in got[0] and "10.0.0.1>10.0.0.2:0x0000d2" in got[0]
    assert "--each" in got[0] and "9,000,000" in got[0]


def test_psns_that_wrap_around_zero_are_one_sequence(tmp_path):
    write_rows_pcap(tmp_path / "a.pcap", _flow(T0, (1 << 24) - 20))
    write_rows_pcap(tmp_path / "b.pcap", _flow(T0 + 500, (1 << 24) - 10))
    assert _warnings([tmp_path / "a.pcap", tmp_path / "b.pcap"]) == []


def test_two_mirror_ports_and_a_ring_buffer_do_not_warn(tmp_path):
    rows = _flow(T0, 5000, 200)
    write_rows_pcap(tmp_path / "even.pcap", rows[0::2])                 # two ports, one capture
    write_rows_pcap(tmp_path / "odd.pcap", rows[1::2])
    assert _warnings([tmp_path / "even.pcap", tmp_path / "odd.pcap"]) == []
    write_rows_pcap(tmp_path / "r1.pcap", rows[:100])                   # a ring buffer
    write_rows_pcap(tmp_path / "r2.pcap", rows[100:])
    assert _warnings([tmp_path / "r1.pcap", tmp_path / "r2.pcap"]) == []


def test_the_same_flow_later_with_other_psns_is_not_a_disagreement(tmp_path):
    """A QP torn down and set up again an hour later starts a new PSN sequence: no overlap."""
    write_rows_pcap(tmp_path / "a.pcap", _flow(T0, 100))
    write_rows_pcap(tmp_path / "b.pcap", _flow(T0 + 3600 * 10**9, 9_000_000))
    assert _warnings([tmp_path / "a.pcap", tmp_path / "b.pcap"]) == []


def test_timestamps_decades_apart_warn(tmp_path):
    write_rows_pcap(tmp_path / "now.pcap", _flow(T0, 100))
    write_rows_pcap(tmp_path / "epoch.pcap", _flow(DAY_NS, 100))                 # a clock never set
    got = _warnings([tmp_path / "now.pcap", tmp_path / "epoch.pcap"])
    assert len(got) == 1 and "54 years before" in got[0] and "--each" in got[0], got


def test_analyze_prints_the_warning_once_on_stderr_and_each_is_quiet(tmp_path):
    write_rows_pcap(tmp_path / "a.pcap", _flow(T0, 100))
    write_rows_pcap(tmp_path / "b.pcap", _flow(T0 + 500, 9_000_000))
    for each, count in ((False, 1), (True, 0)):
        out, err = io.StringIO(), io.StringIO()
        code = main(["analyze", str(tmp_path / "a.pcap"), str(tmp_path / "b.pcap"), *(["--each"] if each else [])],
                    Environment(stdin=io.StringIO(), stdout=out, stderr=err))
        assert code == 0
        assert err.getvalue().count("disagree") == count, err.getvalue()
