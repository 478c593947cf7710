"""A mirror that renders CNPs (or every frame) with IPv4 identification 0, as NICs that leave it 0
send them (generate/mirror.py `zero_ids`), and the analysis of such captures from a duplicating
mirror: each CNP counted once, and none lost when nothing is duplicated (analysis/copies.py)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import roceview
from roceview.diagnose import find, load_config
from roceview.generate import Capture, write_capture
from roceview.generate import ibta as ib
from roceview.generate.ops_truth import operations
from roceview.generate.scenarios import SCENARIOS
from roceview.generate.truth import Truth


def captured(name: str, copies: int, zero_ids: str, seed: int = 0) -> Capture:
    """`name` with its mirror replicating every frame `copies` times, rendering `zero_ids`."""
    sc = SCENARIOS[name]
    truth = Truth(scenario=name, seed=seed, mirror=sc.mirror, expected_kinds=sc.expected,
                  forbidden_kinds=sc.forbidden)
    net, senders, _ = sc.build(np.random.default_rng(seed), 1.0, truth)
    net.mirror.copies, net.mirror.zero_ids = copies, zero_ids
    net.mirror_links(senders)
    frames, lengths, ts_ns = net.run()
    truth.ops = operations(net)
    return Capture(frames, lengths, ts_ns, truth)


def identifications(cap: Capture) -> tuple[list, list]:
    """(the CNPs' IPv4 identifications, the other RoCE frames') of 802.1Q-tagged RoCEv2 frames."""
    cnps, others = [], []
    for f in cap.frame_list():
        if f[12:14] == b"\x81\x00" and f[16:18] == b"\x08\x00" and f[18 + 9] == 17:
            ident, opcode = struct.unpack("!H", f[22:24])[0], f[18 + 28]
            (cnps if opcode == ib.CNP else others).append(ident)
    return cnps, others


@pytest.mark.parametrize("zero_ids", ["cnp", "all"])
def test_the_mirror_renders_the_chosen_frames_without_identification_and_a_good_icrc(tmp_path, zero_ids):
    cap = captured("dcqcn-reaction", 1, zero_ids)
    cnps, others = identifications(cap)
    assert cnps and set(cnps) == {0}
    assert (set(others) == {0}) == (zero_ids == "all") and others
    path = tmp_path / "c.pcap"
    write_capture(cap, path)
    assert "bad_icrc" not in {f["kind"] for f in find(roceview.analyze(path, diagnose=False))}


def counted(tmp_path, cap: Capture) -> tuple[int, int, int]:
    """(cc.csv rows, qps.csv cnps_received summed, cnp_excess findings at mlx5's 4 us)."""
    path = tmp_path / "c.pcap"
    write_capture(cap, path)
    result = roceview.analyze(path, diagnose=False)
    received = sum(int(x) for x in result.flows_table.text_column("cnps_received") if x)
    excess = [f for f in find(result, load_config(min_time_between_cnps_us=4.0)) if f["kind"] == "cnp_excess"]
    return len(result.cc_table.data["flow"]), received, len(excess)


COUNTED_TWICE = pytest.mark.xfail(strict=True, reason="a mirror's copy of a CNP without identification "
                                   "is a CNP of its own (analysis/copies.py)")


@pytest.mark.parametrize("copies, zero_ids", [pytest.param(2, "cnp", marks=COUNTED_TWICE),
                                              pytest.param(2, "all", marks=COUNTED_TWICE), (1, "cnp"), (1, "all")])
def test_each_cnp_without_identification_is_counted_once_whether_or_not_the_mirror_duplicates(tmp_path, copies,
                                                                                             zero_ids):
    cap = captured("dcqcn-reaction", copies, zero_ids)          # one CNP per QP per 4 us
    sent = cap.truth.counters["cnps_sent"]
    assert counted(tmp_path, cap) == (sent, sent, 0)


@COUNTED_TWICE
def test_cnps_sent_for_every_marked_packet_are_all_counted_through_a_duplicating_mirror(tmp_path):
    cap = captured("cnp-excess", 2, "all")                      # no minimum spacing at the NP
    sent = cap.truth.counters["cnps_sent"]
    assert counted(tmp_path, cap)[:2] == (sent, sent)
