"""CM MADs decoded into the packets table from the declarations (dissectors/cm.py): every
message over RoCEv2 (IPv4, IPv6), RoCEv1 and native IB, crafted with the scapy layers derived
from the same declarations; the real RDMA CM capture against the values tshark shows; MADs cut
short; a batch without a MAD costs no column memory; IEEE 802.3 frames' LLC and STP fields."""
from __future__ import annotations

import ipaddress

import numpy as np
import pandas as pd
import pytest
from conftest import REAL
from helpers import cm_frames

import roceview
from dissectors import cm, ethernet
from dissectors import scapy_layers as S

SEND_CM = REAL / "magnate3_rocev2_mlx5_send_rdma-cm.pcap"
STP_LAN = REAL / "sanderw71-softroce_rocev2_custom-responder-rping-failure_mixed-lan.pcapng"


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    frames = cm_frames.build()
    path = cm_frames.write(tmp_path_factory.mktemp("cm") / "cm.pcapng", frames)
    return frames, roceview.read_packets(str(path))


def _cell(df: pd.DataFrame, i: int, name: str):
    v = df[name].iloc[i]
    return None if pd.isna(v) else v


def test_every_message_fills_its_columns_on_every_transport(crafted):
    frames, df = crafted
    assert len(df) == len(frames) == len(cm_frames.TRANSPORTS) * (len(cm.MESSAGES) + 2)
    columns = sorted({f.column for h in cm.HEADERS for f in h.columns})
    for i, frame in enumerate(frames):
        header = cm.MESSAGES[cm.ATTR[frame.message]].header
        mine = {f.column: frame.fields[f.name] for f in header.columns}
        assert _cell(df, i, "mad_class") == cm.MGMT_CLASS_CM and _cell(df, i, "mad_tid") == 0x1000 + i
        assert _cell(df, i, "cm_message") == cm.ATTRIBUTE_NAMES[cm.ATTR[frame.message]], frame.transport
        for column in columns:
            assert _cell(df, i, column) == mine.get(column), (frame.transport, frame.message, column)


def test_the_real_rdma_cm_exchange_reads_as_tshark_shows_it():
    """magnate3 send: REQ, REP, RTU, DREQ, DREP (values from tshark -T fields, infiniband.cm.*)."""
    if not SEND_CM.exists():
        pytest.skip("real captures absent")
    df = roceview.read_packets(str(SEND_CM))
    cmf = df[df["mad_class"].notna()]
    assert cmf["frame"].tolist() == [1, 2, 3, 8, 9]
    assert cmf["cm_message"].tolist() == ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest",
                                          "DisconnectReply"]
    assert (cmf["mad_tid"] == 0x0000000B2975EF72).all()
    req, rep, _, dreq, _ = (cmf.iloc[k] for k in range(5))
    assert (req.cm_local_comm_id, req.cm_local_qpn, req.cm_start_psn) == (0x72EF7529, 0x13A, 0xB2EF85)
    assert (req.cm_service_id, req.cm_path_mtu, req.cm_local_ack_timeout) == (0x0000000001063039, 3, 0x13)
    assert (req.cm_remote_cm_response_timeout, req.cm_max_cm_retries, req.cm_retry_count) == (0x16, 15, 0)
    assert (rep.cm_local_comm_id, rep.cm_remote_comm_id, rep.cm_local_qpn) == (0xD05B8B76, 0x72EF7529, 0x16A)
    assert (rep.cm_start_psn, rep.cm_target_ack_delay, rep.cm_rnr_retry_count) == (0x424B71, 0x10, 0)
    assert (dreq.cm_local_comm_id, dreq.cm_remote_qpn) == (0x72EF7529, 0x16A)
    assert pd.isna(rep.cm_service_id) and pd.isna(dreq.cm_start_psn)


def test_a_mad_cut_short_keeps_the_fields_it_holds(tmp_path):
    frames = [f for f in cm_frames.build() if f.transport == "rocev2-ipv4" and f.message == "REQ"][:1]
    # Ether 14 + IPv4 20 + UDP 8 + BTH 12 + DETH 8 = 62: the MAD header and the REQ's first 40 bytes
    cut = cm_frames.CMFrame(frames[0].data[:62 + 24 + 40], "rocev2-ipv4", "REQ")
    df = roceview.read_packets(str(cm_frames.write(tmp_path / "cut.pcapng", [cut])))
    assert _cell(df, 0, "cm_local_qpn") == frames[0].fields["localqpn"]              # bytes 32-34
    assert _cell(df, 0, "cm_start_psn") is None                                      # bytes 44-46: not captured
    assert _cell(df, 0, "cm_message") == "ConnectRequest"


def test_a_batch_without_a_mad_or_an_llc_frame_keeps_no_column_memory():
    """The MAD, CM, LLC and STP columns of such a batch are zero views (strides 0): the decode of
    RoCE traffic does not pay for them (docs/performance.md)."""
    from roceview.packets.read import iter_batches

    batch = next(iter_batches([str(roceview_sample())], prefetch=False))
    rare = [c for c in batch.cols if c.startswith(("cm_", "mad_", "llc_", "stp_", "_cm_mad", "_mad_whole"))]
    assert len(rare) >= 30
    for name in rare:
        assert batch.cols[name].strides[0] == 0 and not batch.valid[name].any(), name


def roceview_sample():
    from conftest import SAMPLES

    return SAMPLES / "network-loss.pcap"


def test_ieee_802_3_frames_read_their_llc_header_and_spanning_tree_bpdu():
    if not STP_LAN.exists():
        pytest.skip("real captures absent")
    df = roceview.read_packets(str(STP_LAN))
    stp = df[df["llc_dsap"].notna()]
    assert len(stp) == 22 and (stp["ethertype"] < ethernet.ETHERTYPE_MIN).all()
    first = stp.iloc[0]
    assert (first.frame, first.llc_dsap, first.llc_ssap, first.llc_control) == (2, 0x42, 0x42, 0x03)
    # tshark: Conf. Root = 36864/0/00:0e:58:c3:34:82  Cost = 0  Port = 0x8001
    assert (first.stp_bpdu_type, first.stp_version, first.stp_flags) == (0, 0, 0)
    assert (first.stp_root_id, first.stp_root_cost, first.stp_port) == (0x9000000E58C33482, 0, 0x8001)
    assert df[df["llc_dsap"].isna()]["stp_port"].isna().all()


def test_scapy_reads_back_every_message_it_crafted():
    for frame in cm_frames.build():
        with S.preferred():
            pkt = _dissected(frame)
        layer = pkt.getlayer(S.CM_CLASSES[frame.message])
        assert layer is not None, (frame.transport, frame.message)
        for name, value in frame.fields.items():
            got = getattr(layer, name)
            if isinstance(value, str):
                got, value = ipaddress.ip_address(got), ipaddress.ip_address(value)
            assert got == value, (frame.message, name)


def _dissected(frame):
    from scapy.layers.l2 import Ether

    return S.LRH(frame.data) if frame.transport.startswith("ib") else Ether(frame.data)


@pytest.mark.parametrize("sid, text", [(0x0000000001061144, "NVMe-oF"), (0x0000000001060CBC, "iSER"),
                                       (0x0000000001061545, "SMB Direct"), (0x0000000001064E51, "NFS-RDMA"),
                                       (0x0000000001063039, "TCP port 12345"), (0x0000000001111234, "UDP port 4660"),
                                       (0x00000000013F0001, "IB port 1"), (0x1234567890ABCDEF, ""),
                                       (0x1000000000000404, "IPoIB connected mode")])
def test_rdma_cm_service_ids_name_their_service(sid, text):
    assert cm.service_text(sid) == text
    assert cm.is_ip_cm(sid) == (sid >> 24 == 1)        # IBTA A11.2.1: 0x0000000001 | port space | port


def test_timeouts_and_the_active_sides_ack_timeout():
    assert cm.timeout_us(0) == 4.096 and cm.timeout_us(19) == pytest.approx(2147483.648)
    # Linux cm_ack_timeout: 2 x packet life time + the target's ACK delay, as a power of two
    assert [cm.ack_timeout(16, plt) for plt in (15, 17, 18, 19)] == [17, 18, 19, 20]
    assert cm.ack_timeout(20, 10) == 20 and cm.ack_timeout(20, 18) == 21
    assert cm.ack_timeout(0, 30) == 31 and cm.ack_timeout(31, 31) == 31
    assert cm.reject_text(28) == "Consumer reject" and cm.reject_text(99) == "reason 99"


def test_every_message_is_declared_whole_without_overlaps():
    """232 bytes after the MAD header; no field overlaps another unless wholly inside it."""
    for header in cm.HEADERS:
        wire, _ = S.layout(header)
        assert header.length == 232 and sum(f.bits for f in wire) == 232 * 8, header.name
    assert np.all([m.header in cm.HEADERS for m in cm.MESSAGES.values()])


def test_analyze_filter_on_cm_fields_works_where_a_column_holds_them_and_says_so_where_not(crafted, tmp_path):
    import io

    from roceview.cli import Environment, main

    frames, _ = crafted
    path = cm_frames.write(tmp_path / "cm.pcapng", frames)
    for expression, code in (("infiniband.cm.req.localqpn > 0", 0), ("infiniband.cm.rej.reason", 0),
                             ("infiniband.cm.req.prim_locallid > 0", 2), ("infiniband.cm.req.ip_cm.sip4", 2)):
        out, err = io.StringIO(), io.StringIO()
        assert main(["analyze", str(path), "--filter", expression], Environment(stdout=out, stderr=err)) == code
        assert code == 0 or err.getvalue().count("\n") == 1 and "read from the MAD's bytes" in err.getvalue()
