"""Building blocks: 24-bit serial arithmetic, segmented scans, interval sets, endpoints."""
import ast
from pathlib import Path

import numpy as np

from roceview.analysis.flows import FlowRegistry, format_address
from roceview.analysis.segments import (group_bounds, merge_intervals, psn_delta, seg_cumsum,
                                        seg_running_max, subtract_intervals)
from roceview.analysis.tables import format_qp, format_ts


def test_psn_delta_is_24_bit_serial_arithmetic():
    psn = np.array([0, 5, 0xFFFFFF, 0x800000])
    prev = np.array([0xFFFFFF, 3, 0, 0])
    assert psn_delta(psn, prev).tolist() == [1, 2, -1, -0x800000]


def test_segmented_scans_restart_at_each_group_with_carried_initial_max():
    keys = np.array([0, 0, 0, 1, 1, 2])
    vals = np.array([5, 3, 9, 1, 2, 7])
    starts, lengths, gid = group_bounds(keys)
    assert seg_cumsum(vals, starts, lengths).tolist() == [5, 8, 17, 1, 3, 7]
    excl, last = seg_running_max(vals, starts, lengths, gid, np.array([4, 10, -1]))
    assert excl.tolist() == [4, 5, 5, 10, 10, -1]
    assert last.tolist() == [9, 10, 7]


def test_interval_subtraction_keeps_uncovered_parts():
    lo, hi = subtract_intervals(np.array([0, 10, 20]), np.array([5, 15, 25]),
                                np.array([2, 12, 11]), np.array([3, 20, 13]))
    assert list(zip(lo.tolist(), hi.tolist())) == [(0, 2), (3, 5), (10, 11), (20, 25)]
    lo, hi = merge_intervals(np.array([5, 1, 2]), np.array([6, 3, 4]))
    assert list(zip(lo.tolist(), hi.tolist())) == [(1, 4), (5, 6)]


def _words(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<u8").reshape(1, 2)


def test_ipv4_mapped_gid_is_the_same_endpoint_as_ipv4():
    mapped = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 1])
    assert format_address(_words(mapped)[0]) == "10.0.0.1"
    lid = bytes(10) + b"\xfe\xfe" + b"\x00\x00\x00\x2a"
    assert format_address(_words(lid)[0]) == "lid:0x002a"
    gid = bytes.fromhex("fe800000000000000202c9fffe000001")
    assert format_address(_words(gid)[0]) == "fe80::202:c9ff:fe00:1"


def test_flow_ids_follow_first_appearance_and_are_stable_across_lookups():
    reg = FlowRegistry()
    src = np.array([[1, 2], [3, 4], [1, 2]], dtype=np.uint64)
    dst = np.array([[5, 6], [7, 8], [5, 6]], dtype=np.uint64)
    ids, before = reg.lookup(src, dst, np.array([9, 9, 9], dtype=np.uint32))
    assert (ids.tolist(), before) == ([0, 1, 0], 0)
    ids, before = reg.lookup(src[::-1].copy(), dst[::-1].copy(), np.array([9, 9, 8], dtype=np.uint32))
    assert (ids.tolist(), before, reg.n) == ([0, 1, 2], 2, 3)


def test_timestamps_have_exactly_nine_decimals_from_integer_ns_and_qps_six_hex_digits():
    assert format_ts(1_700_000_000_123_456_789) == "1700000000.123456789"
    assert format_ts(5) == "0.000000005"
    assert format_qp(0xD2) == "0x0000d2"
    assert format_qp(-1) == ""


def test_analysis_package_imports_neither_rich_nor_textual():
    root = Path(__file__).resolve().parents[2] / "roceview" / "analysis"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in ("rich", "textual"), f"{path.name} imports {name}"
