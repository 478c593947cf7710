"""The ICRC check gives the same verdict whichever CRC-32 the kernels call: zlib-ng's
`zng_crc32` or the slice-by-8 table loop (when zlib-ng is missing). The C kernel calls a native CRC only for bodies of 256 bytes or more
(NATIVE_CRC_MIN), so the frames here span that boundary, in every encapsulation, with a good
ICRC and with one flipped byte. ROCEVIEW_REQUIRE_CKERNEL=1 (as .ci/run sets) also requires
zlib-ng: without it full 1 KB frames decode about a third slower (benchmarks/)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

import roceview
import roceview.packets.decode as decode
from dissectors.scapy_layers import BTH, GRH, preferred, with_icrc
from roceview.kernels import crc
from roceview.capture.writer import write_pcap

from conftest import REAL, capture_files

MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
SIZES = (0, 33, 243, 244, 245, 252, 253, 256, 1024, 4096)   # body = payload + pad around NATIVE_CRC_MIN
SOURCES = ("zlib-ng", "table")


def _address(source: str) -> int:
    if source == "table":
        return 0
    address = crc.native_crc32()
    if not address:
        if os.environ.get("ROCEVIEW_REQUIRE_CKERNEL") == "1":
            pytest.fail("zlib-ng does not load but ROCEVIEW_REQUIRE_CKERNEL=1", pytrace=False)
        pytest.skip("zlib-ng does not load here")
    return address


def _frames() -> list[bytes]:
    out = []
    with preferred():
        for size in SIZES:
            data, pad = bytes((7 * k + size) & 0xFF for k in range(size)), -size % 4
            bth = BTH(opcode=0x04, pad=pad, psn=size) / Raw(data + b"\0" * pad)
            for outer in (Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=49152),
                          Ether(**MACS) / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=1),
                          Ether(**MACS) / GRH(sgid="fe80::1", dgid="fe80::2"),
                          Ether(**MACS) / Dot1Q(vlan=5, prio=3) / IP(src="1.1.1.1", dst="2.2.2.2") / UDP()):
                out.append(bytes(with_icrc(outer / bth.copy())))
    return out


def _damaged(frames: list[bytes]) -> list[bytes]:
    """Each frame with one covered byte flipped: the first, a middle or the last before the ICRC."""
    out = []
    for k, frame in enumerate(frames):
        f = bytearray(frame)
        f[(-5, len(f) // 2, -5 - (len(f) // 3))[k % 3]] ^= 1 << (k % 8)
        out.append(bytes(f))
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    good = _frames()
    frames = good + _damaged(good)
    path = tmp_path_factory.mktemp("icrc") / "icrc.pcap"
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames],
               [1_700_000_000_000_000_000 + 1000 * i for i in range(len(frames))])
    return path, len(good)


@pytest.mark.parametrize("source", SOURCES)
def test_the_icrc_verdict_is_right_with_every_crc_source(capture, source, monkeypatch):
    monkeypatch.setattr(decode, "NATIVE_CRC32", _address(source))
    path, n_good = capture
    df = roceview.read_packets(path)
    assert df["icrc_ok"].notna().all()
    assert list(df["icrc_ok"]) == [True] * n_good + [False] * n_good
    assert int(df["payload_len"].max()) == max(SIZES)


def test_real_captures_get_the_table_loops_verdicts(monkeypatch):
    paths = capture_files(REAL)
    if not paths:
        pytest.skip("../shared/captures/real is absent")
    native = _address("zlib-ng")
    for path in paths:
        monkeypatch.setattr(decode, "NATIVE_CRC32", 0)
        table = roceview.read_packets(path, columns=["frame", "icrc_ok"])
        monkeypatch.setattr(decode, "NATIVE_CRC32", native)
        fast = roceview.read_packets(path, columns=["frame", "icrc_ok"])
        assert fast["icrc_ok"].equals(table["icrc_ok"]), path.name
