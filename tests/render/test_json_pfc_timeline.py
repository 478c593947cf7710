"""--json carries the PFC timeline (`pfc_timeline`: per pause source MAC, priority and bucket, the
pause frames and the time paused) next to the flows' timeline and cc.csv's CNP rows: the series a
plot over time needs. A result the diagnoser never saw has no such table: an empty list then."""
from __future__ import annotations

import json
from pathlib import Path

import roceview
from roceview.render.json_export import document_json

REPO = Path(__file__).resolve().parents[2]


def test_the_json_document_holds_the_pfc_timeline_rows_after_the_other_tables():
    result = roceview.analyze([str(REPO / "captures" / "pfc-storm.pcap")])
    doc = json.loads(document_json(result))
    assert list(doc)[-1] == "pfc_timeline" and {"timeline", "cc"} <= set(doc)
    assert doc["pfc_timeline"] == result.pfc_timeline_table.records()
    assert len(doc["pfc_timeline"]) > 100             # 150 ms of pause storm in 1 ms buckets
    paused = sum(r["paused_us"] for r in doc["pfc_timeline"])
    assert abs(paused - doc["pfc"][0]["paused_us"]) < 1


def test_a_result_without_diagnosis_writes_an_empty_pfc_timeline():
    result = roceview.analyze([str(REPO / "captures" / "pfc-storm.pcap")], diagnose=False)
    assert not hasattr(result, "pfc_timeline_table")
    doc = json.loads(document_json(result))
    assert doc["pfc_timeline"] == [] and len(doc["pfc"]) == 1


def test_the_json_document_holds_paused_flows_as_the_python_document_does():
    result = roceview.analyze([str(REPO / "captures" / "pfc-storm.pcap")])
    doc = json.loads(document_json(result))
    assert doc["paused_flows"] == result.paused_flows_table.records()
