"""Files merged in time that cannot be one capture are named, with --each
suggested; files that belong together (a ring buffer, two mirror ports) stay quiet.

--each sub-folders never collide or escape DIR; the overlap
warning's counts read right ('1 year', '1 more flow')."""
from __future__ import annotations

import io
import shutil
import numpy as np
from helpers.analysis import T0, ack, req, write_rows_pcap
from roceview.cli import Environment, main
from roceview.packets.read import iter_batches
from pathlib import Path


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


SAMPLES = Path(__file__).resolve().parents[2] / "captures"
YEAR_NS = 365 * 86_400 * 10**9


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *argv], Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def _copy(sample: str, dest: Path) -> str:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes((SAMPLES / sample).read_bytes())
    return str(dest)


def test_each_folder_names_never_collide_with_a_numbered_one(tmp_path):
    """a/x.pcap, b/x.pcap and x-2.pcap: the second x used to be x-2 too, and x-2.pcap's CSVs
    overwrote b/x.pcap's."""
    files = [_copy("rnr.pcap", tmp_path / "a" / "x.pcap"), _copy("incast.pcap", tmp_path / "b" / "x.pcap"),
             _copy("clean.pcap", tmp_path / "x-2.pcap")]
    code, out, err = _run([*files, "--each", "--csv", str(tmp_path / "out")])
    assert code == 0, err
    folders = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(folders) == 3 and all((tmp_path / "out" / f / "qps.csv").is_file() for f in folders), folders


def test_each_folder_of_a_file_named_dot_dot_pcap_stays_inside_dir(tmp_path):
    """'..pcap' without its suffix is '..' (and '.pcap.pcap' is '.'): DIR/.. is outside DIR."""
    files = [_copy("rnr.pcap", tmp_path / "in" / "..pcap"), _copy("clean.pcap", tmp_path / "in" / ".pcap.pcap")]
    out_dir = tmp_path / "deep" / "out"
    code, out, err = _run([*files, "--each", "--csv", str(out_dir)])
    assert code == 0, err
    assert not (out_dir / "qps.csv").exists() and not (out_dir.parent / "qps.csv").exists()
    folders = sorted(p.name for p in out_dir.iterdir())
    assert len(folders) == 2 and all((out_dir / f / "qps.csv").is_file() for f in folders), folders




def _flows(t0: int, first_psn: int, qps=(0xD2,), n: int = 40) -> list[dict]:
    """One flow after the other (interleaved, the every-8th-row sample would see only one)."""
    return [req(t0 + (k * n + i) * US, first_psn + i, qp=qp, ackreq=True) for k, qp in enumerate(qps) for i in range(n)]


def test_files_about_one_year_apart_say_1_year(tmp_path):
    write_rows_pcap(tmp_path / "a.pcap", _flows(T0, 100))
    write_rows_pcap(tmp_path / "b.pcap", _flows(T0 + YEAR_NS + 10 * 86_400 * 10**9, 100))
    got = _warnings([tmp_path / "a.pcap", tmp_path / "b.pcap"])
    assert len(got) == 1 and "ends 1 year before" in got[0], got


def test_two_disagreeing_flows_say_1_more_flow(tmp_path):
    write_rows_pcap(tmp_path / "a.pcap", _flows(T0, 100, qps=(0xD2, 0xD3)))
    write_rows_pcap(tmp_path / "b.pcap", _flows(T0 + 500, 9_000_000, qps=(0xD2, 0xD3)))
    got = _warnings([tmp_path / "a.pcap", tmp_path / "b.pcap"])
    assert len(got) == 1 and "(and 1 more flow)" in got[0], got


def test_a_file_given_twice_is_named_once(tmp_path):
    """clean.pcap twice merged with itself read as 120 retransmissions (a timeout_retransmit
    warning) with nothing on stderr."""
    path = _copy("clean.pcap", tmp_path / "d" / "clean.pcap")
    got = _warnings([path, path])
    assert len(got) == 1 and "given twice" in got[0], got
    got = _warnings([path, str(tmp_path / "d")])                        # and again inside its directory
    assert len(got) == 1 and "given twice" in got[0], got
    (tmp_path / "link.pcap").symlink_to(path)
    got = _warnings([path, str(tmp_path / "link.pcap")])
    assert len(got) == 1 and "are the same file" in got[0], got
    assert _warnings([path, _copy("rnr.pcap", tmp_path / "d2" / "rnr.pcap")]) == []


def test_each_goes_on_past_a_file_it_cannot_read_and_exits_2(tmp_path):
    """One unreadable file among several stopped --each there: later files were never analyzed."""
    junk = tmp_path / "junk.pcap"
    junk.write_text("not a capture\n")
    files = [str(SAMPLES / "rnr.pcap"), str(junk), str(SAMPLES / "clean.pcap")]
    code, out, err = _run([*files, "--each", "--csv", str(tmp_path / "out")])
    assert code == 2
    assert out.count("Capture ") == 2 and "clean.pcap" in out, out[-300:]
    assert err.count("roceview: error:") == 1 and str(junk) in err, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["clean", "rnr"]


def test_each_stops_at_an_error_that_is_not_about_a_file(tmp_path):
    code, out, err = _run([str(SAMPLES / "rnr.pcap"), str(SAMPLES / "clean.pcap"), "--each", "--filter", "psn =="])
    assert code == 2 and err.count("\n") == 1 and "Capture" not in out, err
