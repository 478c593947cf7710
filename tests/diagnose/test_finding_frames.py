"""Every finding leads to its frames (as Wireshark's Expert Info leads to a packet): the frames a
finding lists are frames of the events its rule counted, and the packets' own analysis flags
say so. Checked over every sample and every scenario generated afresh."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import roceview
from roceview.diagnose.evidence_frames import EVIDENCE, TELLING
from roceview.generate import SCENARIOS, generate, write_capture
from roceview.packets.flags import Flag

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))
PACKET_FLAG = {"bad_icrc": Flag.ICRC_BAD, "truncated_frames": Flag.TRUNCATED}
NAMES = [f"sample/{p.stem}" for p in SAMPLES] + [f"fresh/{n}" for n in sorted(SCENARIOS)]
# the flag a frame of each event kind carries (response_before_request, ack_unsent_psn: none)
EVENT_FLAG = {"gap": Flag.GAP, "retransmit": Flag.RETRANSMISSION, "timeout_retransmit": Flag.TIMEOUT_RETRANSMISSION,
              "nak_seq": Flag.NAK, "nak_other": Flag.NAK, "nak_rnr": Flag.RNR_NAK, "ecn_ce": Flag.ECN_CE,
              "cnp": Flag.CNP, "pfc_pause": Flag.PFC_PAUSE, "pfc_resume": Flag.PFC_RESUME,
              "psn_reuse": Flag.PSN_REUSE, "duplicate": Flag.DUPLICATE}


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scenarios")
    out = {f"sample/{p.stem}": p for p in SAMPLES}
    for name in sorted(SCENARIOS):
        out[f"fresh/{name}"] = folder / f"{name}.pcap"
        write_capture(generate(name, seed=23), out[f"fresh/{name}"])
    return out


def _flows_and_peers(result, flows: str) -> set[str]:
    """A finding's flows and their peers (a NAK or a CNP of a flow travels back on its peer)."""
    names = {f for f in flows.split(";") if f}
    t = result.flows_table.data
    for flow, src, dst, peer in zip(t["flow"], t["src_ip"], t["dst_ip"], t["peer_qp"]):
        if flow in names and peer >= 0:
            names.add(f"{dst}>{src}:0x{peer:06x}")
    return names


def _listed(finding) -> list[int]:
    return [int(f) for f in str(finding["frames"]).split(";") if f]


CM_KINDS = ("cm_reject", "cm_retry", "cm_slow_setup")
CC_KINDS = ("cnp_ignored", "cnp_excess")


def _given_frames_are_theirs(f, result, path) -> None:
    """The kinds whose rules give their frames: the RDMA CM findings list their handshakes' MADs
    (diagnose/cm.py), read_depth_limited the READ requests that started at the depth limit (the
    ops.csv rows it counted: diagnose/read_depth.py), cnp_ignored / cnp_excess their CNPs."""
    listed = _listed(f)
    assert listed and listed == sorted(set(listed)) and len(listed) <= TELLING + 2 and f["frame_count"] >= len(listed)
    if f["kind"] in CM_KINDS:
        m = roceview.read_packets(path, columns=["frame", "mad_attr_id"])
        assert set(listed) <= set(m["frame"][m["mad_attr_id"].notna()]), f
        return
    if f["kind"] in CC_KINDS:                           # the CNPs it judged (cc.csv)
        p = roceview.read_packets(path, columns=["frame", "opcode"])
        assert set(listed) <= set(p["frame"][p["opcode"] == 0x81]), f
        return
    ops = result.ops
    reads = ops[(ops["op"] == "READ") & ops["flow"].isin(f["flows"].split(";"))]
    assert set(listed) <= set(reads["first_frame"]), f


@pytest.mark.parametrize("name", [*NAMES, "two files/network-loss+rnr"])
def test_every_listed_frame_is_evidence_its_own_flags_show(name, captures):
    path = ([str(REPO / "captures" / f"{n}.pcap") for n in ("network-loss", "rnr")] if name.startswith("two files")
            else str(captures[name]))
    result = roceview.analyze(path)
    findings = result.findings_table.records()
    if not findings:
        pytest.skip("no finding")
    events = result.events_table.data
    packets = roceview.read_packets(path, columns=["frame", "flags"], analysis=True)
    flags = dict(zip(packets["frame"].tolist(), packets["flags"].tolist()))
    for f in findings:
        listed = _listed(f)
        kinds = EVIDENCE.get(f["kind"], ())
        if f["kind"] in PACKET_FLAG:               # judged per packet: its own flag shows it
            assert listed and f["frame_count"] >= len(listed), f
            assert all(flags[x] & PACKET_FLAG[f["kind"]] for x in listed), f
            continue
        if f["kind"] in (*CM_KINDS, *CC_KINDS, "read_depth_limited"):
            _given_frames_are_theirs(f, result, path)
            continue
        if not kinds:
            assert listed == [] and f["frame_count"] == 0, f
            continue
        assert listed, f"{f['kind']} lists no frame: {f['summary']}"
        assert listed == sorted(set(listed)) and len(listed) <= TELLING + 2 and f["frame_count"] >= len(listed)
        flows = _flows_and_peers(result, f["flows"])
        for frame in listed:
            of = {k for k, fr, fl in zip(events["kind"], events["frame"], events["flow"])
                  if fr == frame and k in kinds and (k.startswith("pfc_") or fl in flows)}
            assert of, f"frame {frame} of {f['kind']} is no {kinds} event"
            assert any(flags[frame] & EVENT_FLAG[k] for k in of if k in EVENT_FLAG) or not (of & EVENT_FLAG.keys()), \
                f"frame {frame} of {f['kind']}: its flags {Flag(flags[frame])!r} show none of {of}"


def test_the_report_csv_and_json_carry_the_frames(tmp_path):
    from helpers.cli import run

    path = str(REPO / "captures" / "network-loss.pcap")
    code, out, _ = run("analyze", path, "--csv", str(tmp_path / "csv"), "--json", str(tmp_path / "a.json"))
    assert code == 0
    import csv
    import json

    finding = json.loads((tmp_path / "a.json").read_text())["findings"][0]
    row = next(csv.DictReader(open(tmp_path / "csv" / "findings.csv")))
    assert row["frames"] == finding["frames"] and int(row["frame_count"]) == finding["frame_count"] == 42
    listed = finding["frames"].split(";")
    assert f"frames   {', '.join(listed)} (+{42 - len(listed)} more)" in out


def test_a_nak_and_its_retransmission_are_both_listed():
    result = roceview.analyze(str(REPO / "captures" / "network-loss.pcap"))
    (f,) = result.findings_table.records()
    e = result.events_table.data
    frames = set(_listed(f))
    first = {k: min(fr for kk, fr in zip(e["kind"], e["frame"]) if kk == k) for k in ("nak_seq", "retransmit")}
    assert set(first.values()) <= frames, (first, frames)
    assert np.isin(list(first.values()), list(frames)).all()


@pytest.mark.parametrize("name", NAMES)
def test_the_finding_filter_selects_each_findings_frames(name, captures):
    """`dissect -Y 'roceview.finding == "K"'` shows exactly the evidence frames of the findings
    of kind K: each finding's listed frames among them, as many as their frame_count says."""
    from helpers.cli import run

    path = str(captures[name])
    findings = roceview.analyze(path).findings_table.records()
    for kind in sorted({f["kind"] for f in findings}):
        code, out, err = run("dissect", path, "-Y", f'roceview.finding == "{kind}"', "-T", "fields", "-e", "frame.number")
        assert code == 0, err
        shown = [int(x) for x in out.split()]
        mine = [f for f in findings if f["kind"] == kind]
        assert {x for f in mine for x in _listed(f)} <= set(shown), kind
        if len(mine) == 1:
            assert len(shown) == mine[0]["frame_count"], kind
        assert (shown == []) == all(f["frame_count"] == 0 for f in mine), kind


def test_the_finding_field_prints_every_kind_a_frame_shows():
    from helpers.cli import run

    code, out, _ = run("dissect", str(REPO / "captures" / "incast.pcap"), "-Y", "roceview.finding",
                       "-T", "fields", "-e", "roceview.finding")
    assert code == 0 and set(out.split()) == {"ecn_congestion,incast"}


@pytest.mark.parametrize("argv,message", [
    (["analyze", str(REPO / "captures" / "incast.pcap"), "--filter", "roceview.finding"], "needs the findings of the whole capture"),
    (["dissect", "-", "-Y", "roceview.finding"], "not from stdin"),
    (["dissect", str(REPO / "captures" / "incast.pcap"), "-Y", 'roceview.finding == "incasts"'], "is not a value of roceview.finding")])
def test_where_the_finding_field_cannot_be_it_says_so_in_one_line(argv, message):
    from helpers.cli import run

    code, _, err = run(*argv)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_fields_without_a_filter_print_the_finding_field_and_others_alike():
    """-T fields with no -Y: the writer's columns decide whether findings are needed."""
    from helpers.cli import run

    path = str(REPO / "captures" / "incast.pcap")
    code, out, err = run("dissect", path, "-T", "fields", "-e", "frame.number", "-e", "roceview.finding")
    assert code == 0, err
    assert "36\tecn_congestion,incast" in out.splitlines() and "1\t" in out.splitlines()
    code, out, err = run("dissect", path, "-T", "fields", "-e", "frame.number")
    assert code == 0 and out.split()[:3] == ["1", "2", "3"], err


REAL = REPO.parent / "shared" / "captures" / "real"
PER_PACKET = [("magnate3_rocev2_rc-write-only_bad-icrc.pcap", "bad_icrc"),
              ("magnate3_rocev2_uc-write-imm_cut-243B.pcap", "truncated_frames"),
              ("oferby-proxy_rocev2_rxe_rc-send-srcport69.pcap", "timestamps_backwards")]


@pytest.mark.parametrize("name,kind", PER_PACKET, ids=[k for _, k in PER_PACKET])
def test_kinds_judged_per_packet_list_examples_and_the_filter_selects_them_all(name, kind):
    """A bad ICRC, a cut frame, a step back in time: no event, the packet itself shows it."""
    from helpers.cli import run

    path = REAL / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared not checked out)")
    (f,) = [f for f in roceview.analyze(str(path)).findings_table.records() if f["kind"] == kind]
    code, out, err = run("dissect", str(path), "-Y", f'roceview.finding == "{kind}"', "-T", "fields", "-e", "frame.number")
    shown = [int(x) for x in out.split()]
    assert code == 0 and len(shown) == f["frame_count"] > 0, err
    assert set(_listed(f)) <= set(shown) and _listed(f)


def test_a_display_filter_keeps_the_captures_frame_numbers():
    """analyze --filter analyses only the packets it matches, but a frame keeps its number in the
    capture (as dissect -Y shows it): events, findings and cc.csv all name frames that way."""
    path = str(REPO / "captures" / "network-loss.pcap")
    whole = roceview.analyze(path)
    part = roceview.analyze(path, display_filter="frame.number > 50")
    frames = part.events_table.data["frame"].tolist()
    assert frames and min(frames) > 50
    kept = {(k, f) for k, f in zip(whole.events_table.data["kind"], whole.events_table.data["frame"].tolist())}
    assert {(k, f) for k, f in zip(part.events_table.data["kind"], frames) if k in ("nak_seq", "retransmit")} <= kept
    for f in part.findings_table.records():
        assert all(int(x) > 50 for x in _listed(f)), f
