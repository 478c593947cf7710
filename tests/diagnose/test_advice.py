"""No finding of any sample capture names a counter, tool or
setting that does not exist or means something else (mlx5 names, docs/findings.md Sources)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.diagnose import findings_of

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "captures").glob("*.pcap"))
WRONG = {
    r"\brx_discards\b(?!_phy)": "mlx5 ethtool has rx_discards_phy, not rx_discards",
    r"\bmlnxconfig\b": "the tool is mlxconfig",
    r"`mlnx_qos` / devlink": "PFC storm prevention is ethtool --set-tunable pfc-prevention-tout",
    r"rnr_nak_retry_err \(requester\) counts QPs that gave up": "it counts RNR NAKs within the retry limit",
    r"out_of_sequence and packet_seq_err \(receiver\)": "packet_seq_err is the requester's counter",
    r"`cma_roce_tos`": "an MLNX_OFED script; the kernel has configfs default_roce_tos",
    r"mlx5 `cnp_dscp` / `cnp_802p_prio`": "mlxconfig CNP_DSCP_P1 / CNP_802P_PRIO_P1, debugfs np_cnp_dscp / np_cnp_prio",
    r"captured at \d": "the capture has no speed: the speed is assumed (--link-speed)",
}


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_advice_names_no_wrong_counter(path):
    for f in findings_of(path):
        text = f"{f['summary']} {f['evidence']} {f['advice']}"
        for pattern, why in WRONG.items():
            assert not re.search(pattern, text), f"{path.name} {f['kind']}: {why}"


def test_storm_advice_names_the_real_tunable_and_counters(tmp_path):
    from helpers.findings import Cap

    c = Cap()
    for _ in range(500):
        c.pfc(0xFFFF).at(299_900)
    storm = [f for f in c.pfc(0).findings(tmp_path) if f["kind"] == "pfc_storm"][0]
    for name in ("ethtool --set-tunable <if> pfc-prevention-tout", "pfc_stall_prevention",
                 "tx_pause_storm_error_events", "tx_prio3_pause_duration", "watchdog"):
        assert name in storm["advice"], name
