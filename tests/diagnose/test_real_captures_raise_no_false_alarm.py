"""Real captures (../shared/captures/real): no warning or critical finding without a true cause.

TRUE_CAUSES lists, per file, the warning/critical kinds its MANIFEST.md entry documents a cause
for; any other warning fails. Files whose ICRCs do not verify must get bad_icrc, the others not.
"""
from __future__ import annotations

from helpers.diagnose import SEVERE, findings_of, kinds

BAD_ICRC = {"magnate3_rocev2_dc-transport_a.pcap", "magnate3_rocev2_dc-transport_b.pcap",
            "magnate3_rocev2_rc-write-only_bad-icrc.pcap", "magnate3_rocev2_uc-send_bad-icrc.pcap",
            "magnate3_rocev2_uc-write-imm_cut-243B.pcap"}  # the 20 complete frames of the last fail too
_SNIFFER = {"capture_loss"}  # mlx5 sniffer captures: SEND FIRST/LAST counts disagree, ACKs pass the gaps
TRUE_CAUSES = {
    "magnate3_rocev1_mlx5_rc-send.pcap": _SNIFFER,
    # MANIFEST: RoCEv1 and RoCEv2 "interleaved ... on the same host pair": .47 sends v1, .56 answers v2
    "magnate3_rocev1-rocev2-mixed_mlx5_rc-send.pcap": _SNIFFER | {"roce_version_mixed"},
    "magnate3_rocev2_mlx5_rc-send_a.pcap": _SNIFFER,
    "magnate3_rocev2_mlx5_rc-send_b.pcap": _SNIFFER,
    # an ASIX USB NIC that spews PAUSE frames (a driver regression): XON then XOFF 0xffff
    "netdev-ml_ax88772-8023x-pause-xon-xoff_from-hexdump.pcap": {"pfc_pause"},
    # rxe + a hand-written requester: every RoCE packet Not-ECT, and the requester reuses the READ's
    # last PSN for the next SEND (MANIFEST: "the same PSN reuse after the READ")
    "sanderw71-softroce_rocev2_custom-responder-psn-bug_stall_mixed-lan.pcapng": {"ecn_not_enabled", "psn_reuse",
                                                                                "ack_unsent_psn"},
    "sanderw71-softroce_rocev2_custom-responder-rping-failure_mixed-lan.pcapng": {"ecn_not_enabled", "psn_reuse",
                                                                                   "ack_unsent_psn"},
}


def test_real_capture_has_no_warning_without_a_true_cause(real_capture):
    found = findings_of(real_capture)
    name = real_capture.name
    allowed = TRUE_CAUSES.get(name, set()) | (BAD_ICRC & {name} and {"bad_icrc"})
    print(f"\n{name}: " + ", ".join(f"{f['severity']} {f['kind']}" for f in found))
    assert kinds(found, SEVERE) <= allowed, [f["summary"] for f in found if f["kind"] not in allowed]
    assert ("bad_icrc" in kinds(found)) == (name in BAD_ICRC)


def test_the_requester_psn_bug_is_psn_reuse_not_a_timeout(real_capture):
    if not real_capture.name.startswith("sanderw71-"):
        return
    found = kinds(findings_of(real_capture))
    assert "psn_reuse" in found and "timeout_retransmit" not in found
