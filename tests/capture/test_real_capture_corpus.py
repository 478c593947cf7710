"""Facts about the real capture corpus (../shared/captures/real/MANIFEST.md) that tshark
cannot check: ICRC verdicts, RoCEv2 recognised by destination port only, CNP naming,
PAUSE and LLDP DCBX values. Every test skips cleanly where ../shared is absent."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import roceview
from conftest import REAL

# MANIFEST "ICRC check (own recomputation)": (valid, invalid, not checkable because cut) over
# the file's RoCE frames. "n/a" files (native IB, no RoCE) are listed with the count of IB
# frames all expected valid (the ibdump ICRC of native IB with a GRH masks the whole LRH).
ICRC_FACTS = {
    "magnate3_rocev1_mlx5_rc-send.pcap": (2468, 0, 0),
    "magnate3_rocev1-rocev2-mixed_mlx5_rc-send.pcap": (624, 0, 0),
    "magnate3_rocev2_mlx5_rc-send_a.pcap": (708, 0, 0),
    "magnate3_rocev2_mlx5_rc-send_b.pcap": (641, 0, 0),
    "magnate3_rocev2_mlx5_ib-send-bw-with-tcp-oob.pcap": (10, 0, 0),
    "magnate3_rocev2_mlx5_nvmeof-discover_rdma-cm.pcap": (61, 0, 0),
    "magnate3_rocev2_mlx5_nvmeof-discover2_rdma-cm.pcap": (31, 0, 0),
    "magnate3_rocev2_mlx5_nvmeof-io.pcap": (45, 0, 0),
    "magnate3_rocev2_mlx5_nvmeof-idle.pcap": (4, 0, 0),
    "magnate3_rocev2_mlx5_rdma-write_rdma-cm.pcap": (17, 0, 0),
    "magnate3_rocev2_mlx5_rdma-read_rdma-cm.pcap": (13, 0, 0),
    "magnate3_rocev2_mlx5_send_rdma-cm.pcap": (9, 0, 0),
    "magnate3_native-ib_ibdump-erf_rc-send.pcap": (127, 0, 0),
    "rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap": (43, 0, 0),
    "magnate3_rocev2_dc-transport_a.pcap": (0, 19, 0),
    "magnate3_rocev2_dc-transport_b.pcap": (0, 29, 0),
    "magnate3_rocev2_rc-write-only_bad-icrc.pcap": (0, 21, 0),
    "magnate3_rocev2_uc-send_bad-icrc.pcap": (0, 17, 0),
    "magnate3_rocev2_uc-write-imm_cut-243B.pcap": (0, 20, 489),
    "oferby-proxy_rocev2_rxe_rc-send-srcport69.pcap": (105, 0, 0),
    "scapy-roce-uts_cnp-and-rocev1_from-hexdump.pcap": (3, 0, 0),
    "sanderw71-softroce_rocev2_custom-responder-psn-bug_stall_mixed-lan.pcapng": (11, 0, 0),
    "sanderw71-softroce_rocev2_custom-responder-rping-failure_mixed-lan.pcapng": (13, 0, 0),
    "tcpdump-tests_dcbx-pfc-lldp.pcap": (0, 0, 0),
    "netdev-ml_ax88772-8023x-pause-xon-xoff_from-hexdump.pcap": (0, 0, 0),
}
BAD_ICRC = ("magnate3_rocev2_rc-write-only_bad-icrc.pcap", "magnate3_rocev2_uc-send_bad-icrc.pcap")
ROCE = ("roce_v1", "roce_v2", "ib")


def _real(name: str) -> Path:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path


def test_icrc_verdicts_match_manifest(real_capture):
    if real_capture.name not in ICRC_FACTS:
        pytest.skip(f"no ICRC fact recorded for {real_capture.name}")
    valid, invalid, cut = ICRC_FACTS[real_capture.name]
    df = roceview.read_packets(real_capture)
    roce = df[df["proto"].isin(ROCE)]
    got = (int((roce["icrc_ok"] == True).sum()), int((roce["icrc_ok"] == False).sum()),  # noqa: E712
           int(roce["icrc_ok"].isna().sum()))
    assert got == (valid, invalid, cut), f"(valid, invalid, null) = {got}, MANIFEST says {(valid, invalid, cut)}"
    assert df.loc[~df["proto"].isin(ROCE), "icrc_ok"].isna().all(), "icrc_ok on a frame that is not RoCE/IB"
    # a verdict exactly where the ICRC was captured, null exactly where the frame is cut
    assert (roce["icrc_ok"].isna() == roce["truncated"].astype(bool)).all()


@pytest.mark.parametrize("name", BAD_ICRC)
def test_bad_icrc_reported_on_every_roce_packet(name):
    df = roceview.read_packets(_real(name))
    roce = df[df["proto"] == "roce_v2"]
    assert len(roce) == len(df) > 0
    assert roce["icrc_ok"].tolist() == [False] * len(roce)
    assert roce["icrc"].notna().all()


def test_no_bad_icrc_on_clean_captures():
    clean = [name for name, (_, invalid, _) in ICRC_FACTS.items() if invalid == 0]
    present = [name for name in clean if (REAL / name).is_file()]
    if not present:
        pytest.skip(f"{REAL} is absent")
    bad = {}
    for name in present:
        df = roceview.read_packets(REAL / name)
        n = int((df["icrc_ok"] == False).sum())  # noqa: E712
        if n:
            bad[name] = n
    assert bad == {}


def test_silently_cut_frames_are_truncated_with_sizes_from_length_fields():
    """489 UC WRITE frames cut at 243 bytes with orig_len == caplen: the IPv4 total length
    (4156) tells they were cut; payload_len still comes from the length fields."""
    df = roceview.read_packets(_real("magnate3_rocev2_uc-write-imm_cut-243B.pcap"))
    roce = df[df["proto"] == "roce_v2"]
    cut = roce[roce["truncated"].astype(bool)]
    assert len(roce) == 509 and len(cut) == 489
    assert (cut["cap_len"] == 243).all()
    assert cut["icrc"].isna().all() and cut["icrc_ok"].isna().all()
    # IP total length (tshark ip.len) = 20 + 8 + BTH 12 + extended headers + payload + ICRC 4:
    # FIRST 4156 (RETH 16), MIDDLE 4140, LAST_IMM 4144 and 1200 (ImmDt 4)
    by_op = cut.groupby("opcode_name", observed=True)["payload_len"].agg(lambda s: sorted(set(s))).to_dict()
    assert by_op == {"UC_RDMA_WRITE_FIRST": [4096], "UC_RDMA_WRITE_MIDDLE": [4096],
                     "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE": [1152, 4096]}
    assert cut["opcode_name"].astype(str).value_counts().to_dict() == {
        "UC_RDMA_WRITE_MIDDLE": 427, "UC_RDMA_WRITE_FIRST": 31, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE": 31}
    complete = roce[~roce["truncated"].astype(bool)]
    assert (complete["icrc_ok"] == False).all() and len(complete) == 20  # noqa: E712


def test_rocev2_recognised_by_destination_port_only():
    """37 packets with UDP source port 69 (tshark: TFTP) are RoCEv2 like the rest."""
    df = roceview.read_packets(_real("oferby-proxy_rocev2_rxe_rc-send-srcport69.pcap"))
    to_roce = df["udp_dport"] == 4791
    assert int(to_roce.sum()) == 105
    assert df.loc[to_roce, "proto"].tolist() == ["roce_v2"] * 105
    assert int((to_roce & (df["udp_sport"] == 69)).sum()) == 37
    assert (df.loc[~to_roce.fillna(False).astype(bool), "proto"] != "roce_v2").all()
    assert df.loc[to_roce, "opcode"].notna().all()
    assert sorted(df.loc[to_roce, "opcode"].value_counts().to_dict().items()) == [(0, 33), (3, 33), (5, 2),
                                                                                (17, 37)]


def test_lldp_dcbx_pfc_enable():
    df = roceview.read_packets(_real("tcpdump-tests_dcbx-pfc-lldp.pcap"))
    assert df["proto"].tolist() == ["other", "lldp", "lldp", "lldp", "lldp"]
    assert df["lldp_pfc_enable"].tolist()[1:] == [0b00110100] * 4
    assert pd.isna(df["lldp_pfc_enable"].iloc[0])
    assert df["pfc_enable"].isna().all() and df["pause_quanta"].isna().all()


def test_pause_xon_xoff():
    df = roceview.read_packets(_real("netdev-ml_ax88772-8023x-pause-xon-xoff_from-hexdump.pcap"))
    assert df["proto"].tolist() == ["pause", "pause"]
    assert df["pause_quanta"].tolist() == [0, 65535]
    assert df["src_mac"].tolist() == ["00:00:00:00:00:00"] * 2
    assert df["dst_mac"].tolist() == ["01:80:c2:00:00:01"] * 2
    assert df["ethertype"].tolist() == [0x8808] * 2
    for p in range(8):
        assert df[f"pfc_quanta{p}"].isna().all()
    assert df["pfc_enable"].isna().all() and df["opcode"].isna().all()


def test_cnp_from_connectx4():
    df = roceview.read_packets(_real("scapy-roce-uts_cnp-and-rocev1_from-hexdump.pcap"))
    cnp = df.iloc[0]
    assert cnp["proto"] == "roce_v2"
    assert cnp["opcode"] == 0x81
    assert cnp["opcode_name"] == "CNP" and cnp["transport"] == "CNP"
    assert bool(cnp["becn"]) is True and bool(cnp["fecn"]) is False
    assert cnp["dest_qp"] == 0x118 and cnp["dscp"] == 48 and cnp["ecn"] == 2
    assert cnp["udp_sport"] == 0 and cnp["udp_dport"] == 4791
    assert bool(cnp["icrc_ok"]) is True and cnp["payload_len"] == 0
    assert df["proto"].tolist() == ["roce_v2", "roce_v1", "roce_v1"]
    assert df["opcode_name"].tolist() == ["CNP", "RC_RDMA_WRITE_ONLY", "RC_ACKNOWLEDGE"]
    assert df["becn"].tolist() == [True, False, False]


def test_psn_reuse_after_read_is_visible():
    """The stall capture: READ at PSN 7488511 (3 responses) then a SEND reusing 7488513,
    and an ACK with PSN 0xffffff."""
    df = roceview.read_packets(_real("sanderw71-softroce_rocev2_custom-responder-psn-bug_stall_mixed-lan.pcapng"))
    rc = df[(df["proto"] == "roce_v2") & (df["transport"] == "RC")]
    seq = list(zip(rc["opcode_name"].astype(str), rc["psn"].astype(int)))
    assert ("RC_RDMA_READ_REQUEST", 7488511) in seq
    i = seq.index(("RC_RDMA_READ_REQUEST", 7488511))
    assert seq[i + 1:i + 6] == [("RC_RDMA_READ_RESPONSE_FIRST", 7488511), ("RC_RDMA_READ_RESPONSE_MIDDLE", 7488512),
                                ("RC_RDMA_READ_RESPONSE_LAST", 7488513), ("RC_SEND_ONLY", 7488513),
                                ("RC_ACKNOWLEDGE", 0xFFFFFF)]
    assert int((df["proto"] == "roce_v2").sum()) == 11
    assert len(df) == 935
