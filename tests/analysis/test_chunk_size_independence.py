"""Every table of `analyze` is the same whether the capture is fed whole or in chunks of a few
packets (as `live` and the TUI feed small batches): on every bundled sample and every real
capture, at chunk sizes 1, 7, 10 and 97. QP pairing from PSN evidence crosses chunk boundaries
(a response is evidence against the requests sent before it, in any chunk), and a pairing holds
from the row that made it, so nothing read through a pairing depends on where a chunk ends."""
from __future__ import annotations

import os

import pytest

import roceview

TABLES = ("flows", "pfc", "events", "timeline", "ops", "op_stats", "read_depth", "connections", "priorities",
          "cc", "paused_flows")
SIZES = (1, 7, 10, 97)
# CI time: a chunk costs ~10 ms, so a size runs on captures of at most this many packets
# (ROCEVIEW_ALL_CHUNK_SIZES=1 runs every size on every capture)
MAX_PACKETS = {1: 250, 10: 700, 7: 1 << 30, 97: 1 << 30}


def tables(path, chunk=None) -> dict:
    kw = {} if chunk is None else {"chunk_packets": chunk}
    result = roceview.analyze(path, diagnose=False, warn=lambda message: None, **kw)
    out = {name: getattr(result, f"{name}_table").text_rows() for name in TABLES}
    out["summary"] = result.summary
    return out


def differences(whole: dict, cut: dict) -> list[str]:
    """The tables that differ, each with its first differing row (pytest shows the list)."""
    out = []
    for name, rows in whole.items():
        if cut[name] != rows:
            first = next((i for i, (a, b) in enumerate(zip(rows, cut[name])) if a != b), min(len(rows), len(cut[name])))
            out.append(f"{name}: row {first} of {len(rows)} (cut: {len(cut[name])})")
    return out


def same_at_every_size(path) -> None:
    whole = tables(path)
    every = os.environ.get("ROCEVIEW_ALL_CHUNK_SIZES") == "1"
    for size in SIZES:
        if every or whole["summary"]["packets"] <= MAX_PACKETS[size]:
            assert not differences(whole, tables(path, size)), size


def test_every_table_of_a_sample_is_the_same_in_small_chunks(sample_capture):
    """incast.pcap included: related.py names a CNP's marked packet (and a NAK's gap) through the
    pairing as of the CNP's row (pairing.peer_at), not as it stands at the chunk's end."""
    same_at_every_size(sample_capture)


def test_every_table_of_a_real_capture_is_the_same_in_small_chunks(real_capture):
    same_at_every_size(real_capture)


def test_operations_keep_their_completions_at_seven_packets_a_chunk():
    """ops-mixed has two QP pairs between the same two hosts; the first chunks show one flow each
    way that are not one QP (0x01e00d's requests and the other QP's SENDs). Paired as lone
    partners on that chunk boundary, 62 of the 76 operations lost their completion."""
    from conftest import SAMPLES

    path = SAMPLES / "ops-mixed.pcap"
    whole, cut = (roceview.analyze(path, diagnose=False, **kw) for kw in ({}, {"chunk_packets": 7}))
    assert cut.ops_table.text_rows() == whole.ops_table.text_rows()
    assert cut.summary["operations"] == whole.summary["operations"]


def test_rtt_and_peer_qp_of_the_mixed_v1_v2_capture_in_chunks_of_ten_or_fewer():
    from conftest import REAL

    path = REAL / "magnate3_rocev1-rocev2-mixed_mlx5_rc-send.pcap"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    cols = ("flow", "peer_qp", "rtt_p50_us", "rtt_p99_us")

    def peers(**kw):
        t = roceview.analyze(path, diagnose=False, **kw).flows_table
        return [tuple(dict(zip(t.columns, r))[c] for c in cols) for r in t.text_rows()]

    whole = peers()
    assert all(p for _, p, _, _ in whole)                   # 16 QP pairs, every flow paired
    for size in (3, 10):
        assert peers(chunk_packets=size) == whole, size
