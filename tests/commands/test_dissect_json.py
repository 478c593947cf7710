"""`roceview dissect -T json [-e FIELD ...]`: tshark's -T json array (`_index`, `_type`, `_score`,
`_source.layers`), values as strings, a field of two occurrences written twice, -Y / -c / several
files honoured, written batch by batch, and the same values as `-T fields`. The comparison with
tshark itself is tests/commands/test_dissect_json_equals_tshark.py.

The time texts are fuzzed (seeded random.Random): ROCEVIEW_FUZZ_EXAMPLES sets the number of
values per zone (default 2000 in CI; a longer local run: ROCEVIEW_FUZZ_EXAMPLES=200000)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run

from roceview.filter import field_names as F

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "captures" / "network-loss.pcap"
PFC = REPO / "captures" / "pfc-pause-train.pcap"
EXAMPLES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "2000"))


def documents(*argv, pairs: bool = False):
    code, out, err = run("dissect", "-T", "json", *argv)
    assert code == 0 and err == "", err
    return json.loads(out, object_pairs_hook=(lambda p: p) if pairs else None)


def leaves(pairs, into=None) -> dict[str, list[str]]:
    """Every field of a document's layers (parsed as pairs): name -> values, in order."""
    into = {} if into is None else into
    for key, value in pairs:
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            leaves(value, into)
        else:
            into.setdefault(key, []).append(value)
    return into


def layers_of(doc_pairs):
    return dict(dict(doc_pairs)["_source"])["layers"]


def test_json_is_tshark_documents_with_string_values():
    docs = documents(SAMPLE, "-c", "20")
    assert len(docs) == 20
    for i, doc in enumerate(docs, 1):
        assert list(doc) == ["_index", "_type", "_score", "_source"]
        assert doc["_type"] == "doc" and doc["_score"] is None and doc["_index"].startswith("packets-20")
        layers = doc["_source"]["layers"]
        assert layers["frame"]["frame.number"] == str(i)
    for doc in documents(SAMPLE, "-c", "20", pairs=True):
        assert all(isinstance(v, str) for values in leaves(layers_of(doc)).values() for v in values)
    roce = next(d for d in docs if "infiniband" in d["_source"]["layers"])["_source"]["layers"]
    assert list(roce) == ["frame", "eth", "vlan", "ip", "udp", "infiniband"]
    bth = roce["infiniband"]["infiniband.bth_tree"]
    assert bth["infiniband.bth.destqp"].startswith("0x") and bth["infiniband.bth.psn"].isdigit()
    assert roce["ip"]["ip.dsfield_tree"]["ip.dsfield.dscp"].isdigit()


def test_a_field_of_two_occurrences_is_written_twice_as_tshark_does():
    layers = layers_of(documents(SAMPLE, "-c", "1", pairs=True)[0])
    ip = dict(layers)["ip"]
    keys = [k for k, _ in ip]
    assert keys.count("ip.addr") == 2
    values = leaves(ip)
    assert values["ip.addr"] == values["ip.src"] + values["ip.dst"]
    assert leaves(dict(layers)["udp"])["udp.port"] == leaves(dict(layers)["udp"])["udp.srcport"] + \
        leaves(dict(layers)["udp"])["udp.dstport"]


def test_display_filter_and_count_as_tshark():
    shown = documents(SAMPLE, "-Y", "infiniband.aeth")
    code, out, _ = run("dissect", SAMPLE, "-Y", "infiniband.aeth", "-T", "fields", "-e", "frame.number")
    assert code == 0
    assert [d["_source"]["layers"]["frame"]["frame.number"] for d in shown] == out.split()
    assert all("infiniband.aeth_tree" in d["_source"]["layers"]["infiniband"] for d in shown)
    assert [d["_source"]["layers"]["frame"]["frame.number"] for d in documents(SAMPLE, "-c", "5")] == list("12345")


def test_nothing_shown_is_an_empty_array():
    code, out, err = run("dissect", "-T", "json", SAMPLE, "-Y", "frame.number > 1000000")
    assert (code, out, err) == (0, "[]\n", "")
    code, out, err = run("dissect", "-T", "json", SAMPLE, "-c", "0")
    assert (code, out) == (0, "[]\n")


def test_e_fields_give_lists_in_their_order_without_repeats_or_absent_fields():
    docs = documents(SAMPLE, "-c", "40", "-e", "frame.number", "-e", "ip.addr", "-e", "infiniband.aeth.msn",
                     "-e", "frame.number")
    assert list(docs[0]["_source"]["layers"]) == ["frame.number", "ip.addr"]      # no AETH on frame 1
    assert docs[0]["_source"]["layers"]["frame.number"] == ["1"]
    assert len(docs[0]["_source"]["layers"]["ip.addr"]) == 2
    acked = [d["_source"]["layers"] for d in docs if "infiniband.aeth.msn" in d["_source"]["layers"]]
    assert acked and all(list(layers) == ["frame.number", "ip.addr", "infiniband.aeth.msn"] for layers in acked)


def test_every_value_is_what_T_fields_prints():
    """The JSON tree and -T fields read one definition (the filter's fields): for every
    Wireshark field, all its occurrences in a packet's tree equal -T fields' aggregated text."""
    names = [n for n in F.WIRESHARK_NAMES if n not in F.FIELDS_BY_KIND_NONE]
    for path in (SAMPLE, PFC, REPO / "captures" / "rnr.pcap"):
        docs = documents(path, "-c", "150", pairs=True)
        code, out, err = run("dissect", path, "-c", "150", "-T", "fields", "-E", "separator=|",
                             *[a for n in names for a in ("-e", n)])
        assert code == 0, err
        for doc, line in zip(docs, out.splitlines(), strict=True):
            tree = leaves(layers_of(doc))
            for name, text in zip(names, line.split("|")):
                assert ",".join(tree.get(name, [])) == text, (path.name, name)


def test_every_wireshark_field_of_the_filter_has_its_place_in_the_tree():
    from roceview.render.tshark_layout import slot_names

    placed = set(slot_names())
    for name in F.WIRESHARK_NAMES:
        field = F.lookup(name, None)
        if field.kind != F.NONE:
            for k in range(len(field.sources)):
                assert f"{name}#{k}" in placed, f"{name} occurrence {k} is not in the -T json layout"


def test_several_files_are_one_array_numbered_as_dissect_numbers_them():
    one, two = documents(SAMPLE), documents(PFC)
    both = documents(SAMPLE, PFC)
    assert len(both) == len(one) + len(two)
    numbers = [int(d["_source"]["layers"]["frame"]["frame.number"]) for d in both]
    assert numbers == list(range(1, len(both) + 1))


def test_the_array_is_written_batch_by_batch_and_slice_by_slice(monkeypatch):
    """Batches written one after another, and a batch in slices of rows, make the array one
    batch makes: the writer keeps no packet (constant memory on a capture of any size)."""
    from roceview.packets.read import iter_batches
    from roceview.packets.times import Clock
    from roceview.render import tshark_json
    from roceview.render.tshark_json import TsharkJsonWriter

    batch = next(iter(iter_batches([str(SAMPLE)], prefetch=False)))
    Clock().stamp(batch)
    Clock().display(batch)
    whole = TsharkJsonWriter([])
    expected = whole.text(batch) + whole.close()
    parts = TsharkJsonWriter([])
    cuts = [0, 1, 57, batch.n]
    text = "".join(parts.text(batch.select(np.arange(a, b))) for a, b in zip(cuts, cuts[1:])) + parts.close()
    assert text == expected
    assert json.loads(text)
    monkeypatch.setattr(tshark_json, "SLICE", 50)
    sliced = TsharkJsonWriter([])
    pieces = list(sliced.pieces(batch))
    assert len(pieces) == -(-batch.n // 50) and "".join(pieces) + sliced.close() == expected


@pytest.mark.parametrize("argv, named", [(["--jsonl"], "--jsonl"), (["-V"], "-V"), (["-x"], "-x"), (["-E", "header=y"], "-E"),
                                         (["-e", "infiniband.bth.dstqp"], "infiniband.bth.destqp")], ids=str)
def test_a_bad_combination_is_one_line_naming_it_and_exit_2(argv, named):
    code, out, err = run("dissect", "-T", "json", SAMPLE, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("roceview") and named in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_on_stdout_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "roceview", "dissect", "-T", "json", str(SAMPLE)], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["roceview: error: cannot write to standard output: No space left on device"]


@pytest.mark.parametrize("zone", ["UTC", "America/St_Johns", "Asia/Kathmandu"], indirect=True)
def test_time_texts_equal_the_per_value_formatting_fuzzed(zone):
    """The column-wise seconds, frame.time and _index texts equal times.signed_seconds,
    times.frame_time_text and a strftime of each value (any sign; 1970 to 2262; summer time)."""
    from roceview.packets.times import frame_time_text, signed_seconds
    from roceview.render.tshark_json import _Seconds, _seconds_texts

    rng = random.Random(31)
    ns = [rng.choice([rng.randrange(-2 * 10 ** 9, 2 * 10 ** 9), rng.randrange(0, 2 ** 63),
                      1_700_000_000_000_000_000 + rng.randrange(-10 ** 17, 10 ** 17)]) for _ in range(EXAMPLES)]
    values = np.array(ns, np.int64)
    assert _seconds_texts(values) == [json.dumps(signed_seconds(v)) for v in ns]
    stamps = values[values >= 0]
    seconds = _Seconds(stamps)
    assert seconds.frame_times(np.arange(len(stamps))) == [json.dumps(frame_time_text(int(v))) for v in stamps]
    assert seconds.index_texts().tolist() == [
        json.dumps("packets-" + time.strftime("%Y-%m-%d", time.localtime(int(v) // 10 ** 9))) for v in stamps]


def test_every_name_the_json_shows_works_with_e_and_y():
    """A name copied from the JSON into `-T fields -e` or a filter works, as in tshark (a dozen
    of them, computed for the JSON tree alone, were 'unknown field' there)."""
    names = set()
    for sample in (SAMPLE, PFC, REPO / "captures" / "clean.pcap"):
        for doc in documents(sample, "-c", "30", pairs=True):
            names.update(k for k in leaves(layers_of(doc)) if "." in k and not k.endswith("_tree"))
    names = sorted(names)
    assert len(names) > 40
    for sample in (SAMPLE, PFC):
        code, out, err = run("dissect", sample, "-c", "30", "-T", "fields", *[a for n in names for a in ("-e", n)])
        assert code == 0 and err == "", err
        values = [line.split("\t") for line in out.splitlines()]
        for k, name in enumerate(names):          # the filter selects each frame a value is printed for
            shown = [i + 1 for i, row in enumerate(values) if row[k] != ""]
            if shown:
                code, out, err = run("dissect", sample, "-c", "30", "-Y", name, "-T", "fields", "-e", "frame.number")
                assert code == 0 and err == "", (name, err)
                assert [int(x) for x in out.split()] == shown, name


def test_a_computed_field_is_known_to_a_bare_lookup():
    """The computed fields are declared with the others: a lookup before anything imported the
    module that computes them knows them (a name of the JSON tree is never 'unknown')."""
    code = ("from roceview.filter import field_names as F; "
            "print(F.lookup('vlan.etype', None).name, F.lookup('ip.dsfield', None).name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["vlan.etype", "ip.dsfield"]
