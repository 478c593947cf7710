"""Roceview.units: the one style of numbers in the report and the finding texts."""
import math

import pytest

from roceview.units import article, count, duration, gbps, plural, seconds


@pytest.mark.parametrize("ns, text", [
    (0, "0 ns"), (1, "1 ns"), (500, "500 ns"), (999, "999 ns"), (999.4, "999 ns"),
    (999.6, "1.000 us"), (1000, "1.000 us"), (1828, "1.828 us"), (13_507, "13.507 us"),
    (999_999, "999.999 us"), (999_999.6, "1.000 ms"), (1_000_000, "1.000 ms"),
    (149_992_000, "149.992 ms"), (999_999_600, "1.000 s"), (1_000_000_000, "1.000 s"),
    (150_018_324, "150.018 ms"), (3_600 * 10**9, "3600.000 s"), (-1500, "-1.500 us"),
    (None, ""), (math.nan, ""),
])
def test_duration_picks_the_unit_and_three_decimals(ns, text):
    assert duration(ns) == text


def test_durations_never_show_1000_of_a_unit():
    for exp in range(0, 12):
        for mantissa in (0.9994, 0.9995, 0.99951, 0.9999, 0.99999, 1.0):
            text = duration(mantissa * 10 ** exp)
            value, unit = text.split()
            assert float(value) < 1000 or unit == "s", text


def test_seconds_goes_through_the_same_formatter():
    assert seconds(0.150018) == "150.018 ms" and seconds(None) == ""


@pytest.mark.parametrize("x, text", [
    (0, "0"), (0.0, "0"), (17.686676, "17.7"), (4.150133, "4.15"), (0.006163, "0.0062"),
    (0.061488, "0.061"), (9.996, "10.0"), (99.96, "100"), (400.0, "400"), (0.0999, "0.10"),
    (1.0, "1.00"), (0.5, "0.50"), (123.456, "123"), (1234.5, "1230"), (2e-7, "0.00000020"),
    (None, ""), (math.nan, ""),
])
def test_gbps_has_two_or_three_significant_digits(x, text):
    assert gbps(x) == text


def test_counts_plurals_and_articles():
    assert count(1234567) == "1,234,567" and count(0) == "0"
    assert plural(1, "flow") == "1 flow" and plural(2, "flow") == "2 flows"
    assert plural(1, "CNP") == "1 CNP" and plural(1500, "CNP") == "1,500 CNPs"
    assert plural(0, "sender") == "0 senders" and plural(3, "query", "queries") == "3 queries"
    assert article("int") == "an int" and article("float") == "a float" and article("str") == "a str"
