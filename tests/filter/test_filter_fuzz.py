"""Fuzzing the display-filter grammar: random valid and invalid filters (every field name and
operator spelling, literals of every kind including huge, negative, octal and control
characters, sets and ranges, nesting up to and past the limit, and random edits of all of
these) are compiled and run on a small capture.

Properties
  * compile_filter raises nothing but FilterError, whose text is one printable line;
  * a filter that compiles evaluates without any exception, to one bool per packet, on a
    batch with the analysis flags; on a batch without them only FilterError ("needs the
    analysis flags").

Seeded and bounded: hypothesis with derandomize=True and ROCEVIEW_FUZZ_EXAMPLES examples per
property (default 300: a few seconds); a hang fails the test after HANG_SECONDS (SIGALRM)."""
from __future__ import annotations

import os

import numpy as np

from helpers.deadline import deadline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SAMPLES
from roceview.filter import FilterError, compile_filter
from roceview.filter import field_names as F
from roceview.filter.parse import COMPARE, LOGIC
from roceview.packets.batch import Batch

EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "300"))
HANG_SECONDS = 60                      # per example: far above the milliseconds one takes
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
FIELDS = sorted(F.all_fields())
HUGE = ["1" * 4301, "9" * 20, "18446744073709551616", "0x" + "f" * 300, "0" + "7" * 30, "0b" + "1" * 70,
        "-" + "1" * 5000, "4294967296", "16777216", "65536", "256", "-2147483648", "-0", "00", "0x", "0b2"]
CONTROL = ["\n", "\r", "\x00", "\x1b", "\t", "\v", "\x85", "\u2028", "\x7f"]


def _batch(analysis: bool) -> Batch:
    from roceview.analysis.annotate import analyzed_pairs
    from roceview.packets.read import iter_batches

    path = str(SAMPLES / "network-loss.pcap")
    batches = list(iter_batches([path], prefetch=False))
    if not analysis:
        return Batch.concat(batches)
    from roceview.analysis.op_marks import operation_index

    batch = Batch.concat([b for _, b in analyzed_pairs((None, b) for b in batches)])
    operation_index([path]).annotate(batch)      # roceview.op.*: as dissect's first pass gives them
    return batch


_BATCHES: list = []


def batches() -> tuple[Batch, Batch]:
    """(with the analysis flags, without), read once (not a fixture: hypothesis would print
    the batches in a falsifying example)."""
    if not _BATCHES:
        from roceview.packets.times import Clock

        analyzed = _batch(True)
        Clock().stamp(analyzed)         # frame.time_relative, frame.time_delta: as dissect reads them
        _BATCHES.extend([analyzed, _batch(False)])
    return _BATCHES[0], _BATCHES[1]


def literals():
    edges = st.sampled_from([s * (2**k + d) for k in (8, 16, 24, 31, 32, 63, 64) for d in (-1, 0) for s in (1, -1)])
    ints = (st.integers(-2**70, 2**70) | edges).map(str) | st.integers(0, 2**70).map(hex) | st.integers(
        0, 2**70).map(lambda x: "0" + format(x, "o"))             # Wireshark's octal: a leading 0
    words = st.sampled_from(["10.0.0.1", "10.0.0.0/8", "fe80::/10", "::ffff:1.2.3.4", "lid:0x10", "lid:99999",
                             "0e:c0:de:00:00:11", "0ec0.de00.0011", "true", "false", "CNP", "roce_v2",
                             "RC Send First", "ack", "ip.src", "1_0", "1e3", "1.", "..", "/", "-", "::"])
    prefix = st.sampled_from(["", "lid:", "lid:0x", "0x", "0b", "0", "-", "10.0.0.", "fe80::", "0e:c0:de:00:00:"])
    quoted = st.tuples(prefix, st.text(max_size=12)).map(                 # any Unicode after a known start
        lambda t: '"' + (t[0] + t[1]).replace("\\", "\\\\").replace('"', '\\"') + '"')
    return ints | words | quoted | st.sampled_from(HUGE) | st.text(
        st.characters(codec="utf-8"), min_size=1, max_size=8)


def comparisons():
    literals_ = literals()
    field = st.sampled_from(FIELDS) | st.sampled_from(["roceview.nope", "ip.scr", "frame[0:2]", "in", "and"])
    op = st.sampled_from(sorted(COMPARE) + ["=", "contains", "~", "&", "in"])
    item = st.tuples(literals_, st.none() | literals_).map(lambda t: t[0] + (".." + t[1] if t[1] else ""))
    members = st.lists(item, max_size=4).map(lambda xs: "{" + ", ".join(xs) + "}")
    return (field | st.tuples(field, op, literals_).map(" ".join)
            | st.tuples(field, st.sampled_from(["in", "not in"]), members).map(" ".join))


def filters():
    logic, leaf = st.sampled_from(sorted(LOGIC)), comparisons()
    tree = st.recursive(leaf, lambda kids: st.one_of(
        st.tuples(st.sampled_from(["!", "not ", "!(", "("]), kids).map(
            lambda t: t[0] + t[1] + (")" if "(" in t[0] else "")),
        st.tuples(kids, logic, kids).map(" ".join)), max_leaves=8)
    deep = st.tuples(st.integers(0, 200), st.sampled_from(["(", "!", "not ", "!("]), leaf).map(
        lambda t: t[1] * t[0] + t[2] + ")" * t[0] * t[1].count("("))
    return tree | deep


@st.composite
def edited(draw):
    """A filter with a few characters inserted, deleted or replaced (invalid most of the time)."""
    text = list(draw(FILTERS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace"]))
        char = draw(EDIT_CHARS)
        if kind == "insert" or not text:
            text.insert(at, char)
        elif kind == "delete":
            del text[min(at, len(text) - 1)]
        else:
            text[min(at, len(text) - 1)] = char
    return "".join(text)


def _check(text: str) -> None:
    try:
        compiled = compile_filter(text)
    except FilterError as exc:
        message = str(exc)
        assert message.isprintable() and len(message) < 400, repr(message[:400])
        return
    from roceview.packets.times import Clock, filter_mask

    analyzed, bare = batches()
    keep = filter_mask(compiled, analyzed, Clock())
    assert keep.dtype == bool and keep.shape == (analyzed.n,)
    try:
        assert compiled.mask(bare).shape == (bare.n,)
    except FilterError as exc:          # a batch read without the analysis, without the reading order
        assert ("needs the analysis flags" in str(exc) or "needs the times of the packets before it" in str(exc)
                or "needs the operations of the whole capture" in str(exc)), str(exc)


FILTERS = filters()
EDIT_CHARS = st.sampled_from(CONTROL + list('(){}[]"\\!=<>&|^~,. 0x-')) | st.characters(codec="utf-8")


@FUZZ
@given(text=FILTERS)
def test_random_filters_compile_or_raise_filter_error_and_evaluate(text):
    with deadline(HANG_SECONDS, "the filter fuzz"):
        _check(text)


@FUZZ
@given(text=edited())
def test_randomly_edited_filters_compile_or_raise_filter_error_and_evaluate(text):
    with deadline(HANG_SECONDS, "the filter fuzz"):
        _check(text)


def test_the_fuzzed_grammar_reaches_valid_and_invalid_filters():
    """The strategies are not vacuous: some of their filters compile and match, some are refused."""
    from hypothesis import find

    matched = find(FILTERS, lambda t: _compiles(t) and compile_filter(t).mask(batches()[0]).any(),
                   settings=settings(derandomize=True, database=None, max_examples=2000))
    refused = find(FILTERS, lambda t: not _compiles(t), settings=settings(derandomize=True, database=None))
    assert matched and refused is not None
    assert np.any(compile_filter(matched).mask(batches()[0]))


def _compiles(text: str) -> bool:
    try:
        compile_filter(text)
    except FilterError:
        return False
    return True
