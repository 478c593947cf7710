"""Bucket sums drawn over a screen's width: each bucket's value spread over its part of the axis,
the columns taking what falls in them; marks in the column of their time."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from roceview.analysis.tables import Coded
from roceview.tui.timebars import axis, column_ns, count_bar, plot, rows_of, share_bar, spread, ticks

MS = 1_000_000


def test_buckets_longer_than_the_columns_fill_each_column_they_cover():
    # one bucket of 1 ms paused 0.5 ms over a 4 ms axis of 8 columns: its two columns half paused
    cols = spread([MS], [MS // 2], MS, 0, 4 * MS, 8)
    assert cols.tolist() == [0, 0, MS / 4, MS / 4, 0, 0, 0, 0]
    assert share_bar(cols / column_ns(0, 4 * MS, 8)) == "  ▄▄    "


def test_a_bucket_wider_than_the_axis_is_spread_over_the_axis_alone():
    # a 160 us capture inside one 1 ms bucket, paused 80 us of it: half of every column
    start = 7 * MS
    cols = spread([start], [80_000], MS, start + 100_000, start + 260_000, 4)
    assert cols.tolist() == pytest.approx([20_000] * 4)


def test_rows_of_one_bucket_add_and_buckets_outside_the_axis_are_left_out():
    cols = spread([0, 0, MS, 9 * MS], [1, 2, 4, 100], MS, 0, 2 * MS, 2)
    assert cols.tolist() == [3, 4]


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1000)), max_size=30), st.integers(1, 120),
       st.integers(1, 7))
def test_inside_the_axis_the_columns_hold_every_buckets_value(rows, width, bucket_ms):
    starts = [b * bucket_ms * MS for b, _ in rows]
    values = [v for _, v in rows]
    end = (51 * bucket_ms) * MS
    cols = spread(starts, values, bucket_ms * MS, 0, end, width)
    assert len(cols) == width and (cols >= -1e-6).all()
    assert cols.sum() == pytest.approx(sum(values), abs=1e-6)


def test_share_bar_shows_any_pause_and_a_full_block_for_all_of_the_time():
    assert share_bar([0, 0.001, 0.5, 1.0, 2.0]) == " ▁▄██"
    assert count_bar([0, 1, 8]) == " ▁█" and count_bar([0, 0]) == "  "


def test_ticks_mark_the_column_of_each_time():
    assert ticks([0, 10, 99, 100, 150], 0, 100, 10, "^") == "^^       ^"
    assert ticks([], 0, 100, 4, "^") == "    "


def test_plot_rows_top_first_in_eighths():
    assert plot([0, 1, 2, 4], 2) == ["   █", " ▄██"]        # 4 is two rows: 16 eighths, 1 is 4
    assert plot([0, 1, 2, 4], 2, top=8) == ["    ", " ▂▄█"]
    assert plot([0, 0], 3) == ["  "] * 3


def test_axis_labels_the_ends_in_seconds_since_the_first_packet():
    text = axis(1_000 + 10_592, 1_000 + 24_099, 40, 1_000)
    assert text == "0.000010592 s" + " " * 14 + "0.000024099 s" and len(text) == 40


def test_rows_of_a_coded_or_plain_column():
    coded = Coded(np.array([0, 1, 0, 1]), ["a", "b"])
    assert rows_of(coded, "b").tolist() == [1, 3] and rows_of(coded, "c").tolist() == []
    assert rows_of(["a", "b", "a"], "a").tolist() == [0, 2] and rows_of([], "a").tolist() == []


def test_times_since_the_epoch_keep_their_nanoseconds():
    # at 1.7e18 ns a float64 is 256 ns coarse: two 1 us buckets 19 us into the capture
    t0 = 1_700_000_000_000_000_590
    cols = spread([t0 + 9_410, t0 + 10_410], [1, 1], 1_000, t0, t0 + 18_516, 75)
    assert np.flatnonzero(cols).tolist() == list(range(38, 47)) and cols.sum() == pytest.approx(2)
