"""read_depth_limited: READs held at the initiator depth RDMA CM negotiated are reported, with
the READs that waited as frames; healthy traffic is not, nor 4 KiB READs at path MTU 4096, nor
any sample or real capture. The negotiated depth comes from the connections table (the CM
decode's connections.csv); these tests give each result one built from what the REQ says (the
generator's REQ: initiator depth and responder resources 16)."""
from __future__ import annotations

import numpy as np
import pytest

import roceview
from roceview.analysis.tables import Table
from roceview.diagnose import find
from roceview.diagnose.read_depth import negotiated_depth
from roceview.generate import generate, write_capture

CONNECTIONS = ("client_ip", "server_ip", "client_qp", "server_qp", "initiator_depth", "responder_resources")


def with_connections(result, qps: list[tuple], depth: int = 16):
    """qps: (client ip, server ip, client QPN, server QPN) of each connection."""
    result.connections_table = Table(CONNECTIONS, {
        "client_ip": [q[0] for q in qps], "server_ip": [q[1] for q in qps],
        "client_qp": np.array([q[2] for q in qps], np.int64), "server_qp": np.array([q[3] for q in qps], np.int64),
        "initiator_depth": np.full(len(qps), depth, np.int64), "responder_resources": np.full(len(qps), depth, np.int64)})
    return result


def truth_qps(cap) -> list[tuple]:
    return [(q["requester"], q["responder"], q["requester_qpn"], q["responder_qpn"]) for q in cap.truth.qps]


def every_flow_qps(result) -> list[tuple]:
    """A connection for every QP pair of the capture, as if RDMA CM had set each up."""
    d = result.flows_table.data
    return [(s, t, int(p), int(q)) for s, t, q, p in zip(d["src_ip"], d["dst_ip"], d["dest_qp"], d["peer_qp"])
            if p >= 0]


def kinds(records) -> list[str]:
    return [r["kind"] for r in records]


def analyzed(tmp_path, name, seed=0, scale=1.0):
    cap = generate(name, seed=seed, scale=scale)
    path = tmp_path / f"{name}.pcap"
    write_capture(cap, path)
    return cap, roceview.analyze(path)


def test_reads_held_at_the_negotiated_initiator_depth_are_reported(tmp_path):
    cap, result = analyzed(tmp_path, "read-depth-limit")
    conn = result.connections_table.data                               # from the capture's REQ/REP/RTU
    assert (conn["initiator_depth"].tolist(), conn["responder_resources"].tolist()) == ([16], [16])
    (f,) = [r for r in find(result) if r["kind"] == "read_depth_limited"]
    flow = "{}>{}:0x{:06x}".format(*[truth_qps(cap)[0][k] for k in (0, 1, 3)])
    assert f["severity"] == "warning" and flow in f["flows"].split(";")
    assert "initiator depth of 16" in f["summary"] and "READ depth reached 16" in f["evidence"]
    waited = int(f["evidence"].split(" of them started with 12")[0].split(", ")[-1])
    assert waited > 90
    # its frames: the READ requests that started with 12 or more in flight, every one counted
    ops = result.ops
    held = sorted(ops[(ops["flow"] == flow) & (ops["op"] == "READ") & (ops["outstanding"] >= 12)]["first_frame"])
    listed = [int(x) for x in f["frames"].split(";")]
    assert int(f["frame_count"]) == waited == len(held) and set(listed) <= set(held)
    assert listed[0] == held[0] and listed[-1] == held[-1]
    assert "max_rd_atomic" in f["advice"] and "responder_resources" in f["advice"]
    assert [r for r in find(with_connections(result, truth_qps(cap))) if r["kind"] == "read_depth_limited"] == [f]
    # no CM depth known: nothing said; a larger depth than the requester ever reached: not limited by it
    assert "read_depth_limited" not in kinds(find(with_connections(result, [])))
    assert "read_depth_limited" not in kinds(find(with_connections(result, truth_qps(cap), depth=32)))


def test_4kib_reads_at_mtu_4096_are_not_depth_limited(tmp_path):
    cap, result = analyzed(tmp_path, "pmtu-4096-cm", scale=20)
    reads = result.ops_table.data
    assert sum(1 for op, b in zip(reads["op"], reads["bytes"]) if op == "READ" and b == 4096) >= 100
    assert "read_depth_limited" not in kinds(find(with_connections(result, truth_qps(cap))))


def check_silent(path) -> None:
    result = roceview.analyze(path, warn=lambda m: None)
    assert "read_depth_limited" not in kinds(find(with_connections(result, every_flow_qps(result))))


def test_silent_on_every_sample(sample_capture):
    if sample_capture.name == "read-depth-limit.pcap":      # the one sample made to show it
        pytest.skip("the read-depth-limit sample shows read_depth_limited by design")
    check_silent(sample_capture)


def test_silent_on_every_real_capture(real_capture):
    check_silent(real_capture)


@pytest.mark.parametrize("bad", [None, -1, "", "x"])
def test_an_unknown_depth_or_qp_is_left_out(bad):
    table = Table(CONNECTIONS, {"client_ip": ["10.0.0.1"], "server_ip": ["10.0.0.2"], "client_qp": [7],
                                "server_qp": [bad], "initiator_depth": [4], "responder_resources": [bad]})
    result = type("R", (), {"connections_table": table})()
    assert negotiated_depth(result) == {}
