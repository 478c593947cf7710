"""`roceview live` at its input and output boundaries: each bad value is one line on stderr and
exit 2, never a traceback (a directory as -r was an IsADirectoryError traceback; --duration
1e300 an OverflowError printed by the timer thread, exit 0, the duration ignored); stdout
carries only what was asked of it (`--json -`: the JSON alone, the summary line had come first;
`-w -`: the capture, it wrote a file named '-'); a stream cut inside its first pcapng blocks
warns as `analyze` of the same file does (it read the missing bytes as zeros, silently), and
one ending inside its pcap file header says so (it said "unsupported link type 0")."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest
from live_feed import REPO, check_whole

from helpers.cli import run

LOSS = REPO / "captures" / "network-loss-receiver-side.pcap"


def live(*argv, stdin_bytes: bytes = b"", cwd=REPO):
    proc = subprocess.run([sys.executable, "-m", "roceview", "live", "--no-tui", *map(str, argv)], cwd=cwd,
                          input=stdin_bytes, capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc.returncode, proc.stdout, proc.stderr.decode()


def one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err


def test_a_directory_as_the_stream_is_one_line(tmp_path):
    code, _, err = run("live", "--no-tui", "-r", tmp_path)
    one_line_error(code, err, str(tmp_path), "directory")


@pytest.mark.parametrize("option, value", [("--duration", "1e300"), ("--duration", "1e10"), ("--duration", "nan"),
                                           ("--duration", "-1"), ("--count", "9" * 30), ("--count", "0"),
                                           ("--count", "1e3"), ("--count", "\u00b2"), ("--snaplen", "99999999999")])
def test_out_of_range_option_values_are_one_line(option, value):
    source = ("-i", "roceview-nosuch0") if option == "--snaplen" else ("-r", LOSS)    # --snaplen is for -i
    code, _, err = live(*source, option, value)        # a usage error: argparse prints to sys.stderr
    one_line_error(code, err, option)


def test_json_to_stdout_is_the_json_alone():
    code, out, err = live("-r", "-", "--json", "-", stdin_bytes=LOSS.read_bytes())
    assert code == 0, err
    assert json.loads(out)["summary"]["live"]["stopped_by"] == "end of stream"
    assert "Live capture <stdin>" in err


def test_w_dash_writes_the_capture_to_stdout_and_the_report_to_stderr(tmp_path):
    data = LOSS.read_bytes()
    code, out, err = live("-r", "-", "-w", "-", stdin_bytes=data, cwd=tmp_path)
    assert code == 0, err
    assert out == data
    assert "Live capture <stdin>" in err and "Findings" in err and "saved to standard output" in err
    assert list(tmp_path.iterdir()) == []                 # no file named '-'
    saved = tmp_path / "saved.pcap"
    saved.write_bytes(out)
    check_whole(saved, data)


def test_w_dash_and_json_dash_both_on_stdout_are_refused(tmp_path):
    code, _, err = live("-r", "-", "-w", "-", "--json", "-", stdin_bytes=LOSS.read_bytes(), cwd=tmp_path)
    one_line_error(code, err, "-w -", "--json -")


def test_w_onto_a_full_device_is_one_line(tmp_path):
    data = LOSS.read_bytes()
    bigger = tmp_path / "bigger.pcap"
    bigger.write_bytes(data[:24] + data[24:] * 12)  # 2 MB read at once: written while read, not only at the end
    with bigger.open("rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "roceview", "live", "--no-tui", "-r", "-", "-w", "/dev/full"],
                              cwd=REPO, stdin=stdin, capture_output=True, timeout=120)
    code, err = proc.returncode, proc.stderr.decode()
    one_line_error(code, err, "/dev/full")


def pcapng_cut_in_its_interface_block(tmp_path):
    path = tmp_path / "loss.pcapng"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "network-loss-receiver-side", "-o", str(path)],
                   cwd=REPO, check=True, capture_output=True)
    data = path.read_bytes()
    shb = struct.unpack("<I", data[4:8])[0]
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(data[:shb + 12])                      # the section header and 12 bytes of the interface's
    return cut


def test_a_pcapng_stream_cut_in_its_first_blocks_warns_as_analyze_does(tmp_path):
    cut = pcapng_cut_in_its_interface_block(tmp_path)
    _, _, file_err = run("analyze", cut)
    warning = file_err.strip().replace(str(cut), "<stdin>")
    assert "ends in the middle of a block" in warning       # what analyze says of the file
    code, _, err = live("-r", "-", stdin_bytes=cut.read_bytes())
    assert code == 0, err
    assert warning in err, err


def test_a_stream_ending_inside_its_pcap_header_says_so():
    code, _, err = live("-r", "-", stdin_bytes=LOSS.read_bytes()[:10])
    one_line_error(code, err, "inside its pcap file header (10 of 24 bytes)")
    assert "link type" not in err


def test_a_second_read_option_is_refused_not_taken_instead_of_the_first():
    from helpers.cli import run

    code, _, err = run("live", "-r", "captures/clean.pcap", "-r", "captures/rnr.pcap", "--no-tui")
    assert code == 2 and err == "roceview live: error: -r reads one stream; it was given twice\n"
