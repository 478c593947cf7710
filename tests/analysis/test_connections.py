"""connections.csv's collector (roceview/analysis/connections.py): one row per CM connection,
on the real RDMA CM captures and on CM exchanges crafted with the scapy layers (a retried REQ,
an MRA, a REJ, a REQ nobody answers, a REP nobody answers, DREQ/DREP, a REP whose REQ went by
before the capture), fed batch by batch as the analysis feeds its collectors."""
from __future__ import annotations


import numpy as np
import pytest
from conftest import REAL
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from dissectors import cm
from dissectors import scapy_layers as S
from roceview.analysis.connections import CONNECTION_COLUMNS, ConnectionLog, flow_connections
from roceview.analysis.tables import Table
from roceview.capture.writer import write_pcap
from roceview.packets.read import iter_batches

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
CLIENT, SERVER = "10.9.0.1", "10.9.0.2"
NVMF_SID = 0x0000000001061144


def _frame(short: str, src: str, dst: str, tid: int, **fields) -> bytes:
    attr = cm.ATTR[short]
    pkt = Ether() / IP(src=src, dst=dst) / UDP(sport=49152, dport=4791) / S.BTH(opcode=0x64, destqp=1) / \
        S.DETH(qkey=0x80010000, srcqp=1) / S.MAD(attributeid=attr, transactionid=tid) / S.CM_CLASSES[short](**fields)
    return bytes(S.with_icrc(pkt))


def _req(comm=0x11, qpn=0x101, psn=500, tid=1, **kw):
    fields = dict(localcommid=comm, serviceid=NVMF_SID, localqpn=qpn, startpsn=psn, responderres=16, initdepth=8,
                  retrcount=7, rnrretrcount=6, pppmtu=4, prim_localacktout=18, remoteresptout=16, localresptout=14,
                  maxcmretr=15)
    return _frame("REQ", CLIENT, SERVER, tid, **(fields | kw))


def _rep(comm=0x22, remote=0x11, qpn=0x202, psn=900, tid=1):
    return _frame("REP", SERVER, CLIENT, tid, localcommid=comm, remotecommid=remote, localqpn=qpn, startpsn=psn,
                  respres=4, initdepth=2, tgtackdelay=15, rnrretrcount=5)


def _from_client(short, comm=0x11, remote=0x22, tid=2, **kw):
    return _frame(short, CLIENT, SERVER, tid, localcommid=comm, remotecommid=remote, **kw)


def _from_server(short, comm=0x22, remote=0x11, tid=3, **kw):
    return _frame(short, SERVER, CLIENT, tid, localcommid=comm, remotecommid=remote, **kw)


def _other(k: int) -> bytes:
    """Traffic that is no MAD (an RC SEND): the capture going on."""
    pkt = Ether() / IP(src=CLIENT, dst=SERVER) / UDP(sport=49152, dport=4791) / S.BTH(opcode=0x04, destqp=0x202, psn=k)
    return bytes(S.with_icrc(pkt / bytes(64)))


def _rows(tmp_path, timed: list[tuple[int, bytes]], chunk: int = 1 << 16, **kw) -> list[dict]:
    """The collector's rows for frames at T0 + ms (fed in batches of `chunk` packets)."""
    frames = [f for _, f in timed]
    path = tmp_path / "cm.pcap"
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames],
               [T0 + int(ms * MS) for ms, _ in timed])
    log = ConnectionLog(**kw)
    for batch in iter_batches([str(path)], chunk_packets=chunk, prefetch=False):
        log.feed(batch)
    table = log.table()
    assert table.columns == CONNECTION_COLUMNS
    return table.records() if len(table) else []


def test_a_handshake_gives_one_established_connection_with_what_both_sides_agreed(tmp_path):
    rows = _rows(tmp_path, [(0, _req()), (1.5, _rep()), (2, _from_client("RTU"))])
    assert len(rows) == 1
    r = rows[0]
    assert (r["client_ip"], r["server_ip"], r["client_comm_id"], r["server_comm_id"]) == \
        (CLIENT, SERVER, "0x00000011", "0x00000022")
    assert (r["service_id"], r["service"], r["client_qp"], r["server_qp"]) == \
        ("0x0000000001061144", "NVMe-oF", "0x000101", "0x000202")
    assert (r["client_start_psn"], r["server_start_psn"], r["path_mtu"]) == (500, 900, 2048)
    assert r["local_ack_timeout_us"] == pytest.approx(4.096 * 2 ** 18)
    assert r["client_local_ack_timeout_us"] == pytest.approx(4.096 * 2 ** cm.ack_timeout(15, 17))
    assert (r["retry_count"], r["rnr_retry_count"], r["client_rnr_retry_count"]) == (7, 6, 5)
    # the client's READ depth is the REP's responder resources, what it takes the REP's initiator depth
    assert (r["initiator_depth"], r["responder_resources"]) == (4, 2)
    assert (r["req_ts"], r["rep_ts"], r["rtu_ts"]) == (f"{T0 // 10**9}.000000000", f"{T0 // 10**9}.001500000",
                                                       f"{T0 // 10**9}.002000000")
    assert r["setup_us"] == pytest.approx(2000.0) and r["state"] == "established"
    assert (r["req_frame"], r["rep_frame"], r["rtu_frame"], r["reject_frame"]) == (1, 2, 3, None)


def test_a_resent_req_is_counted_and_setup_starts_at_the_first(tmp_path):
    rows = _rows(tmp_path, [(0, _req(tid=7)), (70, _req(tid=7)), (140, _req(tid=7)), (141, _rep(tid=7)),
                            (142, _from_client("RTU"))], chunk=2)
    assert len(rows) == 1 and rows[0]["req_retries"] == 2 and rows[0]["setup_us"] == pytest.approx(142_000)


def test_an_mra_then_the_answer(tmp_path):
    rows = _rows(tmp_path, [(0, _req()), (1, _from_server("MRA", comm=0x22, remote=0x11, msgmraed=0, svctimeout=20)),
                            (30, _rep()), (31, _from_client("RTU"))])
    assert rows[0]["mra_count"] == 1 and rows[0]["state"] == "established"


def test_an_mra_of_the_rep_is_counted_as_the_clients(tmp_path):
    """MsgMRAed 1: the client asks the server to wait longer for its RTU (IBTA 12.6.6)."""
    rows = _rows(tmp_path, [(0, _req()), (1, _rep()), (2, _from_client("MRA", msgmraed=1, svctimeout=20)),
                            (40, _from_client("RTU")), (41, _other(1))])
    assert (rows[0]["mra_count"], rows[0]["client_mra_count"], rows[0]["state"]) == (1, 1, "established")
    rows = _rows(tmp_path, [(0, _req()), (1, _from_server("MRA", msgmraed=0, svctimeout=20)), (30, _rep()),
                            (31, _from_client("RTU"))])
    assert (rows[0]["mra_count"], rows[0]["client_mra_count"]) == (1, 0)


def test_a_rejected_req_names_its_reason(tmp_path):
    rows = _rows(tmp_path, [(0, _req()), (0.2, _from_server("REJ", comm=0, remote=0x11, msgrej=0, reason=8))])
    r = rows[0]
    assert (r["state"], r["reject_reason"], r["reject_frame"]) == ("rejected", "Invalid service ID (8)", 2)
    assert r["server_qp"] is None and r["setup_us"] is None


def test_a_req_nobody_answers_times_out_once_its_response_timeout_went_by(tmp_path):
    # remote CM response timeout 16: 4.096 us x 2^16 = 268 ms; the capture goes on 1 s
    late = _rows(tmp_path, [(0, _req()), (1000, _other(1))])
    assert late[0]["state"] == "timed_out" and late[0]["rep_ts"] is None
    soon = _rows(tmp_path, [(0, _req()), (100, _other(1))])
    assert soon[0]["state"] == "incomplete"


def test_a_rep_without_rtu_times_out_on_the_reqs_local_response_timeout(tmp_path):
    # local CM response timeout 14: 67 ms
    assert _rows(tmp_path, [(0, _req()), (1, _rep()), (500, _other(1))])[0]["state"] == "timed_out"
    assert _rows(tmp_path, [(0, _req()), (1, _rep()), (20, _other(1))])[0]["state"] == "incomplete"


def test_either_side_disconnects(tmp_path):
    for dreq, drep in ((_from_server("DREQ", remoteqpneecn=0x101), _from_client("DREP")),
                       (_from_client("DREQ", remoteqpneecn=0x202), _from_server("DREP"))):
        rows = _rows(tmp_path, [(0, _req()), (1, _rep()), (2, _from_client("RTU")), (50, dreq), (51, drep)])
        assert len(rows) == 1
        assert (rows[0]["state"], rows[0]["disconnect_ts"], rows[0]["disconnect_frame"]) == \
            ("disconnected", f"{T0 // 10**9}.050000000", 4)


def test_a_rep_whose_req_went_by_before_the_capture(tmp_path):
    rows = _rows(tmp_path, [(0, _rep()), (1, _from_client("RTU"))])
    assert len(rows) == 1
    r = rows[0]
    assert (r["client_ip"], r["client_comm_id"], r["server_qp"], r["client_qp"]) == (CLIENT, "0x00000011", "0x000202",
                                                                                     None)
    assert r["state"] == "established" and r["req_ts"] is None and r["setup_us"] is None


def test_ids_used_again_after_a_reject_open_a_new_connection(tmp_path):
    rows = _rows(tmp_path, [(0, _req(tid=1)), (1, _from_server("REJ", comm=0, remote=0x11, reason=28)),
                            (10, _req(tid=2)), (11, _rep(tid=2)), (12, _from_client("RTU"))])
    assert [r["state"] for r in rows] == ["rejected", "established"]
    assert rows[0]["reject_reason"] == "Consumer reject (28)" and rows[1]["req_retries"] == 0


def test_memory_grows_with_connections_not_packets_and_is_bounded(tmp_path):
    timed = [(k * 0.01, _req(tid=5)) for k in range(200)] + [(3 + k * 0.01, _other(k)) for k in range(200)]
    assert len(_rows(tmp_path, timed, chunk=64)) == 1            # 200 REQs of one connection: one row
    many = [(k, _req(comm=0x100 + k, tid=k)) for k in range(5)]
    log_rows = _rows(tmp_path, many, max_connections=3)
    assert len(log_rows) == 3


def test_the_same_rows_whatever_the_batches(tmp_path):
    timed = [(0, _req()), (0.5, _from_server("MRA", msgmraed=0)), (1, _rep()), (2, _from_client("RTU")),
             (3, _other(1)), (9, _from_client("DREQ")), (10, _from_server("DREP"))]
    assert _rows(tmp_path, timed, chunk=1) == _rows(tmp_path, timed) == _rows(tmp_path, timed, chunk=3)


EXPECTED = {   # what the real captures' handshakes say (their REQ/REP fields equal tshark's: tests/commands)
    "magnate3_rocev2_mlx5_send_rdma-cm.pcap": [("172.17.242.47", "0x00013a", "0x00016a", "TCP port 12345", 1024,
                                                "disconnected", 7202.0)],
    "magnate3_rocev2_mlx5_nvmeof-discover_rdma-cm.pcap": [("2.2.2.1", "0x0000dc", "0x00008d", "NVMe-oF", 1024,
                                                           "disconnected", 5925.0)],
    "magnate3_native-ib_ibdump-erf_rc-send.pcap": [("lid:0x0012", "0x000029", "0x000029", "TCP port 7174", 4096,
                                                    "disconnected", 3067.024)],
    "rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap": [
        ("lid:0x0004", "0x870408", "0xfc0407", "IPoIB connected mode", 2048, "established", 410.602),
        ("lid:0x0002", "0x6c004a", "0x890407", "IPoIB connected mode", 2048, "established", 322.036),
        ("lid:0x0004", "0x890408", "0x6c004b", "IPoIB connected mode", 2048, "established", 500.426)],
    "sanderw71-softroce_rocev2_custom-responder-psn-bug_stall_mixed-lan.pcapng": [
        ("192.168.178.23", "0x000019", "0x000019", "TCP port 7174", 1024, "established", 3618.184)],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_real_captures_connections(name):
    path = REAL / name
    if not path.exists():
        pytest.skip("real captures absent")
    log = ConnectionLog()
    for batch in iter_batches([str(path)], prefetch=False):
        log.feed(batch)
    rows = log.table().records()
    got = [(r["client_ip"], r["client_qp"], r["server_qp"], r["service"], r["path_mtu"], r["state"],
            round(r["setup_us"], 3)) for r in rows]
    assert got == EXPECTED[name]
    # each connection names two QP directions: the client's flow to the server's QP, and back
    c = log.table().data
    sides = [(side, c["connection"][i]) for i in range(len(rows))
             for side in ((c["client_ip"][i], c["server_ip"][i], int(c["server_qp"][i])),
                          (c["server_ip"][i], c["client_ip"][i], int(c["client_qp"][i])))]
    flows = Table(("src_ip", "dst_ip", "dest_qp"), {"src_ip": [s for (s, _, _), _ in sides],
                                                    "dst_ip": [d for (_, d, _), _ in sides],
                                                    "dest_qp": np.array([q for (_, _, q), _ in sides], np.int64)})
    assert flow_connections(flows, log.table()) == [c for _, c in sides]


def test_the_qp_table_can_name_each_qps_connection():
    """The analysis's flows of the RDMA CM capture: its two RC flows are the connection's."""
    path = REAL / "magnate3_rocev2_mlx5_send_rdma-cm.pcap"
    if not path.exists():
        pytest.skip("real captures absent")
    import roceview

    log = ConnectionLog()
    for batch in iter_batches([str(path)], prefetch=False):
        log.feed(batch)
    table = roceview.analyze(str(path)).flows_table
    flows, names = table.data, flow_connections(table, log.table())
    conn = "172.17.242.47>172.17.242.56#0x72ef7529"
    assert log.table().records()[0]["connection"] == conn
    assert dict(zip(flows["flow"], names)) == {"172.17.242.47>172.17.242.56:0x00016a": conn,
                                                "172.17.242.56>172.17.242.47:0x00013a": conn,
                                                "172.17.242.47>172.17.242.56:0x000001": "",
                                                "172.17.242.56>172.17.242.47:0x000001": ""}
