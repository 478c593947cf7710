"""The -w file's cutter (roceview.live.save.WholeRecords): fed a capture in pieces of any size,
what it hands over always ends at a record (pcap: the file header, each record; pcapng: each
block), all of it once the capture is whole; with a limit it ends after that many packets; a
stream that is no capture gives nothing, and one with an impossible record length stops
before that record, where the readers stop. Seeded random splits."""
from __future__ import annotations

import random
import struct

import pytest
from live_feed import REPO, record_ends

from roceview.capture.writer import pcapng_bytes
from roceview.live.save import WholeRecords

PCAP = (REPO / "captures" / "clean.pcap").read_bytes()
SPLITS = 40


def frames_of(pcap: bytes, n: int) -> tuple[list[bytes], list[int]]:
    frames, ts, pos = [], [], 24
    while pos < len(pcap) and len(frames) < n:
        sec, frac, cap = struct.unpack("<III", pcap[pos:pos + 12])
        frames.append(pcap[pos + 16:pos + 16 + cap])
        ts.append(sec * 10**9 + frac)
        pos += 16 + cap
    return frames, ts


def pcapng(big_endian: bool) -> bytes:
    frames, ts = frames_of(PCAP, 60)
    return pcapng_bytes(frames, ts, big_endian=big_endian)


def packet_ends(data: bytes) -> list[int]:
    """record_ends without the file header / section and interface blocks."""
    ends = record_ends(data)
    return ends[1:] if data[:4] != b"\x0a\x0d\x0d\x0a" else ends[2:]


def fed_in_pieces(data: bytes, rng: random.Random, limit=None):
    cutter, out, seen = WholeRecords(limit), bytearray(), []
    pos = 0
    while pos < len(data):
        step = rng.choice((1, 3, 17, 100, 1500, 70000))
        out += cutter.feed(memoryview(data)[pos:pos + step])
        seen.append(len(out))
        pos += step
    return bytes(out), seen


@pytest.mark.parametrize("name", ["pcap", "pcapng", "pcapng big-endian"])
def test_what_it_hands_over_always_ends_at_a_record(name):
    data = PCAP if name == "pcap" else pcapng(name.endswith("big-endian"))
    ends = {0, *record_ends(data)}
    rng = random.Random(7)
    for _ in range(SPLITS):
        out, seen = fed_in_pieces(data, rng)
        assert out == data
        assert set(seen) <= ends


@pytest.mark.parametrize("name", ["pcap", "pcapng"])
def test_a_limit_ends_after_that_many_packets(name):
    data = PCAP if name == "pcap" else pcapng(False)
    rng = random.Random(8)
    for _ in range(SPLITS):
        limit = rng.randrange(1, 50)
        out, _ = fed_in_pieces(data, rng, limit)
        assert out == data[:packet_ends(data)[limit - 1]]


def test_no_capture_gives_nothing_and_an_impossible_length_stops_there():
    rng = random.Random(9)
    assert fed_in_pieces(b"not a capture at all" * 50, rng)[0] == b""
    ends = record_ends(PCAP)
    bad = bytearray(PCAP)
    bad[ends[5] + 8:ends[5] + 12] = struct.pack("<I", 1 << 30)      # the 6th record claims 1 GiB
    assert fed_in_pieces(bytes(bad), rng)[0] == PCAP[:ends[5]]
