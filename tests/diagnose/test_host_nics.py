"""Which source MACs are RoCE host NICs (Context.host_macs): on a routed switch the frames a
switch port forwards carry that port's MAC and one TTL (hop limit) less than their sender gave
them, so a port that forwards one peer's frames is no NIC of that peer; a NIC's own frames keep
their sender's initial TTL. The PFC rules read the pausing MAC's owner from it: a switch port
taken for the peer's NIC made its pauses a false slow_receiver."""
from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np
import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import one
from roceview.diagnose.host_nics import routed_ttl
from roceview.generate import Capture, write_capture
from roceview.generate.network import Network, NetworkSettings
from roceview.generate.qp import QpSettings, Workload
from roceview.generate.switch import SwitchSettings
from roceview.generate.truth import Truth

PORT = "0e:5c:00:00:ff:10"           # the routed ToR's port toward 10.0.0.1
NIC = "0e:c0:de:00:00:11"            # 10.0.0.2's NIC


def _pair(routed: bool, mirrored: tuple, receiver_slow: bool, seed: int = 0, ttl: int = 64) -> Capture:
    """10.0.0.1 writes to 10.0.0.2 over one switch (no ECN marking); the mirror is the links of
    `mirrored`. Either 10.0.0.2's NIC drains slowly and pauses its link itself, or the switch
    pauses priority 3 toward 10.0.0.1 four times (the switch's own pauses, no host's)."""
    truth = Truth(scenario="pair", seed=seed)
    settings = NetworkSettings(hosts=2, until_ms=50, switch=SwitchSettings(ecn_marking=False), routed=routed)
    net = Network(settings, np.random.default_rng(seed), truth)
    if ttl != 64:                                   # every host's stack starts its frames at `ttl`
        net.addr = net.mirror.addr = dataclasses.replace(net.addr, ttl=ttl)
    net.connect(0, 1, Workload([("WRITE", 12_000)] * 12, qd=2), QpSettings(window=16))
    if receiver_slow:
        net.slow_receiver(1, drain_gbps=25.0, xoff_bytes=12_000, xon_bytes=6_000)
    else:
        net.pause_cycles(0, 3, first_ns=10_000, period_ns=20_000, hold_ns=5_000, count=4)
    net.mirror_links(list(mirrored))
    return Capture(*net.run(), truth)


@lru_cache(maxsize=None)
def _path(routed: bool, mirrored: tuple, receiver_slow: bool) -> str:
    import tempfile

    path = f"{tempfile.mkdtemp(prefix='host-nics-')}/pair.pcap"
    write_capture(_pair(routed, mirrored, receiver_slow), path)
    return path


def _analyzed(path: str) -> list[dict]:
    """The findings as `roceview analyze` gives them (the API: its own decode projection)."""
    import roceview

    return roceview.analyze(path).findings.astype(str).to_dict("records")


def test_a_switch_port_forwarding_one_peer_on_a_routed_link_is_no_slow_receiver():
    """One host pair across a routed switch, mirrored on 10.0.0.1's link: the switch port sends
    10.0.0.2's frames (one address, one MAC, as a NIC would) at TTL 63; its pauses are the
    switch's, not 10.0.0.2 pausing."""
    path = _path(True, (0,), False)
    for found in (findings_of(path), _analyzed(path)):
        assert "slow_receiver" not in kinds(found), show(found)
        pause = one(found, "pfc_pause")
        assert pause["summary"].startswith(f"{PORT} paused priority 3"), pause["summary"]


@pytest.mark.parametrize("routed,mirrored", [(True, (1,)), (False, (1,))], ids=["routed", "bridged"])
def test_the_receivers_own_nic_pausing_is_still_a_slow_receiver(routed, mirrored):
    path = _path(routed, mirrored, True)
    for found in (findings_of(path), _analyzed(path)):
        f = one(found, "slow_receiver")
        assert f["summary"].startswith(f"The receiver 10.0.0.2 paused the link itself (1 PFC pause on priority 3 "
                                       f"from its NIC {NIC})"), f["summary"]


def test_a_nic_is_a_host_though_a_switch_port_on_another_mirrored_link_forwards_its_address():
    """Both links of a routed pair mirrored: 10.0.0.2's address comes from its NIC (TTL 64) and
    from the switch port on 10.0.0.1's link (TTL 63); the port forwards, so the NIC is still the
    one MAC that sends as 10.0.0.2, and its pauses are a slow receiver."""
    found = findings_of(_path(True, (0, 1), True))
    f = one(found, "slow_receiver")
    assert f"from its NIC {NIC}" in f["summary"], f["summary"]


@pytest.mark.parametrize("ttl,routed", [(64, False), (255, False), (128, False), (63, True), (254, True),
                                        (127, True), (56, True), (55, False), (247, True), (1, False),
                                        (0, False), (32, False), (100, False), (-1, False)])
def test_a_ttl_a_few_hops_below_a_usual_initial_value_is_routed(ttl, routed):
    """Hosts start at 64 (Linux, rxe, mlx5), 255 or 128; up to 8 routed hops below is routed;
    anything else (an unusual initial value, no TTL: -1) is taken as a sender's own."""
    assert routed_ttl(np.array([ttl])).tolist() == [routed]


def test_hosts_that_all_start_their_frames_a_few_below_64_keep_their_nics(tmp_path):
    """A stack set to start at 60 on every host (bridged, the receiver pausing): no frame on the
    capture carries more, so 60 is what the hosts send at, not a router's 64 - 4, and the
    receiver's own pauses stay a slow_receiver (they were read as the fabric's, pfc_without_ecn)."""
    path = tmp_path / "ttl60.pcap"
    write_capture(_pair(False, (0, 1), True, ttl=60), path)
    assert "slow_receiver" in {f["kind"] for f in _analyzed(str(path))}
