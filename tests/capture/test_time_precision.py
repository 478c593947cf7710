"""Each record carries its file's time precision: a pcap's magic (µs: 6 decimals, ns: 9), a
pcapng interface's if_tsresol (10^-n: n decimals; 2^-n: those of the largest power of ten it reaches), per record
when one file has interfaces of several resolutions, and dissect prints each packet so, as tshark."""
from __future__ import annotations

import struct
import subprocess

import numpy as np
import pytest

from conftest import SAMPLES
from helpers.cli import run
from roceview.capture.readers import read_records
from roceview.packets.read import iter_batches

RESOLUTIONS = (6, 9, 3, 0x8A, 0)        # µs, ns, ms, 2^-10 s, s


def _block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def pcapng_of_resolutions(path, frame: bytes):
    """One interface per resolution, two packets on each, in turn, at 1.5 s + a few units."""
    out = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    for resol in RESOLUTIONS:
        out += _block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB3x", 9, 1, resol) + b"\0" * 4)
    for k in range(2):
        for i, resol in enumerate(RESOLUTIONS):
            per_second = 2 ** (resol & 0x7F) if resol & 0x80 else 10 ** resol
            units = 1700000000 * per_second + per_second * 3 // 2 + 7 * k + i
            out += _block(6, struct.pack("<IIIII", i, units >> 32, units & 0xFFFFFFFF, len(frame), len(frame)) + frame)
    path.write_bytes(out)
    return path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    with open(SAMPLES / "network-loss.pcap", "rb") as fh:
        data = fh.read()
    cap = struct.unpack("<I", data[32:36])[0]
    return pcapng_of_resolutions(tmp_path_factory.mktemp("resol") / "mixed.pcapng", data[40:40 + cap])


def test_each_pcapng_interface_gives_its_records_their_decimals(mixed):
    chunk = next(read_records(str(mixed), 1000, lambda m: None))
    assert chunk.digits.tolist() == [6, 9, 3, 3, 0] * 2
    batch = next(iter_batches([str(mixed)]))
    assert batch.cols["_ts_digits"].tolist() == [6, 9, 3, 3, 0] * 2


def test_a_pcap_magic_gives_microseconds_or_nanoseconds(tmp_path):
    ns = next(read_records(str(SAMPLES / "rnr.pcap"), 10, lambda m: None))
    assert set(ns.digits.tolist()) == {9}
    subprocess.run(["editcap", "-F", "pcap", str(SAMPLES / "rnr.pcap"), str(tmp_path / "us.pcap")], check=True,
                   capture_output=True)
    us = next(read_records(str(tmp_path / "us.pcap"), 10, lambda m: None))
    assert set(us.digits.tolist()) == {6}


@pytest.mark.tshark
def test_dissect_prints_each_packet_with_its_interfaces_precision_as_tshark(tshark, mixed):
    for fmt in ("e", "r", "d"):
        _, out, err = run("dissect", mixed, "-t", fmt)
        ours = [line.split()[1] for line in out.splitlines()]
        theirs = subprocess.run([tshark, "-r", str(mixed), "-t", fmt, "-T", "fields", "-e", "_ws.col.Time"],
                                capture_output=True, text=True, check=True).stdout.split()
        assert ours == theirs, (fmt, err)
        assert np.array([len(t.partition(".")[2]) for t in ours]).tolist() == [6, 9, 3, 3, 0] * 2
