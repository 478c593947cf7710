"""analyze names each CM connection: connections.csv / --json "connections" / result.connections,
the `connection` of each QP in qps.csv, a Connections section in the report; the Dask engine,
whose partitions see a REQ and its REP apart, gives the same rows."""
from __future__ import annotations

import pytest
from conftest import REAL

import roceview
from helpers.cli import run

CM_CAPTURES = ("magnate3_rocev2_mlx5_send_rdma-cm.pcap", "magnate3_rocev2_mlx5_nvmeof-discover_rdma-cm.pcap",
               "rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap")


def _capture(name: str):
    path = REAL / name
    if not path.exists():
        pytest.skip(f"{path} is absent (the real captures are in ../shared)")
    return path


@pytest.mark.parametrize("name", CM_CAPTURES)
def test_each_qp_of_a_cm_connection_names_it(name):
    result = roceview.analyze([str(_capture(name))])
    conns = result.connections_table
    assert len(conns) >= 1
    flows = result.flows_table.data
    named = {(s, d, int(q)): c for s, d, q, c in zip(flows["src_ip"], flows["dst_ip"], flows["dest_qp"],
                                                     flows["connection"]) if c}
    for i in range(len(conns)):
        c = {k: conns.data[k][i] for k in conns.columns}
        if int(c["server_qp"]) >= 0 and (c["client_ip"], c["server_ip"], int(c["server_qp"])) in named:
            assert named[(c["client_ip"], c["server_ip"], int(c["server_qp"]))] == c["connection"]
    assert set(named.values()) <= set(conns.data["connection"]) and named
    # the QP1 datagrams of the handshake are no connection's QPs
    assert all(q != 1 for (_, _, q) in named)


def test_connections_csv_json_and_report(tmp_path):
    path = _capture(CM_CAPTURES[0])
    code, out, err = run("analyze", path, "--csv", tmp_path / "csv", "--json", tmp_path / "r.json")
    assert code == 0, err
    text = (tmp_path / "csv" / "connections.csv").read_text().splitlines()
    assert text[0].startswith("connection,client_ip,server_ip") and len(text) == 2
    assert "172.17.242.47>172.17.242.56#0x72ef7529" in text[1] and ",disconnected," in text[1]
    import json

    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["connections"][0]["connection"] == "172.17.242.47>172.17.242.56#0x72ef7529"
    assert "Connections (1 RDMA CM connection)" in out
    assert "172.17.242.47>172.17.242.56#0x72ef7529  TCP port 12345  QPs 0x00013a <> 0x00016a  MTU 1024" in out


def test_no_connections_section_without_cm(tmp_path):
    code, out, err = run("analyze", "captures/network-loss.pcap", "--csv", tmp_path)
    assert code == 0 and "Connections" not in out
    assert (tmp_path / "connections.csv").read_text().startswith("connection,")
