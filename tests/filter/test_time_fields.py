"""tshark's time fields and eth.type, in display filters and `dissect -T fields`: frame.time (local
time as TZ says), frame.time_epoch, frame.time_relative, frame.time_delta and
frame.time_delta_displayed (since the previous packet that PASSED the filter, 0 before any),
compared with tshark on the samples, the real captures and a capture whose times jump by
minutes, hours, days and backwards."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REAL, SAMPLES, capture_files
from helpers.cli import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "commands"))
from test_dissect_time_formats import JUMPS, retimed  # noqa: E402

FIELDS = ("frame.number", "frame.time", "frame.time_epoch", "frame.time_relative", "frame.time_delta",
          "frame.time_delta_displayed", "eth.type")
FILTERS = ("frame.time_relative > 60", "frame.time_relative in {0 .. 61}", "frame.time_delta < 0",
           "frame.time_delta == 0", 'frame.time >= "2023-11-14 23:00:00"', 'frame.time < "Nov 14, 2023 22:14:00 UTC"',
           'frame.time == "2023-11-14T22:13:20.0000005Z"', "frame.time_epoch in {1700000061.000000007}",
           "frame.time_epoch <= 1700000000.5", "frame.number == 1 or frame.time_delta_displayed > 65",
           "frame.time_delta_displayed == 0", "eth.type == 0x8100", "eth.type != 0x0800", "!(frame.time_relative >= -1)")


@pytest.fixture(scope="module")
def jumps(tmp_path_factory):
    return retimed(SAMPLES / "network-loss.pcap", tmp_path_factory.mktemp("jumps") / "jumps.pcap", JUMPS)


def tshark_lines(tshark, path, args) -> list[str]:
    return subprocess.run([tshark, "-r", str(path), *args], capture_output=True, text=True, check=True,
                          timeout=120).stdout.splitlines()


def field_args(display: str | None) -> list[str]:
    args = ["-T", "fields"] + [x for f in FIELDS for x in ("-e", f)]
    return args + (["-Y", display] if display else [])


def ours(path, args) -> list[str]:
    code, out, err = run("dissect", path, *args)
    assert code == 0, err
    return out.splitlines()


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"], indirect=True)
def test_time_fields_print_as_tshark_prints_them(tshark, jumps, zone):
    for path in [jumps] + capture_files(SAMPLES)[:2]:
        for display in (None, "frame.number != 2 && frame.number != 5"):
            args = field_args(display)
            assert ours(path, args) == tshark_lines(tshark, path, args), (path.name, display)


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC"], indirect=True)
def test_time_fields_equal_tshark_on_the_real_captures(tshark, zone):
    for path in capture_files(REAL):
        args = ["-c", "300"] + field_args("frame.number > 3")
        assert ours(path, args) == tshark_lines(tshark, path, args), path.name


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC"], indirect=True)
def test_time_filters_select_what_tshark_selects(tshark, jumps, zone):
    for path in (jumps, SAMPLES / "pfc-storm.pcap"):
        for display in FILTERS:
            args = ["-Y", display, "-T", "fields", "-e", "frame.number"]
            assert ours(path, args) == tshark_lines(tshark, path, args), (path.name, display)


@pytest.mark.parametrize("display, says", [
    ("frame.time_relative > 1e3", "not a valid time"), ('frame.time_relative > "2"', "not a valid time"),
    ("frame.time > 1700000000", "not a valid absolute time"), ('frame.time == "Nov 31, 2023"', "not a valid absolute")])
def test_a_bad_time_literal_is_one_line_and_exit_2(display, says):
    code, out, err = run("dissect", SAMPLES / "rnr.pcap", "-Y", display)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err


def test_relative_times_need_the_packets_before_them_in_analyze_filter():
    code, err = run("analyze", SAMPLES / "rnr.pcap", "--filter", "frame.time_delta > 0")[::2]
    assert code == 2 and len(err.strip().splitlines()) == 1 and "frame.time_delta" in err
