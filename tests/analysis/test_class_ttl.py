"""Each packet class (diagnose.facts.Klass) carries the highest IPv4 TTL / IPv6 or GRH hop limit of
its frames (ttl_max, -1 without one): what tells a switch port forwarding a host's frames on a
routed link (one TTL less) from that host's NIC. It is read as `roceview analyze` decodes (the
analysis projection), kept across chunks as the highest, and the same whatever the chunking,
the key path (IPv6 addresses too wide for the exact key: rows hashed) and the engine."""
from __future__ import annotations

import struct
from functools import lru_cache

import pytest

from helpers import transforms as tf
from helpers.zoo import _bth, _csum, roce_v1_frame, roce_v2_frame
from roceview.diagnose import FactCollector
from roceview.generate import generate, write_capture
from roceview.packets.read import iter_batches

NIC, PORT = 0x0EC0DE000010, 0x0E5C0000FF10       # hol-victim: 10.0.0.1's NIC, its switch port


@lru_cache(maxsize=None)
def _routed() -> str:
    """hol-victim: a routed ToR mirrored on 10.0.0.1's link."""
    import tempfile

    path = f"{tempfile.mkdtemp(prefix='class-ttl-')}/hol-victim.pcap"
    write_capture(generate("hol-victim", seed=0), path)
    return path


def _classes(path, chunk: int = 1 << 16) -> list[tuple]:
    facts = FactCollector()
    for batch in iter_batches([str(path)], chunk_packets=chunk, warn=lambda m: None, prefetch=False,
                              projection="analysis"):
        facts.feed(batch)
    return [_row(c) for c in facts.finish().classes]


def _row(c) -> tuple:
    return (c.src, c.dst, c.qp, c.proto, c.opclass, c.src_mac, c.dst_mac, c.packets, c.ttl_max)


def test_a_routed_links_classes_carry_the_nics_ttl_and_the_switch_ports_one_less():
    by_mac: dict[int, set] = {}
    for row in _classes(_routed()):
        by_mac.setdefault(row[5], set()).add(row[-1])
    assert by_mac == {NIC: {64}, PORT: {63}}


@pytest.mark.parametrize("chunk", [97, 1000])
def test_the_highest_ttl_is_the_same_in_any_chunking(chunk):
    """(Classes are numbered by the chunk they were first seen in: compared in any order.)"""
    assert sorted(_classes(_routed(), chunk)) == sorted(_classes(_routed()))


def _ttl4(frame: bytes, ttl: int) -> bytes:
    """An untagged IPv4 frame with its TTL set and the header checksum made again (the ICRC
    does not cover the TTL)."""
    hdr = bytearray(frame[14:34])
    hdr[8], hdr[10:12] = ttl, b"\0\0"
    hdr[10:12] = struct.pack(">H", _csum(bytes(hdr)))
    return frame[:14] + bytes(hdr) + frame[34:]


def _hlim6(frame: bytes, hlim: int) -> bytes:
    return frame[:21] + bytes([hlim]) + frame[22:]


def _mixed(tmp_path) -> str:
    """IPv6 addresses far apart (no exact key: every row hashed), IPv4 and RoCEv1, each class
    with TTLs that differ from frame to frame."""
    a, b = "2001:db8::1", "fd00::2"
    frames = []
    for k, hlim in enumerate([62, 61, 63, 60, 62, 63, 61]):
        frames.append(_hlim6(roce_v2_frame(6, _bth(0x04, 0x11, k), b"", src=a, dst=b), hlim))
        frames.append(_hlim6(roce_v2_frame(6, _bth(0x04, 0x22, k), b"", src=b, dst=a), 255 - k))
    for k, ttl in enumerate([60, 64, 59, 61, 64, 58]):
        frames.append(_ttl4(roce_v2_frame(4, _bth(0x04, 0x33, k), b""), ttl))
    frames += [roce_v1_frame(_bth(0x04, 0x44, k), b"", hoplmt=1) for k in range(3)]
    path = tmp_path / "mixed.pcap"
    tf.write_pcap(path, 1, [tf.Record(1_000_000_000 + 1000 * i, f) for i, f in enumerate(frames)])
    return str(path)


@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 16])
def test_the_highest_ttl_of_ipv6_ipv4_and_grh_classes_in_any_chunking(tmp_path, chunk):
    ttl = {row[2]: row[-1] for row in _classes(_mixed(tmp_path), chunk)}
    assert ttl == {0x11: 63, 0x22: 255, 0x33: 64, 0x44: 1}


def test_the_dask_engine_gives_the_same_classes(tmp_path):
    """Partitions of the routed capture on a LocalCluster: the same classes, ttl_max included."""
    pytest.importorskip("dask.distributed")
    import roceview
    from dask.distributed import LocalCluster

    local = roceview.analyze(_routed())
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        dask = roceview.analyze(_routed(), engine="dask", scheduler=cluster.scheduler_address)
    assert sorted(map(_row, dask.facts.classes)) == sorted(map(_row, local.facts.classes))
    assert {row[-1] for row in map(_row, local.facts.classes)} == {63, 64}
