"""`roceview generate` on the command line: output format by extension, one-line errors."""
from __future__ import annotations

import io
import json

from roceview.cli import Environment, main
from roceview.generate import SCENARIOS


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Environment(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_pcap_by_default_and_pcapng_by_extension(tmp_path):
    assert run("generate", "clean", "-o", str(tmp_path / "a.pcap"))[0] == 0
    assert run("generate", "clean", "-o", str(tmp_path / "a.pcapng"))[0] == 0
    assert (tmp_path / "a.pcap").read_bytes()[:4] == bytes.fromhex("4d3cb2a1")   # ns pcap, LE
    assert (tmp_path / "a.pcapng").read_bytes()[:4] == bytes.fromhex("0a0d0d0a")


def test_same_seed_same_file_and_truth_json(tmp_path):
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    run("generate", "rnr", "-o", str(a), "--seed", "5")
    run("generate", "rnr", "-o", str(b), "--seed", "5", "--truth", str(tmp_path / "t.json"))
    assert a.read_bytes() == b.read_bytes()
    truth = json.loads((tmp_path / "t.json").read_text())
    assert truth["scenario"] == "rnr" and truth["counters"]["naks_rnr_sent"] > 0
    assert "rnr" in truth["expected_kinds"] and "network_loss" in truth["forbidden_kinds"]


def test_unknown_scenario_is_bad_input_with_one_line_listing_the_names(tmp_path):
    code, _, err = run("generate", "nope", "-o", str(tmp_path / "x.pcap"))
    assert code == 2 and err.count("\n") == 1
    assert all(name in err for name in SCENARIOS)


def test_unwritable_output_is_one_line_exit_2_and_nothing_left(tmp_path):
    code, _, err = run("generate", "clean", "-o", str(tmp_path / "missing" / "x.pcap"))
    assert code == 2 and err.startswith("roceview: error: cannot write") and err.count("\n") == 1
    code, _, err = run("generate", "clean", "-o", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_mirror_option_moves_the_capture_point(tmp_path):
    run("generate", "network-loss", "-o", str(tmp_path / "s.pcap"))
    run("generate", "network-loss", "-o", str(tmp_path / "r.pcap"), "--mirror", "receiver")
    assert (tmp_path / "s.pcap").stat().st_size > (tmp_path / "r.pcap").stat().st_size


def test_list_prints_every_scenario():
    code, out, _ = run("generate", "list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(SCENARIOS)


def test_bad_scale_is_bad_input(tmp_path):
    assert run("generate", "clean", "-o", str(tmp_path / "x.pcap"), "--scale", "0")[0] == 2


def test_dash_writes_the_capture_to_standard_output_and_no_file(tmp_path, monkeypatch):
    """`-o -` is standard output, as tcpdump's `-w -`: the same bytes as a file, no file named '-'."""
    import subprocess
    import sys
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    repo = Path(__file__).resolve().parents[2]
    env = {**__import__("os").environ, "PYTHONPATH": str(repo)}
    piped = subprocess.run([sys.executable, "-m", "roceview", "generate", "clean", "-o", "-"],
                           capture_output=True, env=env, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert run("generate", "clean", "-o", "file.pcap")[0] == 0
    assert piped.stdout == (tmp_path / "file.pcap").read_bytes()
    assert not (tmp_path / "-").exists()


def test_dash_for_both_capture_and_truth_is_refused():
    code, _, err = run("generate", "clean", "-o", "-", "--truth", "-")
    assert code == 2 and err.count("\n") == 1 and "standard output" in err
