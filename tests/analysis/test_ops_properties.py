"""Properties of ops.csv on every sample capture and every real capture (../shared/captures/real,
skipped cleanly when absent): its operations' packets are the capture's request packets (RC,
UC, UD; a second capture of a frame excepted), the summary counting those it could not give to
an operation; a completion comes after its operation's first packet; latency is blank exactly
when there is no completion; the CSV and JSON text of the three operation tables are their
definition's (tables.slow_text, json.dumps)."""
from __future__ import annotations

import csv
import io
import json

import numpy as np

import roceview
from roceview.analysis import opcode_classes as op
from roceview.packets.flags import Flag
from roceview.render.export import result_document, table_csv_bytes
from roceview.render.json_export import document_json


def request_packets(result) -> int:
    pk = result.packets
    opcode = pk["opcode"].astype("Int64")
    valid = (opcode.notna() & pk["dest_qp"].notna()).to_numpy()
    cls = op.OPCLASS[opcode.fillna(0).astype(int).to_numpy()]
    copy = (pk["flags"].astype("int64").to_numpy() & int(Flag.DUPLICATE)) != 0
    return int(np.count_nonzero(valid & np.isin(cls, (op.REQUEST, op.READ_REQUEST)) & ~copy))


def check(path) -> None:
    result = roceview.analyze(path, diagnose=False, packets=True, warn=lambda m: None)
    ops, summary = result.ops_table.data, result.summary["operations"]
    assert summary["count"] == len(result.ops_table) + summary["not_listed"]
    assert int(np.sum(ops["packets"])) + summary["late_packets"] + summary["unmatched_packets"] == \
        request_packets(result)
    done = np.asarray(ops["completion_frame"]) > 0
    assert (np.asarray(ops["completion_frame"])[done] > np.asarray(ops["first_frame"])[done]).all()
    assert (np.asarray(ops["completion_ts"])[done] >= np.asarray(ops["start_ts"])[done]).all()
    assert (np.isnan(np.asarray(ops["latency_us"])) == ~done).all()
    assert (np.asarray(ops["last_frame"]) >= np.asarray(ops["first_frame"])).all()
    stats = result.op_stats_table.data
    assert int(np.sum(stats["operations"])) == summary["count"]


def test_properties_on_every_sample(sample_capture):
    check(sample_capture)


def test_properties_on_every_real_capture(real_capture):
    check(real_capture)


def test_text_forms_are_the_definitions(sample_capture):
    result = roceview.analyze(sample_capture)
    for table in (result.ops_table, result.op_stats_table, result.read_depth_table):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([table.columns] + table.text_rows())
        assert table_csv_bytes(table) == buf.getvalue().encode()
    assert document_json(result) == json.dumps(result_document(result), indent=1, allow_nan=False).encode()
    frame = result.ops
    assert list(frame.columns) == list(result.ops_table.columns) and len(frame) == len(result.ops_table)
    assert frame["completion_ts"].isna().sum() == int((np.asarray(result.ops_table.data["completion_frame"]) < 0).sum())
