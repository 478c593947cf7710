"""The C CSV formatter (kernels/_celltext.c, used by export.table_csv_bytes when the kernels are
built) writes the bytes csv.writer writes over the per-cell text (`slow_text`, the definition),
as the numpy formatter (render/cells.py, the fallback) does; awkward values included."""
from __future__ import annotations

import os

import numpy as np
import pytest

from roceview.analysis import tables
from roceview.analysis.tables import Table
from roceview.kernels import backend as kernels
from roceview.render import export

from test_fast_output_path import INTS, _awkward_table, _timeline, reference_csv


@pytest.fixture(autouse=True)
def c_formatter():
    if kernels.format_rows is None:
        if os.environ.get("ROCEVIEW_REQUIRE_CKERNEL") == "1":
            pytest.fail("the C kernel is not built but ROCEVIEW_REQUIRE_CKERNEL=1", pytrace=False)
        pytest.skip("the C kernel is not built")


def _with_kind(column: str, values) -> Table:
    """A table of the column and a str one (csv.writer quotes an empty field alone on its row:
    the analysis tables have many columns, so the writers do not)."""
    return Table((column, "kind"), {column: values, "kind": ["x"] * len(values)})


def _both_paths(table, monkeypatch) -> bytes:
    """The CSV by the C path (checked to be taken) and by the numpy path: equal; returned."""
    assert export._c_rows(table) is not None or not len(table)
    c_text = export.table_csv_bytes(table)
    with monkeypatch.context() as m:
        m.setattr(kernels, "format_rows", None)
        assert export.table_csv_bytes(table) == c_text
    return c_text


@pytest.mark.parametrize("column", ["packets", "psn", "ts", "dest_qp"])      # int, nint, ts, qp
def test_integer_kinds(column, monkeypatch):
    rng = np.random.default_rng(1)
    values = np.concatenate([INTS, rng.integers(-10**12, 10**18, 3000), rng.integers(-3, 2**24 + 5, 3000),
                             [-1, 0, 0xFFFFFF, 0x1000000]])
    table = _with_kind(column, values)
    assert _both_paths(table, monkeypatch) == reference_csv(table)


def test_unsigned_and_small_integer_dtypes(monkeypatch):
    for dtype in (np.uint8, np.uint32, np.uint64, np.int8, np.int32):
        info = np.iinfo(dtype)
        values = np.array([info.min, 0, 1, info.max // 3] + ([info.max] if dtype != np.uint64 else []), dtype)
        for column in ("packets", "psn", "ts", "dest_qp"):
            table = _with_kind(column, values)
            assert _both_paths(table, monkeypatch) == reference_csv(table), (dtype, column)


def test_uint64_past_int64_falls_back_to_numpy():
    table = Table(("packets",), {"packets": np.array([1, 2**64 - 1], np.uint64)})
    assert export._c_rows(table) is None
    assert export.table_csv_bytes(table) == reference_csv(table)


@pytest.mark.parametrize("decimals", [0, 3, 6, 9])
def test_floats_including_halfway_and_odd_values(decimals, monkeypatch):
    monkeypatch.setitem(tables.DECIMALS, "gbps", decimals)
    rng = np.random.default_rng(2)
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, 0.0625, 0.0078125, 0.0005, 0.000_000_5,
               1e-320, 5e-324, 1e15, 4.5e15, 2.0**52, 1e300, -1e300, -1.0, -0.0078125, 0.1, 0.7, 1.005, 2.675]
    halves = [(k + 0.5) / 10**decimals for k in range(200)]
    values = np.concatenate([special, halves, np.nextafter(halves, 0), np.nextafter(halves, 1),
                             rng.random(3000) * 10.0 ** rng.integers(-9, 12, 3000),
                             np.round(rng.random(2000) * 1000, decimals)])
    table = _with_kind("gbps", values)
    assert _both_paths(table, monkeypatch) == reference_csv(table)


@pytest.mark.parametrize("n", [1, 7, 3000])
def test_awkward_strings_and_mixed_columns_in_small_blocks(n, monkeypatch):
    monkeypatch.setattr(export, "C_BLOCK_ROWS", 5)
    table = _awkward_table(n)
    assert _both_paths(table, monkeypatch) == reference_csv(table)


def test_a_timeline_table(monkeypatch):
    table = _timeline(20_000)
    assert _both_paths(table, monkeypatch) == reference_csv(table)


def test_the_kernel_refuses_str_codes_outside_their_table():
    codes, offsets, data = np.array([0, 2], np.int64), np.array([0, 1, 2], np.int64), np.frombuffer(b"ab", np.uint8)
    with pytest.raises(ValueError):
        kernels.format_rows([5], [0], [codes], [None], [offsets], [data], 1 << 12)
    with pytest.raises(ValueError):
        kernels.format_rows([5], [0], [codes[:1]], [None], [np.array([0, 5], np.int64)], [data], 1 << 12)
    assert kernels.format_rows([5], [0], [codes[:1]], [None], [offsets], [data], 1 << 12) == b"a\n"


def test_the_format_kernel_refuses_what_would_take_it_out_of_its_arrays():
    ints, floats = np.arange(4, dtype=np.int64), np.arange(4, dtype=np.float64)
    assert kernels.format_rows([0, 4], [0, 1], [ints, None], [None, floats], [None, None], [None, None],
                               1 << 12) == b"0,0.0\n1,1.0\n2,2.0\n3,3.0\n"
    for args in (([4], [0], [None], [None], [None], [None]),                          # a float column without floats
                 ([0, 4], [0, 1], [ints, None], [None], [None, None], [None, None]),   # lists of other lengths
                 ([0, 4], [0], [ints, None], [None, floats], [None, None], [None, None]),
                 ([4], [0], [ints], [floats[:2]], [None], [None]),                      # other lengths
                 ([9], [0], [ints], [None], [None], [None]),                            # no such kind
                 ([4], [2.7], [None], [floats], [None], [None]),                        # decimals not an int
                 ([4], [12], [None], [floats], [None], [None]),
                 ([], [], [], [], [], [])):
        with pytest.raises(ValueError):
            kernels.format_rows(*args, 1 << 12)


def test_too_small_a_buffer_gives_none_and_the_table_still_comes_out(monkeypatch):
    huge = np.full(50, 1e300)                      # 300-digit cells: the first block's guess is short
    assert kernels.format_rows([4], [6], [None], [huge], [None], [None], 2048) is None
    table = _with_kind("gbps", huge)
    rows = export._c_rows(table)                   # (lo, hi) -> rows, None where C gave up
    assert rows is None or rows(0, len(table)) in (None, reference_csv(table).split(b"\n", 1)[1])
    assert export.table_csv_bytes(table) == reference_csv(table)
