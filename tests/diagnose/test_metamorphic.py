"""Metamorphic tests: a transform of a capture whose right answer follows from the untransformed
capture's, over every sample and every scenario freshly generated.

The answer compared is each RoCE flow's counts (packets, data packets, resent, gaps, NAKs,
unrecovered PSNs) and the findings' (severity, kind). Transforms that hold today are plain
tests; those roceview still gets wrong are strict xfails naming what it does instead (they turn
into failures the day they pass, so the marker goes with the fix). The checking rules are shown
to catch a planted bug.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import transforms as tf
from roceview.api import analyze
from roceview.generate import SCENARIOS, generate, write_capture

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))
COUNTS = ("packets", "data_packets", "retransmitted_packets", "gap_events", "gap_psns", "naks_seq", "naks_rnr",
          "unrecovered_psns")
LOSS = {"network_loss", "capture_loss", "timeout_retransmit"}
PAUSE_KINDS = {"pfc_pause", "pfc_storm", "link_speed_mismatch"}
COPY_KINDS = {"duplicate_frames", "capture_points"}


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    """Every sample and every scenario generated at another seed."""
    folder = tmp_path_factory.mktemp("scenarios")
    out = {f"sample/{p.stem}": p for p in SAMPLES}
    for name in sorted(SCENARIOS):
        path = folder / f"{name}.pcap"
        write_capture(generate(name, seed=23), path)
        out[f"fresh/{name}"] = path
    return out


NAMES = [f"sample/{p.stem}" for p in SAMPLES] + [f"fresh/{n}" for n in sorted(SCENARIOS)]


def answer(paths) -> tuple[dict, list]:
    """(flow -> counts, sorted (severity, kind) of the findings)."""
    result = analyze([str(p) for p in paths], warn=lambda m: None)
    d = result.flows_table.data
    flows = {name: tuple(int(d[c][i]) for c in COUNTS) for i, name in enumerate(d["flow"])}
    return flows, sorted({(f["severity"], f["kind"]) for f in result.findings.to_dict("records")})


def _has_roce_v1(path: Path) -> bool:
    _, records = tf.read_pcap(path)
    return any(b"\x89\x15" in (r.frame[12:14], r.frame[16:18]) for r in records)


def _kinds(found, drop=frozenset()) -> list:
    return [f for f in found if f[1] not in drop]


def transformed(path: Path, tmp_path: Path, transform, name: str = "t.pcap") -> Path:
    link, records = tf.read_pcap(path)
    return tf.write_pcap(tmp_path / name, link, transform(records))


# ---- transforms that must not change the answer, holding today --------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_pfc_frames_on_a_priority_without_roce_leave_the_roce_findings_alone(name, captures, tmp_path):
    path = captures[name]
    _, records = tf.read_pcap(path)
    free = min(set(range(8)) - tf.priorities(records) - {0})
    flows, found = answer([path])
    flows2, found2 = answer([transformed(path, tmp_path, lambda r: tf.pfc_frames(r, free))])
    assert flows2 == flows
    assert _kinds(found2, PAUSE_KINDS) == _kinds(found, PAUSE_KINDS), found2
    assert all(sev == "info" for sev, kind in found2 if kind == "pfc_pause" and (sev, kind) not in found)


@pytest.mark.parametrize("name", NAMES)
def test_a_path_change_of_udp_source_port_mid_flow_changes_nothing(name, captures, tmp_path):
    path = captures[name]
    assert answer([transformed(path, tmp_path, tf.new_source_ports)]) == answer([path])


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_cut_in_two_ring_files_gives_the_same_answer(name, captures, tmp_path):
    path = captures[name]
    link, records = tf.read_pcap(path)
    half = len(records) // 2
    first = tf.write_pcap(tmp_path / "ring-1.pcap", link, records[:half])
    second = tf.write_pcap(tmp_path / "ring-2.pcap", link, records[half:])
    assert answer([first, second]) == answer([path])


BEGUN_LATER_WRONG = {(name, share): "begun between a frame's two captures: a resend whose NAK came before the "
                                    "start reads as timeout_retransmit"
                     for name in ("fresh/two-point-mirror",) for share in (0.3, 0.6)}


@pytest.mark.parametrize("name,share", [
    pytest.param(n, s, marks=pytest.mark.xfail(strict=True, reason=BEGUN_LATER_WRONG[n, s]))
    if (n, s) in BEGUN_LATER_WRONG else (n, s) for n in NAMES for s in (0.3, 0.6)])
def test_a_capture_begun_later_adds_no_warning(name, share, captures, tmp_path):
    """Starting the mirror mid-run (senders already sending, requests whose ACKs come later)
    may lose findings, never add a warning."""
    path = captures[name]
    _, found = answer([path])
    link, records = tf.read_pcap(path)
    start = records[0].ts + int((records[-1].ts - records[0].ts) * share)
    _, found2 = answer([tf.write_pcap(tmp_path / "later.pcap", link, [r for r in records if r.ts >= start])])
    assert [f for f in found2 if f not in found and f[0] != "info"] == [], found2


@pytest.mark.parametrize("name", NAMES)
def test_frames_the_mirror_missed_are_never_network_loss(name, captures, tmp_path):
    path = captures[name]
    flows, found = answer([path])
    if any(kind in LOSS for _, kind in found):
        pytest.skip("the capture has loss of its own")
    _, found2 = answer([transformed(path, tmp_path, lambda r: tf.drop_random(r, 0.05, seed=3))])
    assert "network_loss" not in {kind for _, kind in found2}, found2


FIRST_REQUEST = ("the copy of a host pair's first request, more than 2 us later and before the pair's second "
                 "datagram, is counted again (a resend, or another UD packet): nothing yet shows that the sender "
                 "numbers its datagrams")
PAUSES_TWICE = ("two capture points: pfc_violation is not judged (the copies of the pause frames are not told from "
                "refreshes), so the violator's finding is lost")
VICTIMS_TWICE = ("two capture points: hol_victim is not judged (each point's copy of an XOFF would pause again, "
                 "doubling the time paused), so the victim's finding is lost")
SECOND_POINT_WRONG = {("sample/tail-timeout", 3_700): FIRST_REQUEST, ("fresh/tail-timeout", 3_700): FIRST_REQUEST,
                      ("fresh/tail-timeout", 50_000): FIRST_REQUEST, ("fresh/pmtu-4096-cm", 3_700): FIRST_REQUEST,
                      ("fresh/read-depth-limit", 3_700): FIRST_REQUEST, ("sample/read-depth-limit", 3_700): FIRST_REQUEST,
                      # host pairs whose first datagrams are CM MADs: a REQ answered by a REJ and nothing
                      # more, an MRA milliseconds before the next MAD
                      ("fresh/cm-reject", 3_700): FIRST_REQUEST, ("fresh/cm-reject", 50_000): FIRST_REQUEST,
                      ("fresh/cm-retry", 3_700): FIRST_REQUEST, ("fresh/cm-retry", 50_000): FIRST_REQUEST,
                      ("fresh/cm-slow-setup", 3_700): FIRST_REQUEST,
                      # each point's copy of an XOFF starts a paused period of its own, into which the other
                      # point's frames fall: pfc_violation is not judged on a capture of two points
                      ("fresh/pfc-violator", 3_700): PAUSES_TWICE, ("fresh/pfc-violator", 50_000): PAUSES_TWICE,
                      ("fresh/hol-victim", 3_700): VICTIMS_TWICE, ("fresh/hol-victim", 50_000): VICTIMS_TWICE}


@pytest.mark.parametrize("name,offset_ns", [
    pytest.param(n, o, marks=pytest.mark.xfail(strict=True, reason=SECOND_POINT_WRONG[n, o]))
    if (n, o) in SECOND_POINT_WRONG else (n, o) for n in NAMES for o in (-2_000, 500, 3_700, 50_000)])
def test_a_second_capture_point_counts_each_frame_once(name, offset_ns, captures, tmp_path):
    """Two captures of one frame are told apart from a resend by the IPv4 identification; a
    RoCE v1 frame has none, so only a request's copy within 2 us is recognised."""
    path = captures[name]
    if _has_roce_v1(path):
        pytest.skip("RoCE v1 frames carry no identification: an ACK's copy is not told from a repeated ACK")
    flows, found = answer([path])
    flows2, found2 = answer([transformed(path, tmp_path, lambda r: tf.second_capture_point(r, offset_ns))])
    assert flows2 == flows
    assert _kinds(found2, COPY_KINDS) == _kinds(found, COPY_KINDS), found2


@pytest.mark.parametrize("name", NAMES)
def test_the_same_capture_given_twice_counts_each_frame_once(name, captures):
    path = captures[name]
    if _has_roce_v1(path):
        pytest.skip("RoCE v1 frames carry no identification: an ACK's copy is not told from a repeated ACK")
    flows, found = answer([path])
    flows2, found2 = answer([path, path])
    assert flows2 == flows
    assert _kinds(found2, COPY_KINDS | {"decode_warnings"}) == _kinds(found, COPY_KINDS | {"decode_warnings"}), found2


@pytest.mark.parametrize("name", ["sample/clean", "fresh/clean", "sample/pmtu-4096", "fresh/psn-wrap",
                                  "sample/incast", "fresh/mixed-roce-versions", "fresh/healthy-dcqcn"])
def test_reordered_requests_without_loss_are_reordering_not_loss(name, captures, tmp_path):
    _, found = answer([transformed(captures[name], tmp_path, tf.swap_adjacent)])
    assert not LOSS & {kind for _, kind in found}, found
    assert ("info", "reordering") in found, found


# ---- transforms roceview still gets wrong: strict xfails, they fail the day they pass -----------


SKEW_WRONG = {
    **{(n, s): "the re-read of a lost READ response is timed against the responses: read as timeout_retransmit"
       for n in ("fresh/read-response-loss-middle", "fresh/read-response-loss-last", "fresh/ops-mixed",
                 "sample/ops-mixed") for s in (-3_000,)},
    **{(n, s): "the late original is timed against the spurious NAK: reordering read as network_loss"
       for n in ("fresh/reordering",) for s in (-3_000, 3_000)},
    **{(n, -3_000): "each frame's first capture is at either point: no response is stamped before its kept request"
       for n in ("sample/two-point-mirror", "fresh/two-point-mirror")},
    **{(f"{k}/{n}", 3_000): "NAKs stamped late put each go-back-N resend before its NAK: only a run no NAK explains "
                            "counts as evidence (a run inside another is not told from real loss), so 'not recovered'"
                            " or too few for clock_skew"
       for k in ("sample", "fresh") for n in ("network-loss", "network-loss-receiver-side", "two-point-mirror")},
    **{(n, 3_000): "NAKs stamped late put each go-back-N resend before its NAK: 'not recovered', and the gap "
                   "before a resend read as capture loss" for n in ("fresh/ops-mixed", "sample/ops-mixed")}}


@pytest.mark.parametrize("name,shift_ns", [
    pytest.param(n, s, marks=pytest.mark.xfail(strict=True, reason=SKEW_WRONG[n, s])) if (n, s) in SKEW_WRONG
    else (n, s) for n in NAMES for s in (-3_000, 3_000)])
def test_a_skewed_direction_keeps_the_loss_findings_and_says_clock_skew(name, shift_ns, captures, tmp_path):
    """The responder's frames stamped 3 us early or late (a TAP whose two ports' clocks disagree):
    the same loss findings. Where the capture shows loss, clock_skew too: responses stamped early
    come before their requests; stamped late, they show only when a NAK then follows its resend."""
    path = captures[name]
    link, records = tf.read_pcap(path)
    responder = _responder(records)
    if responder is None:
        pytest.skip("no RoCE v2 request")
    _, found = answer([path])
    _, found2 = answer([tf.write_pcap(tmp_path / "skew.pcap", link, tf.shift_direction(records, responder, shift_ns))])
    assert [f for f in found2 if f[1] in LOSS] == [f for f in found if f[1] in LOSS], found2
    naks = any(tf.roce_v2(r.frame) is not None and _is_nak(r.frame) for r in records)
    if ("warning", "network_loss") in found and ("info", "clock_skew") not in found and (shift_ns < 0 or naks):
        assert ("info", "clock_skew") in found2, found2


def _is_nak(frame: bytes) -> bool:
    """An RC ACKNOWLEDGE whose AETH syndrome is a NAK, PSN sequence error (0x60)."""
    h = tf.roce_v2(frame)
    return h.opcode == 0x11 and frame[h.bth + 12] == 0x60


def _responder(records) -> bytes | None:
    """The destination of the first RoCE v2 request (RC SEND/WRITE/READ request)."""
    for r in records:
        h = tf.roce_v2(r.frame)
        if h is not None and h.opcode < 0x0D:
            return h.dst
    return None


# ---- each rule catches a planted bug ------------------------------------------------------------
def test_the_pfc_rule_catches_pfc_frames_taken_for_the_protected_priorities(captures, tmp_path, monkeypatch):
    from roceview.diagnose import priority

    def frames_protect(ctx):         # the old reading: a paused priority is the protected one
        prios, sources = set(priority.paused_priorities(ctx)), ["PFC frames"]
        return prios, sources
    monkeypatch.setattr(priority, "protected_priorities", frames_protect)
    with pytest.raises(AssertionError):
        test_pfc_frames_on_a_priority_without_roce_leave_the_roce_findings_alone("sample/clean", captures, tmp_path)


def test_the_mirror_rule_catches_capture_gaps_taken_for_network_loss(captures, tmp_path, monkeypatch):
    from roceview.diagnose import loss

    monkeypatch.setattr(loss, "_nak_for", lambda *a: True)      # every gap "was NAKed"
    with pytest.raises(AssertionError):
        test_frames_the_mirror_missed_are_never_network_loss("sample/clean", captures, tmp_path)


def test_the_reordering_rule_catches_late_originals_taken_for_resends(captures, tmp_path, monkeypatch):
    from roceview.diagnose import reorder

    monkeypatch.setattr(reorder, "_late", lambda ctx, name: reorder._Late([], set()))
    with pytest.raises(AssertionError):
        test_reordered_requests_without_loss_are_reordering_not_loss("sample/clean", captures, tmp_path)


def test_the_begun_later_rule_catches_senders_already_sending_taken_for_a_burst(captures, tmp_path, monkeypatch):
    from roceview.diagnose import ecn

    def idle_before_the_capture(ctx, tl, flows, senders_of, w, width):   # the window before: always "seen"
        new = {senders_of[n] for n in flows} - ecn._active_senders(ctx, tl, flows, senders_of, w - 1, width)
        return {n for n in flows if senders_of[n] in new} if len(new) >= ctx.config.incast_senders else set()
    monkeypatch.setattr(ecn, "_bursting", idle_before_the_capture)
    with pytest.raises(AssertionError):
        test_a_capture_begun_later_adds_no_warning("fresh/healthy-dcqcn", 0.6, captures, tmp_path)


def test_the_answer_compared_sees_a_flow_counted_differently(captures, tmp_path):
    """The ring-file and source-port rules compare `answer`: a frame dropped changes it."""
    path = captures["sample/clean"]
    link, records = tf.read_pcap(path)
    assert answer([tf.write_pcap(tmp_path / "less.pcap", link, records[1:])]) != answer([path])


def test_the_second_point_rule_catches_copies_counted_as_packets(captures, tmp_path, monkeypatch):
    from roceview.analysis import copies

    none = np.zeros(0, dtype=np.int64)
    monkeypatch.setattr(copies.Copies, "find", lambda self, ch, registry: (none, none, none))
    with pytest.raises(AssertionError):
        test_a_second_capture_point_counts_each_frame_once("sample/network-loss", 3_700, captures, tmp_path)


def test_the_skew_rule_catches_a_skew_left_unsaid(captures, tmp_path, monkeypatch):
    from roceview.diagnose import capture

    monkeypatch.setattr(capture, "clock_findings", lambda ctx: [])
    with pytest.raises(AssertionError):
        test_a_skewed_direction_keeps_the_loss_findings_and_says_clock_skew("sample/network-loss", 3_000, captures,
                                                                           tmp_path)
