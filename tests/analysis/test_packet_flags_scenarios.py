"""Per-packet flags on generated captures, hand-checked frame by frame, and
how `dissect` shows them (lines, --jsonl, -V, -Y roceview.*)."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roceview.cli import Environment, main
from roceview.packets.flags import Flag
from roceview.api import read_packets

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = {"loss-receiver": ("network-loss", "--mirror", "receiver"),
             "loss-sender": ("network-loss", "--mirror", "sender"),
             "tail-timeout": ("tail-timeout",), "rnr": ("rnr",), "pfc-storm": ("pfc-storm",),
             "psn-wrap": ("psn-wrap",), "clean": ("clean",), "incast": ("incast",)}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("flags")
    paths = {}
    for name, argv in SCENARIOS.items():
        paths[name] = out / f"{name}.pcap"
        subprocess.run([sys.executable, "-m", "roceview", "generate", *argv, "-o", str(paths[name])],
                       cwd=REPO, check=True, capture_output=True)
    return paths


def _table(path):
    df = read_packets(str(path), analysis=True)
    flags = df["flags"].to_numpy(np.int64)
    rel = df["rel_frame"].astype("Float64").fillna(-1).to_numpy(np.int64)
    missing = df["missing_psns"].astype("Float64").fillna(-1).to_numpy(np.int64)
    return {int(f): (int(x), int(r), int(m)) for f, x, r, m in zip(df["frame"], flags, rel, missing)}


def _with(table, bit) -> list[int]:
    return sorted(f for f, (x, _, _) in table.items() if x & bit)


def test_loss_after_the_mirror_point_gap_nak_and_resends_name_their_frames(generated):
    t = _table(generated["loss-receiver"])
    assert t[38] == (Flag.GAP, -1, 4)                  # READ request 3531345 (4 PSNs) lost before the mirror
    assert t[44] == (Flag.NAK, 38, -1)                 # NAK PSN 3531345: the gap frame 38 opened
    assert t[45] == (Flag.RETRANSMISSION, -1, -1)      # the READ resent: its first send never captured
    assert [t[f][1] for f in (46, 47, 48, 49)] == [38, 40, 41, 42]
    assert _with(t, Flag.GAP)[:3] == [38, 51, 54]
    assert t[58][0] == Flag.NAK and t[58][1] == -1     # the resend of 3531350 was lost: no gap seen
    assert t[59] == (Flag.RETRANSMISSION, 39, -1)


def test_loss_before_the_mirror_point_has_no_gap(generated):
    t = _table(generated["loss-sender"])
    assert _with(t, Flag.GAP) == []
    assert t[46] == (Flag.NAK, -1, -1)
    assert [t[f][1] for f in range(47, 54)] == list(range(38, 45))
    assert all(t[f][0] == Flag.RETRANSMISSION for f in range(47, 54))


def test_tail_loss_timeout_retransmissions(generated):
    t = _table(generated["tail-timeout"])
    both = Flag.RETRANSMISSION | Flag.TIMEOUT_RETRANSMISSION
    assert _with(t, Flag.TIMEOUT_RETRANSMISSION)[:3] == [18, 29, 46]
    assert t[18] == (both, 17, -1) and t[29] == (both, 28, -1)


def test_rnr_naks_and_the_resends_after_them(generated):
    t = _table(generated["rnr"])
    assert _with(t, Flag.RNR_NAK)[:2] == [25, 38]
    assert t[26] == (Flag.RETRANSMISSION, 13, -1)
    assert t[40] == (Flag.RETRANSMISSION, 20, -1)


def test_pfc_storm_pauses_and_the_resume(generated):
    t = _table(generated["pfc-storm"])
    pauses = _with(t, Flag.PFC_PAUSE)
    assert pauses[0] == 49 and len(pauses) == 895
    assert _with(t, Flag.PFC_RESUME) == [944]


def test_psn_wrap_is_no_gap_and_acks_across_it_close_rtt_samples(generated):
    t = _table(generated["psn-wrap"])
    assert _with(t, Flag.GAP | Flag.RETRANSMISSION | Flag.NAK) == []
    assert t[20] == (Flag.RTT_ACK, 16, -1)        # ACK of PSN 0 closes the sample of frame 16 (PSN 0)


def test_read_spans_are_no_gap_and_the_response_closes_the_read_sample(generated):
    t = _table(generated["clean"])
    assert _with(t, Flag.GAP | Flag.RETRANSMISSION) == []
    assert t[64] == (Flag.RTT_ACK, 62, -1)        # READ RESPONSE FIRST -> its READ request


def test_cnp_names_the_last_ce_marked_frame(generated):
    t = _table(generated["incast"])
    assert t[49] == (Flag.CNP, 36, -1)
    assert t[36][0] & Flag.ECN_CE


def _dissect(*argv) -> str:
    out = io.StringIO()
    assert main(["dissect", *map(str, argv)], Environment(stdout=out, stderr=io.StringIO())) == 0
    return out.getvalue()


def test_dissect_lines_end_with_the_flags(generated):
    lines = _dissect(generated["loss-receiver"], "-Y", "frame.number in {38, 44, 46}").splitlines()
    assert lines[0].endswith("[PSN gap: 4 missing]")
    assert lines[1].endswith("[NAK PSN sequence error, gap at frame 38]")
    assert lines[2].endswith("[Retransmission of frame 38]")
    assert "\x1b[" not in "".join(lines)          # not a terminal: no colour
    storm = _dissect(generated["pfc-storm"], "-Y", "frame.number == 49", "--link-speed", "25")
    assert storm.rstrip().endswith("[Pause P3 1.342 ms]")   # 65535 x 512 bit / 25 Gb/s


def test_dissect_filters_on_flags(generated):
    frames = [int(x.split()[0]) for x in _dissect(generated["loss-receiver"], "-Y", "roceview.gap").splitlines()]
    assert frames[:3] == [38, 51, 54]
    big = _dissect(generated["loss-receiver"], "-Y", "roceview.gap > 2").splitlines()
    assert [int(x.split()[0]) for x in big] == [38]


def test_dissect_jsonl_and_detail_tree(generated):
    row = json.loads(_dissect(generated["loss-receiver"], "--jsonl", "-Y", "frame.number == 46"))
    assert row["flags"] == ["retransmission"] and row["rel_frame"] == 38
    quiet = json.loads(_dissect(generated["loss-receiver"], "--jsonl", "-Y", "frame.number == 1"))
    assert quiet["flags"] == [] and "rel_frame" not in quiet
    tree = _dissect(generated["loss-receiver"], "-V", "-Y", "frame.number == 44")
    assert "Analysis (roceview: nak)" in tree
    assert "opened by frame 38" in " ".join(tree.split())
    assert "10.0.0.2>10.0.0.1:0x03d6e5" in tree


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_dissect_colours_the_flags_on_a_terminal(generated):
    out = _Terminal()
    assert main(["dissect", str(generated["loss-receiver"]), "-Y", "frame.number == 38"],
                Environment(stdout=out, stderr=io.StringIO())) == 0
    assert out.getvalue().rstrip().endswith("\x1b[31m[PSN gap: 4 missing]\x1b[0m")
