"""Property tests: generated config files through `load_config`, then through the diagnoser.

Files are TOML text from the real keys and junk ones, with values of every TOML type (huge
decimal and hex integers, nan/inf, dates, strings with escapes, arrays and inline tables nested
up to thousands deep) under a `[diagnose]` header, `[[diagnose]]`, dotted keys or none; also
random bytes and byte-mutations of defaults.toml, and plausible files: every real key with
values at and around its range's edges.

Properties
  * `load_config` returns a Config or raises a RoceviewError whose text is one line: nothing
    else escapes, and no file takes longer than a generous deadline (a hang fails).
  * A Config that loads holds only finite numbers of its defaults' types, and the diagnoser runs
    with it over a sample capture without an exception or a RuntimeWarning (a division by zero).

Seeded (derandomize). ROCEVIEW_FUZZ_EXAMPLES sets the examples per test (a longer local run).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import tempfile
import warnings
from pathlib import Path

import pytest

from helpers.deadline import deadline
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from roceview.diagnose import DEFAULTS, Config, find, facts_for, load_config
from roceview.diagnose.config import MAX_COUNT, YEAR_MS
from roceview.errors import RoceviewError

REPO = Path(__file__).resolve().parents[2]
DEFAULTS_TOML = (REPO / "roceview" / "diagnose" / "defaults.toml").read_bytes()
FIELDS = [f.name for f in dataclasses.fields(Config)]
SAMPLES = ("incast", "pfc-storm", "tail-timeout", "ecn-not-enabled", "network-loss", "cnp-missing",
           "priority-mismatch", "rnr", "slow-receiver", "tap-skew", "capture-drop")
EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
STEP_SECONDS = 20      # far above any one file's load and diagnosis (milliseconds): only a hang


# --------------------------------------------------------------------------- TOML text

def _float_text(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf") if math.isinf(x) else repr(x)


def _basic_string(text: str) -> str:
    escaped = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                      else f"\\U{ord(c):08x}" for c in text)
    return f'"{escaped}"'


SCALARS = st.one_of(
    st.integers(-(1 << 70), 1 << 70).map(str),
    st.sampled_from([4300, 4301, 100_000]).map(lambda n: "9" * n),
    st.integers(1, 20_000).map(lambda n: "0x" + "f" * n),
    st.sampled_from(["0o777", "0b101", "+5", "1_000", "-0", "007"]),
    st.floats(allow_nan=True, allow_infinity=True).map(_float_text),
    st.sampled_from(["nan", "+inf", "-inf", "1e300", "1e-300", "5e-324", "1e400", "-0.0", "1.0e16"]),
    st.sampled_from(["true", "false", "1979-05-27", "1979-05-27T07:32:00Z", "07:32:00", "1979-02-30"]),
    st.text(max_size=20).map(_basic_string),
    st.text(alphabet=st.characters(blacklist_characters="'\n\r"), max_size=20).map(lambda t: f"'{t}'"),
    st.text(max_size=8),                             # junk where a value should be
)
KEYS = st.one_of(st.sampled_from(FIELDS), st.sampled_from(["diagnose", "storm_msec", '""', '"a b"', "a.b",
                                                           "diagnose.storm_ms", "diagnose.trust"]),
                 st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True))
NESTED = st.integers(1, 3000).flatmap(lambda n: st.sampled_from(["[" * n + "]" * n,
                                                                 "{a = " * n + "1" + "}" * n]))


def _containers(children):
    arrays = st.lists(children, max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]")
    tables = st.lists(st.tuples(KEYS, children), max_size=4).map(
        lambda kv: "{ " + ", ".join(f"{k} = {v}" for k, v in kv) + " }")
    return arrays | tables


VALUES = st.recursive(SCALARS, _containers, max_leaves=12) | NESTED
HEADERS = st.sampled_from(["", "[diagnose]\n", "[[diagnose]]\n", "[other]\n", "[diagnose.sub]\n", "[diagnose]\n" * 2])
LINES = st.lists(st.tuples(KEYS, VALUES), max_size=6).map(lambda kv: "".join(f"{k} = {v}\n" for k, v in kv))
TOML_FILES = st.builds(lambda top, header, body: (top + header + body).encode("utf-8", "surrogatepass"),
                       LINES, HEADERS, LINES)


@st.composite
def _mutated_defaults(draw) -> bytes:
    data = bytearray(DEFAULTS_TOML)
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    return bytes(data[:draw(st.integers(0, len(data)))])


# --------------------------------------------------------------------------- plausible files

def _mostly(good, edges):
    """Two draws in three from `good` (so most files load and reach the diagnoser), else `edges`."""
    return st.integers(0, 2).flatmap(lambda i: edges if i == 0 else good)


FLOATS = _mostly(st.sampled_from([1e-6, 1e-3, 0.05, 0.5, 0.99, 1.0, 1.25, 10.0, 100.0, 4096.0]),
                 st.sampled_from([0.0, 1e-9, 1e6, 1e6 + 1, float(YEAR_MS), YEAR_MS * 1000.0, 1e300, -1.0,
                                  float("nan"), float("inf")]) | st.floats(-1e20, 1e20) | st.integers(-10, 10**6))
INTS = _mostly(st.sampled_from([1, 2, 3, 4, 5, 100, 4096]) | st.integers(1, 10_000),
               st.sampled_from([0, 1 << 23, (1 << 23) + 1, MAX_COUNT, MAX_COUNT + 1, -1, 1 << 63, 0.5, 4.0]))
TYPED = {
    float: FLOATS, int: INTS, bool: st.booleans(),
    str: _mostly(st.sampled_from(["auto", "pcp", "dscp"]), st.sampled_from(["vlan", "", "AUTO"])),
    dict: st.dictionaries(_mostly(st.integers(0, 63).map(str), st.sampled_from(["64", "046", "\u00b2", "-1", "08"])),
                          _mostly(st.integers(0, 7), st.sampled_from([-1, 8, 3.0])), max_size=4),
    list: st.lists(_mostly(st.integers(0, 7), st.sampled_from([-1, 8, True])), max_size=5),
}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return _basic_string(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_basic_string(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


PLAUSIBLE = st.lists(st.sampled_from(FIELDS), max_size=5, unique=True).flatmap(
    lambda names: st.tuples(*(TYPED[type(getattr(DEFAULTS, n))] for n in names)).map(
        lambda values: ("[diagnose]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in zip(names, values))).encode()))


# --------------------------------------------------------------------------- the properties

@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@functools.lru_cache(maxsize=1)
def _samples() -> dict:
    """Each sample analyzed once, with its facts (not a fixture: hypothesis would print it)."""
    import roceview.api

    results = {}
    for name in SAMPLES:
        result = roceview.api.analyze(str(REPO / "captures" / f"{name}.pcap"), diagnose=False, warn=lambda m: None)
        results[name] = (result, facts_for(result))
    return results


def _load(folder: Path, data: bytes) -> Config | None:
    """The Config, or None after checking the refusal is one RoceviewError line."""
    path = folder / "fuzzed.toml"
    path.write_bytes(data)
    try:
        with deadline(STEP_SECONDS):
            config = load_config(path)
    except RoceviewError as err:
        assert str(err) and "\n" not in str(err) and "\r" not in str(err), repr(str(err))
        event("refused: " + str(err).split(f"{path.name}: ")[-1].split(" (")[0][:32])   # --hypothesis-show-statistics
        return None
    event("loaded")
    return config


def _check_config(config: Config) -> None:
    for f in dataclasses.fields(Config):
        value, default = getattr(config, f.name), getattr(DEFAULTS, f.name)
        assert type(value) is type(default), (f.name, value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isfinite(value) and abs(value) <= YEAR_MS * 1000, (f.name, value)


def _diagnose(config: Config, result, facts) -> None:
    with deadline(STEP_SECONDS), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        find(result, config, facts if config.reread_capture else None)


@FUZZ
@given(data=st.one_of(TOML_FILES, st.binary(max_size=600), _mutated_defaults()), sample=st.sampled_from(SAMPLES))
def test_any_config_file_loads_or_is_one_line_bad_input(folder, data, sample):
    config = _load(folder, data)
    if config is not None:
        _check_config(config)
        _diagnose(config, *_samples()[sample])


@settings(FUZZ, max_examples=2 * EXAMPLES)     # about one file in five loads: ~60 diagnoses
@given(data=PLAUSIBLE, sample=st.sampled_from(SAMPLES))
def test_a_config_that_loads_gives_an_analysis_that_runs(folder, data, sample):
    config = _load(folder, data)
    if config is not None:
        _check_config(config)
        _diagnose(config, *_samples()[sample])
