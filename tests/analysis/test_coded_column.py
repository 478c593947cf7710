"""A Coded str column (the timeline's flow names: codes into the distinct names) reads like the
list of strings it stands for, and every writer gives the bytes it gives for that list."""
from __future__ import annotations

import json

import numpy as np
import pytest

import roceview
from roceview.analysis.tables import TIMELINE_COLUMNS, Coded, Table
from roceview.render import export
from roceview.render.json_export import table_json

from conftest import SAMPLES

NAMES = ["10.0.0.1>10.0.0.2:0x0000d2", 'a "quoted", name', "unused", "ü>v:0x000001"]


def _tables(n=5000, seed=3):
    rng = np.random.default_rng(seed)
    codes = rng.choice([0, 1, 3], n)                  # "unused" never appears
    data = {"bucket_start": np.sort(rng.integers(0, 10**12, n)), "bytes": rng.integers(0, 10**6, n),
            "gbps": rng.random(n), "ecn_ce": rng.integers(0, 3, n), "cnp_packets": rng.integers(0, 3, n),
            "retransmitted_packets": rng.integers(0, 3, n)}
    coded = Table(TIMELINE_COLUMNS, {**data, "flow": Coded(codes, NAMES)})
    plain = Table(TIMELINE_COLUMNS, {**data, "flow": [NAMES[c] for c in codes]})
    return coded, plain


def test_codes_outside_the_names_are_refused():
    for codes in ([0, 4], [-1, 0]):
        with pytest.raises(ValueError):
            Coded(np.array(codes), NAMES)
    assert list(Coded(np.arange(8)[::2] % 4, NAMES)) == [NAMES[0], NAMES[2], NAMES[0], NAMES[2]]


def test_reads_as_its_list_of_strings():
    coded, plain = _tables(50)
    c, p = coded.data["flow"], plain.data["flow"]
    assert len(c) == len(p) and list(c) == p and c == p and c[7] == p[7] and list(c[3:9]) == p[3:9]
    rows = np.array([4, 0, 4, 17])
    assert coded.take(rows).data["flow"] == [p[i] for i in rows]
    assert coded.text_rows() == plain.text_rows() and coded.records() == plain.records()


@pytest.mark.parametrize("c_kernel", [True, False])
def test_csv_and_json_bytes_as_for_the_list(c_kernel, monkeypatch):
    if not c_kernel:
        monkeypatch.setattr(export, "_c_rows", lambda table: None)
    coded, plain = _tables()
    assert export.table_csv_bytes(coded) == export.table_csv_bytes(plain)
    assert table_json(coded) == table_json(plain)
    assert json.loads(table_json(coded)) == plain.records()


def test_pandas_and_incast_on_a_sample():
    res = roceview.analyze(str(SAMPLES / "incast.pcap"))
    flow = res.timeline_table.data["flow"]
    assert isinstance(flow, Coded)
    assert list(res.timeline["flow"]) == list(flow)
    assert str(res.timeline["flow"].dtype) == "string"
    assert "incast" in list(res.findings["kind"])
