"""The operations' shortcuts give the general path's tables: whole chunks of one-way small
messages (ops_fast.whole_chunk), spaces nothing completes (ops_fast.operations), paired spaces
of small messages without loss (ops_direct.py) and operations parked while their flow has no
peer (ops_park.py), on the benchmark's captures (one-way WRITE ONLYs; QP pairs with coalesced
ACKs: every shortcut), UC and one-way real captures, the samples, and random packet sequences."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.analysis import make_batch
from test_ops_fuzzed import random_rows

import roceview
from roceview.analysis import Analyzer, ops_direct, ops_fast
from roceview.analysis.ops_park import Parked
from roceview.capture.writer import pcap_header, pcap_records

REPO = Path(__file__).resolve().parents[2]
REAL = REPO.parent / "shared" / "captures" / "real"


def tables(result):
    return (result.ops_table.text_rows(), result.op_stats_table.text_rows(), result.read_depth_table.text_rows(),
            result.summary["operations"])


@pytest.fixture
def general(monkeypatch):
    """Every shortcut off: the general path alone."""
    def off(monkeypatch_):
        monkeypatch_.setattr(ops_fast, "whole_chunk", lambda *a, **k: False)
        monkeypatch_.setattr(ops_fast, "eligible", lambda tr, an, rows, held: np.zeros(len(rows), dtype=bool))
        monkeypatch_.setattr(Parked, "park", lambda self, state, peer: state)
        monkeypatch_.setattr(ops_direct, "eligible", lambda tr, an, rows, state: np.zeros(len(rows), dtype=bool))
    return lambda: off(monkeypatch)


def bench_capture(path: Path, packets: int = 12_000, flows: int = 128) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from make_capture import build_block

    frames, lens = build_block(0, packets, flows, 256, np.random.default_rng(1))
    ts = 1_700_000_000_000_000_000 + np.arange(packets) * 250
    with open(path, "wb") as fh:
        fh.write(pcap_header(snaplen=65535))
        fh.write(pcap_records(frames, lens, ts).tobytes())
    return path


def check(path, general, **options) -> None:
    fast = tables(roceview.analyze(path, diagnose=False, warn=lambda m: None, **options))
    general()
    assert tables(roceview.analyze(path, diagnose=False, warn=lambda m: None, **options)) == fast


@pytest.mark.parametrize("chunk", [1000, 4096, 1 << 16])
def test_the_benchmarks_one_way_writes(tmp_path, general, chunk, monkeypatch):
    """With the pairing horizon at 2,000 rows the flows are young (parked) for the first chunks,
    never to be paired (whole chunks at once) for the others."""
    from roceview.analysis import chunk_psn

    monkeypatch.setattr(chunk_psn, "PAIRING_HORIZON", 2000)
    path = bench_capture(tmp_path / "bench.pcap")
    result = roceview.analyze(path, diagnose=False, chunk_packets=chunk)
    assert result.summary["operations"]["count"] == 9000           # every 4th packet an ACK
    assert result.ops_table.text_column("completion_frame") == [""] * 9000
    check(path, general, chunk_packets=chunk)


def paired_capture(path: Path, packets: int, flows: int) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_ops import paired_block

    frames, lens = paired_block(0, packets, flows)
    ts = 1_700_000_000_000_000_000 + np.arange(packets) * 250
    with open(path, "wb") as fh:
        fh.write(pcap_header(snaplen=65535))
        fh.write(pcap_records(frames, lens, ts).tobytes())
    return path


@pytest.mark.parametrize("chunk", [997, 1 << 16])
def test_qp_pairs_with_coalesced_acks(tmp_path, general, chunk, monkeypatch):
    """Completions in the chunk, lingering across its end (250 ns a packet: 1 ms is 4,000), and
    given up (the pending bound lowered to 1: the ACK of three WRITEs comes after the third,
    too late for the first)."""
    from roceview.analysis import ops

    path = paired_capture(tmp_path / "paired.pcap", 12_000, 4)
    result = roceview.analyze(path, diagnose=False, chunk_packets=chunk)
    assert int(np.sum(result.op_stats_table.data["completed"])) == 9000
    check(path, general, chunk_packets=chunk)
    monkeypatch.setattr(ops, "PENDING_PER_SPACE", 1)
    result = roceview.analyze(path, diagnose=False, chunk_packets=chunk)
    assert int(np.sum(result.op_stats_table.data["completed"])) == 6000
    check(path, general, chunk_packets=chunk)


@pytest.mark.parametrize("name", ["magnate3_rocev2_uc-send_bad-icrc.pcap", "magnate3_rocev2_uc-write-imm_cut-243B.pcap",
                                  "magnate3_rocev2_rc-write-only_bad-icrc.pcap", "magnate3_rocev2_dc-transport_b.pcap"])
def test_uc_and_one_way_real_captures(name, general):
    if not (REAL / name).exists():
        pytest.skip(f"{name} is not in {REAL}")
    check(REAL / name, general, chunk_packets=7)


def test_samples(sample_capture, general):
    check(sample_capture, general)


def test_random_packet_sequences(general):
    rng = random.Random(7)
    runs = [random_rows(rng) for _ in range(40)]

    def analyze(rows):
        an = Analyzer()
        for lo in range(0, len(rows), 9):
            an.feed(make_batch(rows[lo:lo + 9]))
        return tables(an.finish())
    fast = [analyze(rows) for rows in runs]
    general()
    assert [analyze(rows) for rows in runs] == fast
