"""dissect's time column is tshark's: every -t format and -u hms, each packet with its file's
precision (9 decimals on a ns pcap or a pcapng of if_tsresol 9, 6 on a µs one), in local time
as TZ says. Compared with tshark's own column (`-T fields -e _ws.col.Time`) on the samples, the
real captures, µs/ns pcap and pcapng copies, and a capture whose times jump by minutes, hours,
days and backwards (hms, negative deltas), in two time zones."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess

import pytest

from conftest import REAL, SAMPLES, capture_files
from helpers.cli import run

FORMATS = ("r", "a", "ad", "adoy", "d", "dd", "e", "u", "ud")
JUMPS = [(1700000000, 500), (1700000061, 7), (1700003700, 5), (1700090000, 0), (1700000001, 999999999),
         (1699999999, 0), (1699142400, 123)]     # + 61 s, + 1 h, + 1 day, back a day, back, 5 Nov (a 1-digit day)


def retimed(src, dst, times, nanos: bool = True):
    """The first len(times) records of pcap `src` at these (seconds, ns) times, in a ns pcap
    (or a µs one: the ns cut to µs)."""
    data = src.read_bytes()
    out, pos = bytearray(b"\x4d\x3c\xb2\xa1" if nanos else b"\xd4\xc3\xb2\xa1") + data[4:24], 24
    for sec, ns in times:
        _, _, cap, wire = struct.unpack("<IIII", data[pos:pos + 16])
        out += struct.pack("<IIII", sec, ns if nanos else ns // 1000, cap, wire) + data[pos + 16:pos + 16 + cap]
        pos += 16 + cap
    dst.write_bytes(bytes(out))
    return dst


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The jumping capture (ns and µs), and a sample as µs pcap, ns pcapng and µs pcapng (editcap)."""
    d = tmp_path_factory.mktemp("times")
    sample = SAMPLES / "network-loss.pcap"
    files = [retimed(sample, d / "jumps.pcap", JUMPS), retimed(sample, d / "jumps-us.pcap", JUMPS, nanos=False)]
    if shutil.which("editcap"):
        for name, kind, source in (("us.pcap", "pcap", sample), ("ns.pcapng", "pcapng", sample),
                                   ("us.pcapng", "pcapng", d / "us.pcap")):
            subprocess.run(["editcap", "-F", kind, str(source), str(d / name)], check=True, capture_output=True)
            files.append(d / name)
    return files


def tshark_times(tshark, path, fmt: str, hms: bool, count: int, display: str | None = None) -> list[str]:
    cmd = [tshark, "-r", str(path), "-t", fmt, "-u", "hms" if hms else "s", "-c", str(count), "-T", "fields",
           "-e", "_ws.col.Time"] + (["-Y", display] if display else [])
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()


def our_times(path, fmt: str, hms: bool, count: int, display: str | None = None) -> list[str]:
    args = ["dissect", path, "-t", fmt, "-u", "hms" if hms else "s", "-c", count, "--jsonl"]
    code, out, err = run(*args, *(["-Y", display] if display else []))
    assert code == 0, err
    return [json.loads(line)["time"] for line in out.splitlines()]


def _same(tshark, path, fmt: str, hms: bool = False, count: int = 60, display: str | None = None) -> None:
    assert our_times(path, fmt, hms, count, display) == tshark_times(tshark, path, fmt, hms, count, display), \
        (path.name, fmt, hms)


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC"], indirect=True)
def test_every_time_format_equals_tshark_on_jumps_and_precisions(tshark, copies, zone):
    jumps, jumps_us, *editcap = copies
    for fmt in FORMATS:
        _same(tshark, jumps, fmt)
    for fmt in ("r", "d", "dd", "e"):                # -u hms: the seconds formats (not epoch)
        _same(tshark, jumps, fmt, hms=True)
    for fmt in ("r", "ad", "e"):
        _same(tshark, jumps_us, fmt)
    for path in editcap:                             # µs pcap, ns and µs pcapng (if_tsresol 9 and 6)
        _same(tshark, path, "r")


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["Asia/Kolkata"], indirect=True)
def test_absolute_times_are_local_as_tz_says(tshark, copies, zone):
    for fmt in ("a", "ad", "adoy"):
        _same(tshark, copies[0], fmt)


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC"], indirect=True)
def test_delta_displayed_counts_from_the_previous_packet_shown(tshark, copies, zone):
    for hms in (False, True):
        _same(tshark, copies[0], "dd", hms, display="frame.number != 2 && frame.number != 5")


@pytest.mark.tshark
@pytest.mark.parametrize("zone", ["UTC"], indirect=True)
def test_time_formats_equal_tshark_on_samples_and_real_captures(tshark, zone):
    """Relative times with each file's precision (ERF records: their own ns timestamps)."""
    for path in capture_files(SAMPLES)[:2] + capture_files(REAL):
        _same(tshark, path, "r", count=300)


def test_lines_show_nanoseconds_of_a_ns_capture_and_microseconds_of_a_us_one(copies):
    _, ns_out, _ = run("dissect", copies[0], "-c", "2")
    _, us_out, _ = run("dissect", copies[1], "-c", "2")
    assert [line.split()[1] for line in ns_out.splitlines()] == ["0.000000000", "60.999999507"]
    assert [line.split()[1] for line in us_out.splitlines()] == ["0.000000", "61.000000"]


def test_unknown_time_format_is_one_line_and_exit_2():
    code, out, err = run("dissect", SAMPLES / "rnr.pcap", "-t", "x")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "-t" in err
