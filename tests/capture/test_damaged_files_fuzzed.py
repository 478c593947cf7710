"""Property tests: random truncations, byte flips, overwritten length words, deleted and
duplicated ranges of real captures (../shared, when present) and of generated ones (pcap
both byte orders and resolutions, pcapng both byte orders with Ethernet/ERF/SLL/SLL2
interfaces, gzip) are fed to the readers.

Properties
  * `read_packets` either returns the packets table or raises a `RoceviewError` subclass:
    no other exception, whatever the bytes.
  * Warnings are one line each.
  * The table is well formed: every documented column, frames numbered 1..n, no captured
    length above the 256 KiB limit.
  * Memory is bounded: tracemalloc peak below 64 MiB for these small inputs.
  * Reading in small chunks gives the same table as reading at once.
"""
from __future__ import annotations

import gzip
import struct
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import roceview
from conftest import REAL, capture_files
from roceview.capture.writer import pcapng_bytes, write_pcap
from roceview.errors import RoceviewError
from roceview.packets.table import COLUMNS
from helpers.zoo import build_zoo, zoo_ts

MAX_REAL_SEED = 32 * 1024
MEMORY_LIMIT = 64 << 20
INTERESTING = (0, 1, 4, 12, 16, 0xFF, 0xFFFF, 0x10000, 256 * 1024, 256 * 1024 + 1, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, 0x0A0D0D0A, 0x1A2B3C4D, 0xA1B2C3D4, 6, 3, 1)


# --------------------------------------------------------------------------- seeds

def _pcap_classic(frames: list[bytes], ts: list[int], big: bool, nanosecond: bool, linktype: int = 1) -> bytes:
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 262144, linktype)]
    for frame, t in zip(frames, ts):
        sec, frac = divmod(t, 1_000_000_000)
        out.append(struct.pack(e + "IIII", sec, frac if nanosecond else frac // 1000, len(frame), len(frame)) + frame)
    return b"".join(out)


def _seeds() -> dict[str, bytes]:
    frames, ifaces, _ = build_zoo()
    ts = [zoo_ts(i) for i in range(len(frames))]
    eth = [f for f, i in zip(frames, ifaces) if i == 0]
    eth_ts = [t for t, i in zip(ts, ifaces) if i == 0]
    erf = [f for f, i in zip(frames, ifaces) if i == 1]
    interfaces = [(1, 9), (197, 6), (113, 6), (276, 3)]
    seeds = {
        "pcap-le-ns": _pcap_classic(eth, eth_ts, big=False, nanosecond=True),
        "pcap-be-us": _pcap_classic(eth, eth_ts, big=True, nanosecond=False),
        "pcap-erf": _pcap_classic(erf, ts[:len(erf)], big=False, nanosecond=False, linktype=197),
        "pcapng-le": pcapng_bytes(frames, ts, interfaces=interfaces, if_ids=ifaces),
        "pcapng-be": pcapng_bytes(frames, ts, interfaces=interfaces, if_ids=ifaces, big_endian=True),
    }
    seeds["pcap.gz"] = gzip.compress(seeds["pcap-le-ns"], compresslevel=1)
    seeds["pcapng.gz"] = gzip.compress(seeds["pcapng-be"], compresslevel=1)
    for path in capture_files(REAL):
        data = path.read_bytes()
        seeds[f"real:{path.name}"] = data[:MAX_REAL_SEED]
    return seeds


SEEDS = _seeds()


def test_seeds_are_valid_captures(tmp_path):
    """Unmutated, every generated seed reads without warning (so mutations start from valid input)."""
    for name, data in SEEDS.items():
        if name.startswith("real:") and len(data) == MAX_REAL_SEED:
            continue                                    # a prefix of a larger capture
        path = tmp_path / name.replace(":", "_")
        path.write_bytes(data)
        warnings: list[str] = []
        df = roceview.read_packets(path, warn=warnings.append)
        assert len(df) > 0 and warnings == [], (name, warnings)


# --------------------------------------------------------------------------- mutations

mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
    # the file and section headers, interface descriptions and options live in the first bytes
    st.tuples(st.just("flip_head"), st.integers(0, 127), st.integers(1, 255)),
    st.tuples(st.just("word"), st.floats(0, 1, exclude_max=True), st.sampled_from(INTERESTING),
              st.booleans()),
    st.tuples(st.just("delete"), st.floats(0, 1, exclude_max=True), st.integers(1, 64)),
    st.tuples(st.just("dup"), st.floats(0, 1, exclude_max=True), st.integers(1, 64)),
    st.tuples(st.just("cut"), st.floats(0, 1)),
)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op in ops:
        if not buf and op[0] != "cut":
            continue
        kind, where = op[0], op[1]
        pos = min(int(where * len(buf)), max(len(buf) - 1, 0))
        if kind == "flip":
            buf[pos] ^= op[2]
        elif kind == "flip_head":
            buf[op[1] % len(buf)] ^= op[2]
        elif kind == "word":
            word = struct.pack(">I" if op[3] else "<I", op[2])
            buf[pos:pos + 4] = word[:max(0, min(4, len(buf) - pos))]
        elif kind == "delete":
            del buf[pos:pos + op[2]]
        elif kind == "dup":
            buf[pos:pos] = buf[pos:pos + op[2]]
        elif kind == "cut":
            del buf[int(where * len(buf)):]
    return bytes(buf)


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="roceview-fuzz-") as d:
        yield Path(d)


@pytest.fixture(scope="module", autouse=True)
def warm_up(scratch):
    """Load the numba kernels once, outside any memory measurement."""
    path = scratch / "warm.pcapng"
    path.write_bytes(SEEDS["pcapng-le"])
    roceview.read_packets(path)
    roceview.read_packets(scratch / "warm.pcapng", columns=["frame"])


def _read(path: Path, **kw):
    warnings: list[str] = []
    try:
        df = roceview.read_packets(path, warn=warnings.append, **kw)
    except RoceviewError as exc:
        message = str(exc)
        assert message and "\n" not in message, repr(message)
        return None, warnings
    return df, warnings


def _check_table(df, warnings) -> None:
    for w in warnings:
        assert isinstance(w, str) and w and "\n" not in w, repr(w)
    assert list(df.columns) == list(COLUMNS)
    if len(df):
        assert df["frame"].tolist() == list(range(1, len(df) + 1))
        assert int(df["cap_len"].max()) <= 256 * 1024
        assert set(df["proto"].astype(str)) <= {"other", "roce_v1", "roce_v2", "ib", "pfc", "pause", "lldp"}


def _records(df) -> list[tuple]:
    """Rows as plain tuples (None for nulls): categoricals compare by value, not by categories."""
    cols = [[None if pd.isna(v) else v for v in df[c].astype(object).tolist()] for c in df.columns]
    return list(zip(*cols))


FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(seed=st.sampled_from(sorted(SEEDS)), ops=st.lists(mutation, min_size=1, max_size=8))
def test_mutated_captures_raise_only_roceview_errors(scratch, seed, ops):
    path = scratch / "fuzz.bin"
    path.write_bytes(mutate(SEEDS[seed], ops))
    df, warnings = _read(path)
    if df is not None:
        _check_table(df, warnings)


@FUZZ
@given(seed=st.sampled_from(sorted(SEEDS)), cut=st.floats(0, 1))
def test_truncated_captures_keep_a_prefix(scratch, seed, cut):
    """Cutting a file never adds packets, and the packets kept are those of the whole file."""
    whole_path = scratch / "whole.bin"
    whole_path.write_bytes(SEEDS[seed])
    whole, _ = _read(whole_path)
    data = SEEDS[seed]
    path = scratch / "cut.bin"
    path.write_bytes(data[:int(cut * len(data))])
    df, warnings = _read(path)
    if df is None or whole is None:
        return
    _check_table(df, warnings)
    assert len(df) <= len(whole)
    if seed.endswith(".gz"):
        return
    # a record cut short is not decoded from garbage: kept rows equal the whole file's rows
    keep = ["frame", "ts_ns", "interface", "proto", "opcode", "psn", "dest_qp", "src_mac", "dst_mac"]
    assert _records(df[keep]) == _records(whole.iloc[:len(df)][keep])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(sorted(SEEDS)), ops=st.lists(mutation, min_size=1, max_size=6))
def test_memory_is_bounded(scratch, seed, ops):
    path = scratch / "mem.bin"
    path.write_bytes(mutate(SEEDS[seed], ops))
    tracemalloc.start()
    try:
        _read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT, f"peak {peak / 2**20:.1f} MiB for a {path.stat().st_size}-byte input"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(sorted(SEEDS)), ops=st.lists(mutation, max_size=4), chunk=st.integers(1, 7))
def test_chunked_reading_matches_whole_reading(scratch, seed, ops, chunk):
    path = scratch / "chunks.bin"
    path.write_bytes(mutate(SEEDS[seed], ops))
    whole, _ = _read(path)
    try:
        parts = list(roceview.iter_packets(path, chunk_packets=chunk, warn=lambda m: None))
    except RoceviewError:
        parts = None
    if whole is None or parts is None:
        assert whole is None and parts is None, "one way of reading failed, the other did not"
        return
    keep = ["frame", "ts_ns", "wire_len", "cap_len", "interface", "proto", "opcode", "psn", "icrc_ok",
            "truncated", "src_ip", "dst_ip", "payload_len"]
    joined = [row for p in parts for row in _records(p[keep])]
    assert joined == _records(whole[keep])


def test_large_capture_memory_does_not_grow_with_length(tmp_path):
    """Chunked reading: the peak for 4x the packets is not 4x the peak (bounded buffers)."""
    frame = SEEDS["pcap-le-ns"][24 + 16:24 + 16 + 80]
    peaks = []
    for n in (50_000, 200_000):
        frames = np.frombuffer(frame * n, np.uint8)
        path = tmp_path / f"big{n}.pcap"
        write_pcap(path, frames, np.full(n, len(frame)), np.arange(n, dtype=np.int64) * 1000)
        tracemalloc.start()
        try:
            count = sum(len(b["frame"]) for b in (batch.cols for batch in roceview.packets.read.iter_batches(
                str(path), chunk_packets=16384)))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert count == n
        peaks.append(peak)
    assert peaks[1] < 1.5 * peaks[0] + (4 << 20), [p / 2**20 for p in peaks]


# --------------------------------------------------------------------------- hand-made pcapng blocks

def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


_SHB = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def _frame_bytes() -> list[bytes]:
    frames, ifaces, _ = build_zoo()
    return [f for f, i in zip(frames, ifaces) if i == 0][:3]


def _with_idb_option(code: int, value: bytes) -> bytes:
    option = struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4) + b"\0\0\0\0"
    idb = _block(1, struct.pack("<HHI", 1, 0, 262144) + option)
    epbs = b"".join(_block(6, struct.pack("<IIIII", 0, 0x00001234, 0x56789ABC, len(f), len(f)) + f)
                    for f in _frame_bytes())
    return _SHB + idb + epbs


HAND_MADE = {
    "tsresol-10^-41": _with_idb_option(9, bytes([41])),
    "tsresol-10^-127": _with_idb_option(9, bytes([127])),
    "tsresol-2^-64": _with_idb_option(9, bytes([0x80 | 64])),
    "tsresol-2^-127": _with_idb_option(9, bytes([0xFF])),
    "tsoffset-2^62": _with_idb_option(14, struct.pack("<q", 2 ** 62)),
    "tsoffset--2^62": _with_idb_option(14, struct.pack("<q", -2 ** 62)),
    "tsresol-empty-option": _with_idb_option(9, b""),
    "tsoffset-4-byte-option": _with_idb_option(14, b"\1\2\3\4"),
    "idb-without-body": _SHB + struct.pack("<III", 1, 12, 12),
    "idb-without-options": _SHB + struct.pack("<IIHHI", 1, 16, 1, 0, 16),
    "tsresol-10^-19": _with_idb_option(9, bytes([19])),
    "shb-only-12-bytes": struct.pack("<III", 0x0A0D0D0A, 12, 12),
    "epb-before-any-idb": _SHB + _block(6, struct.pack("<IIIII", 0, 0, 0, 60, 60) + bytes(60)),
    "epb-of-undescribed-interface": _with_idb_option(9, bytes([6])) + _block(
        6, struct.pack("<IIIII", 3, 0, 0, 60, 60) + bytes(60)),
}


@pytest.mark.parametrize("data", list(HAND_MADE.values()), ids=list(HAND_MADE))
def test_hand_made_pcapng_blocks_raise_only_roceview_errors(tmp_path, data):
    path = tmp_path / "hand.pcapng"
    path.write_bytes(data)
    df, warnings = _read(path)
    if df is not None:
        _check_table(df, warnings)
