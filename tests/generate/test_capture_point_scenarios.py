"""The capture-path scenarios (roceview/generate/scenarios_capture.py): two-point-mirror records
every frame at two leaves with a fixed offset per direction, tap-skew stamps one direction of a
TAP 3 us early. Each test reads the written pcap (tests/helpers/transforms.read_pcap) and holds it
to the model's ground truth (`truth.capture_points`): the offsets and skew, and per flow what one
capture point shows. Nothing here asks `roceview analyze` anything."""
from __future__ import annotations

import struct
from collections import defaultdict

import pytest

from helpers import transforms as tf
from roceview.generate import ALL_KINDS, SCENARIOS, generate, write_capture
from roceview.generate import ibta as ib
from roceview.generate.frames import ipv4_checksum
from test_frames_are_real import spec_icrc_ok

SENDER = bytes([10, 0, 0, 1])
FORWARD, BACKWARD = "10.0.0.1>10.0.0.2", "10.0.0.2>10.0.0.1"
RUNS = [(0, "sender"), (1, "sender"), (2, "receiver")]


def _records(tmp_path, name: str, seed: int, mirror: str | None = None):
    cap = generate(name, seed=seed, mirror=mirror)
    path = tmp_path / f"{name}-{seed}.pcap"
    write_capture(cap, path)
    return cap.truth, tf.read_pcap(path)[1]


def _direction(h: tf.RoceV2) -> str:
    return FORWARD if h.src == SENDER else BACKWARD


def _ttl(r: tf.Record, h: tf.RoceV2) -> int:
    return r.frame[h.ip + 8]


def _pairs(records) -> list[tuple]:
    """The copies of each frame: its bytes but for the IPv4 TTL and header checksum -> records."""
    copies = defaultdict(list)
    for r in records:
        h = tf.roce_v2(r.frame)
        key = r.frame[:h.ip + 8] + r.frame[h.ip + 9:h.ip + 10] + r.frame[h.ip + 12:]
        copies[key].append((r, h))
    return list(copies.values())


def _points(records) -> tuple[list, list]:
    """(sender-leaf copies, receiver-leaf copies) in capture order: the copy taken downstream
    has crossed one more routed hop (TTL one less)."""
    sender_leaf, receiver_leaf = [], []
    for copies in _pairs(records):
        (up, uh), (down, _) = sorted(copies, key=lambda c: -_ttl(*c))
        first, second = (sender_leaf, receiver_leaf) if _direction(uh) == FORWARD else (receiver_leaf, sender_leaf)
        first.append(up)
        second.append(down)
    return sorted(sender_leaf, key=lambda r: r.ts), sorted(receiver_leaf, key=lambda r: r.ts)


def _one_point_counts(records) -> dict:
    """Per flow (`SRC>DST:0xQPN`) what these records show: packets, data packets, NAKs (AETH
    syndrome class 11) and resent packets (a data packet whose PSN the flow carried before)."""
    flows, psns = {}, defaultdict(set)
    for r in records:
        h = tf.roce_v2(r.frame)
        name = f"{'.'.join(map(str, h.src))}>{'.'.join(map(str, h.dst))}:0x{h.dest_qp:06x}"
        f = flows.setdefault(name, {"packets": 0, "data_packets": 0, "naks": 0, "resent": 0})
        f["packets"] += 1
        if h.opcode == ib.ACKNOWLEDGE:
            f["naks"] += r.frame[h.bth + 12] >> 5 == 3
            continue
        if h.opcode == ib.CNP:
            continue
        f["data_packets"] += 1
        f["resent"] += h.psn in psns[name]
        psns[name].add(h.psn)
    return flows


def _counts_only(truth_flows: dict) -> dict:
    keys = ("packets", "data_packets", "naks", "resent")
    return {name: {k: f[k] for k in keys} for name, f in truth_flows.items()}


# ---- both scenarios ------------------------------------------------------------------------------
def test_the_scenarios_expect_their_loss_and_the_capture_point_kinds():
    assert {"capture_points", "clock_skew"} <= set(ALL_KINDS)
    assert SCENARIOS["two-point-mirror"].expected == ("network_loss", "capture_points")
    assert SCENARIOS["tap-skew"].expected == ("network_loss", "clock_skew")
    assert "timeout_retransmit" in SCENARIOS["two-point-mirror"].forbidden   # a copy is no resend


# ---- two-point-mirror ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed, mirror", RUNS)
def test_two_point_mirror_has_every_frame_twice_at_the_offset_of_its_direction(tmp_path, seed, mirror):
    truth, records = _records(tmp_path, "two-point-mirror", seed, mirror)
    points = truth.capture_points
    assert points["offsets_ns"] == {FORWARD: 3_700, BACKWARD: -1_300} and points["copies_per_frame"] == 2
    assert all(tf.roce_v2(r.frame) for r in records) and points["link_local_frames"] == 0
    pairs = _pairs(records)
    assert len(pairs) * 2 == len(records) == points["frames_per_point"] * 2
    for copies in pairs:
        assert len(copies) == 2
        (up, uh), (down, dh) = sorted(copies, key=lambda c: -_ttl(*c))
        assert _ttl(up, uh) == _ttl(down, dh) + 1           # the downstream copy: one hop more
        direction = _direction(uh)
        receiver_leaf, sender_leaf = (down, up) if direction == FORWARD else (up, down)
        assert receiver_leaf.ts - sender_leaf.ts == points["offsets_ns"][direction]
        for r, h in copies:    # same IP ID, UDP source port and ICRC; each copy valid on its own
            assert ipv4_checksum(r.frame[h.ip:h.udp]) == 0 and spec_icrc_ok(r.frame)
        assert up.frame[uh.end - 4:uh.end] == down.frame[dh.end - 4:dh.end]


@pytest.mark.parametrize("seed, mirror", RUNS)
def test_two_point_mirror_each_point_alone_sees_every_request_before_its_ack(tmp_path, seed, mirror):
    """The fabric between the leaves is as long as the offsets say: at either point an ACK comes
    after the request packet whose PSN it names (a READ request names a range). NAKs are left out:
    with the points after the loss point (mirror receiver) a NAK names a PSN neither point saw."""
    _, records = _records(tmp_path, "two-point-mirror", seed, mirror)
    for point in _points(records):
        seen = set()
        for r in point:
            h = tf.roce_v2(r.frame)
            if h.opcode == ib.RDMA_READ_REQUEST:   # its responses take ceil(DMA length / PMTU 1024) PSNs
                dma_length = int.from_bytes(r.frame[h.bth + 24:h.bth + 28], "big")
                seen.update((h.psn + k) & ib.PSN_MASK for k in range(max(1, -(-dma_length // 1024))))
            elif h.opcode < ib.RDMA_READ_REQUEST:
                seen.add(h.psn)
            elif h.opcode == ib.ACKNOWLEDGE and r.frame[h.bth + 12] >> 5 == 0:
                assert h.psn in seen, f"ACK of PSN {h.psn} before the request at {r.ts}"


@pytest.mark.parametrize("seed, mirror", RUNS)
def test_two_point_mirror_truth_counts_are_what_either_point_alone_shows(tmp_path, seed, mirror):
    truth, records = _records(tmp_path, "two-point-mirror", seed, mirror)
    flows = _counts_only(truth.capture_points["flows"])
    sender_leaf, receiver_leaf = _points(records)
    assert _one_point_counts(sender_leaf) == _one_point_counts(receiver_leaf) == flows
    both = _one_point_counts(records)
    assert {name: f["packets"] for name, f in both.items()} == {name: 2 * f["packets"] for name, f in flows.items()}
    requests = [f for name, f in flows.items() if name.startswith(FORWARD)]
    assert sum(f["naks"] for f in flows.values()) == truth.counters["naks_seq_sent"] > 0
    if mirror == "sender":     # the points are before the loss point: every resend of the requester
        assert sum(f["resent"] for f in requests) == truth.counters["retransmitted_packets"] > 0


def test_two_point_mirror_seed_0_numbers(tmp_path):
    """The numbers captures/README.md quotes for the sample."""
    truth, records = _records(tmp_path, "two-point-mirror", 0)
    points = truth.capture_points
    assert (len(records), points["path_ns"], points["clock_offset_ns"]) == (474, 2_500, 1_200)
    assert truth.counters["dropped_switch"] == 10 and truth.counters["naks_seq_sent"] == 6
    assert points["rtt"]["rtt_p50_ns"] == 6918


# ---- tap-skew ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_tap_skew_stamps_the_receiver_direction_3_us_early_and_duplicates_nothing(tmp_path, seed):
    """network-loss at the same seed is the same run at the same point with one true clock."""
    truth, records = _records(tmp_path, "tap-skew", seed)
    skew = truth.capture_points["clock_skew_ns"]
    assert skew == {FORWARD: 0, BACKWARD: -3_000} and truth.capture_points["copies_per_frame"] == 1
    same_run = generate("network-loss", seed=seed)
    true_ts = dict(zip(same_run.frame_list(), same_run.ts_ns.tolist()))
    frames = [r.frame for r in records]
    assert len(set(frames)) == len(frames) == len(true_ts) == truth.capture_points["frames_per_point"]
    for r in records:
        assert r.ts - true_ts[r.frame] == skew[_direction(tf.roce_v2(r.frame))]
    rtt = truth.capture_points["rtt"]
    assert rtt["rtt_samples"] > 0 and rtt["rtt_p50_ns_as_stamped"] == rtt["rtt_p50_ns"] - 3_000


@pytest.mark.parametrize("seed", range(3))
def test_tap_skew_truth_counts_are_what_the_tap_shows(tmp_path, seed):
    truth, records = _records(tmp_path, "tap-skew", seed)
    flows = _counts_only(truth.capture_points["flows"])
    assert _one_point_counts(records) == flows
    assert sum(f["naks"] for f in flows.values()) == truth.counters["naks_seq_sent"] > 0
    assert sum(f["resent"] for name, f in flows.items() if name.startswith(FORWARD)) \
        == truth.counters["retransmitted_packets"] > 0


def test_tap_skew_seed_0_numbers():
    """The numbers captures/README.md quotes for the sample: an ACK stamped before its request."""
    truth = generate("tap-skew", seed=0).truth
    assert truth.capture_points["rtt"] == {"rtt_samples": 38, "rtt_p50_ns": 1829, "rtt_p50_ns_as_stamped": -1171}
    assert (truth.counters["dropped_switch"], truth.counters["naks_seq_sent"]) == (10, 6)


def test_the_ttl_edit_keeps_the_ipv4_checksum_valid():
    from roceview.generate.capture_points import ttl_minus_one

    cap = generate("network-loss", seed=0)
    frame = cap.frame_list()[0]
    edited = ttl_minus_one(frame)
    h = tf.roce_v2(edited)
    assert edited[h.ip + 8] == frame[h.ip + 8] - 1 and ipv4_checksum(edited[h.ip:h.udp]) == 0
    assert struct.unpack("!H", edited[h.ip + 10:h.ip + 12]) != struct.unpack("!H", frame[h.ip + 10:h.ip + 12])
