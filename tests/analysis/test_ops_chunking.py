"""The operation tables do not depend on how the capture is cut into chunks: operations still
open, their completions, re-reads, the READ depth and its deferred sweep cross chunk boundaries,
down to one packet a chunk. (QP pairing from PSN evidence is gathered within a chunk, so each
scenario here pairs its QPs the same at every size: checked first.)"""
from __future__ import annotations

import pytest

import roceview
from roceview.generate import generate, write_capture

SCENARIOS = [("read-depth-limit", "sender"), ("network-loss-receiver-side", "receiver"), ("network-loss", "sender"),
             ("read-response-loss-middle", "receiver"), ("read-response-loss-last", "sender"),
             ("reordering", "receiver"), ("rnr", "sender"), ("ops-mixed", "receiver")]


SIZES = {"read-response-loss-last": (1, 3, 17), "reordering": (1, 7), "ops-mixed": (17, 64)}   # 1: slow
# ops-mixed pairs its QPs from PSN evidence only once a chunk holds a request and its response


def tables(result):
    return (result.ops_table.text_rows(), result.op_stats_table.text_rows(), result.read_depth_table.text_rows(),
            result.summary["operations"])


@pytest.mark.parametrize("name,mirror", SCENARIOS)
def test_same_operations_for_every_chunk_size(tmp_path, name, mirror):
    path = tmp_path / f"{name}.pcap"
    write_capture(generate(name, seed=0, mirror=mirror), path)
    whole = roceview.analyze(path, diagnose=False)
    for size in SIZES.get(name, (5, 64)):
        cut = roceview.analyze(path, diagnose=False, chunk_packets=size)
        assert cut.flows_table.text_rows() == whole.flows_table.text_rows(), size
        assert tables(cut) == tables(whole), size
