"""Bad options are one line and exit 2 (--roce-port, --config ranges, convert's
output suffix, a pcapng cut inside its section header); `dissect -V | head -1` ends quietly with
0; help(roceview.analyze) shows the real keyword arguments.

Numeric options that are not finite (nan, inf, 1e400) or out of
range were accepted (--link-speed nan/inf ran with a NaN link) or ended in a traceback
(--bucket nan/inf: ValueError/OverflowError; live --duration inf: OverflowError in the stop
timer; generate --seed -1: numpy's ValueError). Each is one line and exit 2 now."""
from __future__ import annotations

import os
import pydoc
import subprocess
import sys
from pathlib import Path
import pytest
from helpers.cli import run
import roceview
from roceview.capture.writer import pcapng_bytes
from roceview.errors import BadInput
from helpers.cli import run_err


REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "clean.pcap"


def one_error_line(err: str) -> bool:
    return err.count("\n") == 1 and " error: " in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["analyze", "dissect", "convert", "tui", "live"])
@pytest.mark.parametrize("port", ["70000", "65536", "0", "-1", "x"])
def test_roce_port_out_of_range_is_one_line_exit_2(command, port, tmp_path):
    extra = ["-o", tmp_path / "o.parquet"] if command == "convert" else []
    source = ["--no-tui", "-r", CAPTURE] if command == "live" else [CAPTURE]
    code, out, err = run(command, *source, "--roce-port", port, *extra)   # usage errors too: the Environment's stderr
    assert code == 2 and out == "" and one_error_line(err) and "1-65535" in err, err
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("port", [1, 4791, 65535])
def test_roce_port_in_range_is_accepted(port):
    code, _, err = run("analyze", CAPTURE, "--roce-port", port)
    assert code == 0, err


@pytest.mark.parametrize("ports", [[70000], [-1], [0], ["4791"], [True]])
def test_the_api_refuses_bad_ports_as_bad_input(ports):
    with pytest.raises(BadInput, match="1-65535"):
        roceview.analyze(str(CAPTURE), roce_ports=ports)


@pytest.mark.parametrize("key,value", [
    ("storm_share", "1.5"), ("pause_warning_share", "-0.1"), ("ce_warning_share", "2"), ("not_ect_share", "nan"),
    ("incast_senders", "0"), ("max_examples", "-3"), ("read_rerequest_span", "0"),
    ("storm_ms", "0"), ("storm_window_ms", "-1.0"), ("incast_window_us", "0.0"), ("nak_window_us", "-5"),
    ("cnp_wait_us", "-1"), ("storm_ms", "inf"), ("dscp_to_priority", '{ "26" = 9 }'),
    ("dscp_to_priority", '{ "64" = 3 }')])
def test_config_thresholds_out_of_range_name_the_key(key, value, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f"[diagnose]\n{key} = {value}\n")
    code, out, err = run("analyze", CAPTURE, "--config", config)
    assert code == 2 and out == "" and one_error_line(err) and key in err, err


@pytest.mark.parametrize("key,value", [("storm_share", "1.0"), ("not_ect_share", "0"), ("incast_senders", "1"),
                                       ("cnp_wait_us", "0"), ("dscp_to_priority", '{ "63" = 7 }')])
def test_config_thresholds_at_the_edges_are_accepted(key, value, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f"[diagnose]\n{key} = {value}\n")
    code, _, err = run("analyze", CAPTURE, "--config", config)
    assert code == 0, err


@pytest.mark.parametrize("name", ["x.csv", "x.json", "x.pcap", "x.parquet.gz"])
def test_convert_refuses_a_suffix_it_does_not_write(name, tmp_path):
    code, out, err = run("convert", CAPTURE, "-o", tmp_path / name)
    assert code == 2 and one_error_line(err) and "Parquet" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["x.parquet", "x.PQ"])
def test_convert_writes_parquet_suffixes(name, tmp_path):
    pytest.importorskip("pyarrow")
    code, _, err = run("convert", CAPTURE, "-o", tmp_path / name)
    assert code == 0, err
    assert (tmp_path / name).read_bytes()[:4] == b"PAR1"


@pytest.mark.parametrize("mode", [[], ["-V"], ["--jsonl"]])
def test_dissect_into_head_exits_0_with_nothing_on_stderr(mode):
    cmd = (f"{sys.executable} -m roceview dissect {' '.join(mode)} {CAPTURE} | head -1 >/dev/null; "
           "echo ${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", cmd], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (proc.stdout, proc.stderr) == ("0\n", "")


def test_help_of_roceview_analyze_shows_its_keyword_arguments():
    text = pydoc.render_doc(roceview.analyze, renderer=pydoc.plaintext)
    signature = text[text.index("analyze("):text.index("->")]
    for name in ("pmtu", "link_speed", "bucket_ms", "roce_ports", "packets", "warn", "config"):
        assert f"{name}:" in signature or f"{name}=" in signature, (name, signature)
    assert "**options" not in text


@pytest.mark.parametrize("size", [4, 8, 11, 12, 20, 27])
def test_a_pcapng_cut_inside_its_section_header_is_refused_like_pcap(size, tmp_path):
    head = pcapng_bytes([], [])[:size]
    path = tmp_path / "cut.pcapng"
    path.write_bytes(head)
    for command in ("analyze", "dissect"):
        code, out, err = run(command, path)
        assert code == 2 and out == "" and one_error_line(err) and "cut short" in err, (size, err)


def test_a_pcapng_with_only_its_section_header_is_zero_packets(tmp_path):
    path = tmp_path / "empty.pcapng"
    path.write_bytes(pcapng_bytes([], [])[:28])
    code, _, err = run("dissect", path)
    assert code == 0, err




@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0"])
@pytest.mark.parametrize("argv", [["analyze", CAPTURE, "--link-speed"], ["analyze", CAPTURE, "--bucket"],
                                  ["dissect", CAPTURE, "--link-speed"],
                                  ["live", "-r", CAPTURE, "--no-tui", "--link-speed"],
                                  ["live", "-r", CAPTURE, "--no-tui", "--duration"]])
def test_non_finite_numbers_are_one_line_exit_2(argv, value):
    code, err = run_err(*argv, value)
    assert code == 2 and err.count("\n") == 1 and err.startswith("roceview: error: "), err
    assert argv[-1] in err


@pytest.mark.parametrize("value", ["1e303", "31536000001"])
def test_a_bucket_longer_than_a_year_is_one_line_exit_2(value):
    """--bucket 1e303 is finite, but in nanoseconds it overflowed (OverflowError traceback)."""
    code, err = run_err("analyze", CAPTURE, "--bucket", value)
    assert code == 2 and err.count("\n") == 1 and "--bucket must be a number > 0 and at most" in err, err
    assert run_err("analyze", CAPTURE, "--bucket", "31536000000")[0] == 0


def test_a_negative_seed_is_one_line_exit_2(tmp_path):
    code, err = run_err("generate", "incast", "-o", tmp_path / "g.pcap", "--seed", "-1")
    assert (code, err) == (2, "roceview: error: --seed must be >= 0, got -1\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["analyze", "dissect"])
def test_a_link_faster_than_ten_terabits_is_one_line_exit_2(command):
    code, err = run_err(command, CAPTURE, "--link-speed", "1e300")
    assert code == 2 and err == "roceview: error: --link-speed must be a number > 0 and at most 10,000 Gb/s (got 1e+300)\n"
    assert run_err(command, CAPTURE, "--link-speed", "1600")[0] == 0


@pytest.mark.parametrize("command", ["analyze", "dissect"])
def test_tsharks_dash_r_names_the_capture(command):
    """`-r FILE` as tshark users type it reads the same capture as naming it."""
    from helpers.cli import run

    assert run(command, "-r", CAPTURE) == run(command, CAPTURE)


@pytest.mark.parametrize("command", ["analyze", "dissect", "convert -o x.parquet", "tui"])
def test_no_capture_at_all_is_one_usage_line_exit_2(command):
    code, err = run_err(*command.split())
    assert code == 2 and err.count("\n") == 1 and "a capture is required: CAPTURE or -r FILE" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "3601", "x"])
def test_a_scheduler_timeout_out_of_range_is_one_usage_line(value):
    code, err = run_err("analyze", CAPTURE, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1",
                        "--scheduler-timeout", value)
    assert code == 2 and err.count("\n") == 1 and "--scheduler-timeout: must be a number of seconds" in err, err


def test_a_scheduler_timeout_without_dask_is_refused():
    code, err = run_err("analyze", CAPTURE, "--scheduler-timeout", "5")
    assert code == 2 and err == "roceview: error: --scheduler-timeout needs --engine dask\n"


def test_the_scheduler_timeout_bounds_the_wait_for_a_scheduler_that_is_not_there():
    pytest.importorskip("distributed")
    code, err = run_err("analyze", CAPTURE, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1",
                        "--scheduler-timeout", "1")
    assert code == 2 and err.count("\n") == 1 and "no connection in 1 s" in err, err
