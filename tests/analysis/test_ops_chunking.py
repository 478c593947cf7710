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
             ("reordering", "receiver"), ("rnr", "sender"), ("ops-mixed", "receiver"),
             # responses stamped before their requests, a READ completed then reopened by its re-read
             ("tap-skew", "sender")]


SIZES = {"read-response-loss-last": (1, 3, 17), "reordering": (1, 7), "ops-mixed": (17, 64),   # 1: slow
         "tap-skew": (3, 17), "capture-drop": (17, 64)}
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


@pytest.mark.parametrize("name,mirror", [("network-loss", "sender"), ("read-response-loss-middle", "receiver"),
                                         ("capture-drop", "sender"), ("pmtu-4096-cm", "sender"), ("rnr", "receiver")])
def test_same_operations_when_operations_are_given_up_soon(tmp_path, name, mirror, monkeypatch):
    """With the pending bound at 2 operations are given up (expire) all the time, and evicted at
    whatever chunk end comes after: a retransmitted operation given up stops blocking, an
    operation whose last packet the capture missed learns its end from the next one, a READ's
    range and its first response past it outlive the operations beside it."""
    from roceview.analysis import ops

    monkeypatch.setattr(ops, "PENDING_PER_SPACE", 2)
    test_same_operations_for_every_chunk_size(tmp_path, name, mirror)
