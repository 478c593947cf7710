"""cm_reject, cm_retry, cm_slow_setup: each fires on its scenario and lists the CM frames that
show it (the REJ, every REQ sent again, the MRA, the REQ / REP / RTU of a slow set-up); each stays
silent on healthy RDMA CM: pmtu-4096-cm, the real CM captures, a capture that starts after the
REQ or ends before the REP / RTU, and a mirror that captures every frame twice."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import roceview
from dissectors import cm
from roceview.capture.writer import write_pcap
from roceview.diagnose import find, load_config
from roceview.generate import generate, write_capture

CM_KINDS = {"cm_reject", "cm_retry", "cm_slow_setup"}
REAL = Path(__file__).resolve().parents[3] / "shared" / "captures" / "real"
REAL_CM = sorted(p for p in REAL.glob("*.pcap") if "rdma-cm" in p.name or "erf" in p.name)


def write_frames(path, frames: list[bytes], ts: list[int]) -> Path:
    order = np.argsort(np.asarray(ts, np.int64), kind="stable")
    frames, ts = [frames[i] for i in order], np.asarray(ts, np.int64)[order]
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), np.array([len(f) for f in frames], np.int64), ts)
    return path


def capture_of(tmp_path, name: str, seed: int = 0) -> tuple:
    cap = generate(name, seed=seed)
    path = tmp_path / f"{name}-{seed}.pcap"
    write_capture(cap, path)
    return cap, path


def cm_frames(path) -> dict[int, str]:
    """Frame number -> the CM message it carries (REQ, REP, ...)."""
    p = roceview.read_packets(path, columns=["frame", "mad_attr_id"])
    p = p[p["mad_attr_id"].notna()]
    return {int(f): cm.MESSAGES[int(a)].short for f, a in zip(p["frame"], p["mad_attr_id"])}


def listed(finding) -> list[int]:
    return [int(x) for x in str(finding["frames"]).split(";") if x]


def of_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


def test_a_rejected_req_is_reported_with_its_reason_and_frames(tmp_path):
    _, path = capture_of(tmp_path, "cm-reject")
    result = roceview.analyze(path)
    found = of_kind(find(result), "cm_reject")
    messages = cm_frames(path)
    by_reason = {("Consumer reject (28)" in f["evidence"], "Invalid service ID (8)" in f["evidence"]): f for f in found}
    assert len(found) == 2 and set(by_reason) == {(True, False), (False, True)}
    consumer, no_listener = by_reason[True, False], by_reason[False, True]
    # another client's connection to that service was established: the service works, this one was refused
    assert consumer["severity"] == "warning" and no_listener["severity"] == "critical"
    assert "rdma_reject" in consumer["advice"] and "listen" in no_listener["advice"]
    assert "TCP port 5000" in no_listener["summary"] and "cm_rx_msgs/rej" in no_listener["advice"]
    for f in found:
        assert sorted(messages[x] for x in listed(f)) == ["REJ", "REQ"] and f["frame_count"] == 2
        assert all(name.endswith(":0x000001") for name in f["flows"].split(";"))


def test_resent_reqs_an_mra_and_an_unanswered_req_are_reported(tmp_path):
    _, path = capture_of(tmp_path, "cm-retry")
    found = of_kind(find(roceview.analyze(path)), "cm_retry")
    messages = cm_frames(path)
    text = {f["summary"]: f for f in found}
    assert len(found) == 3, list(text)
    resent = next(f for s, f in text.items() if "again: no answer came" in s)
    unanswered = next(f for s, f in text.items() if "3 times and got no answer" in s)
    mra = next(f for s, f in text.items() if "MRA" in s)
    assert sorted(messages[x] for x in listed(resent)) == ["REP", "REQ", "REQ"]
    assert sorted(messages[x] for x in listed(unanswered)) == ["REQ", "REQ", "REQ"]
    assert sorted(messages[x] for x in listed(mra)) == ["MRA", "REP", "REQ"]
    assert resent["severity"] == unanswered["severity"] == "warning" and mra["severity"] == "info"
    assert "cm_tx_retries/req" in resent["advice"] and "1 REQ resent" in resent["evidence"]
    assert "2 REQs resent" in unanswered["evidence"] and "timed_out" in unanswered["evidence"]


def test_a_slow_set_up_names_its_slow_leg_and_follows_the_configured_bound(tmp_path):
    _, path = capture_of(tmp_path, "cm-slow-setup")
    result = roceview.analyze(path)
    (f,) = of_kind(find(result), "cm_slow_setup")
    assert sorted(cm_frames(path)[x] for x in listed(f)) == ["REP", "REQ", "RTU"]
    assert "REQ to REP" in f["evidence"] and "rdma_accept" in f["advice"] and f["severity"] == "warning"
    assert not of_kind(find(result, load_config(cm_setup_ms=200.0)), "cm_slow_setup")
    assert len(of_kind(find(result, load_config(cm_setup_ms=0.001)), "cm_slow_setup")) == 1   # one finding, 2 connections
    assert "2 connections" in of_kind(find(result, load_config(cm_setup_ms=0.001)), "cm_slow_setup")[0]["summary"]


def test_healthy_rdma_cm_gives_no_cm_finding(tmp_path):
    _, path = capture_of(tmp_path, "pmtu-4096-cm")
    assert not {f["kind"] for f in find(roceview.analyze(path))} & CM_KINDS


@pytest.mark.parametrize("path", REAL_CM, ids=lambda p: p.name)
def test_the_real_cm_captures_give_no_cm_finding(path):
    assert not {f["kind"] for f in find(roceview.analyze(path))} & CM_KINDS


@pytest.mark.parametrize("cut", ["after the REQ", "before the REP", "before the RTU", "before the resent REQ"])
def test_a_capture_that_starts_or_ends_mid_handshake_gives_no_cm_finding(tmp_path, cut):
    name = "cm-retry" if cut == "before the resent REQ" else "pmtu-4096-cm"
    cap, path = capture_of(tmp_path, name)
    frames, ts = cap.frame_list(), cap.ts_ns.tolist()
    messages = cm_frames(path)
    first = {m: min(f for f, x in messages.items() if x == m) for m in set(messages.values())}
    if cut == "after the REQ":
        keep = [i for i in range(len(frames)) if messages.get(i + 1) != "REQ"]
    elif cut == "before the resent REQ":
        second = sorted(f for f, x in messages.items() if x == "REQ")[3]    # 3 first REQs, then a resend
        keep = list(range(min(second, first["MRA"]) - 1))                   # the MRA is a retry of its own
    else:
        keep = list(range(first["REP" if cut == "before the REP" else "RTU"] - 1))
    out = write_frames(tmp_path / "cut.pcap", [frames[i] for i in keep], [ts[i] for i in keep])
    assert not {f["kind"] for f in find(roceview.analyze(out))} & CM_KINDS


@pytest.mark.parametrize("name", ["pmtu-4096-cm", "cm-retry"])
def test_a_mirror_that_captures_every_frame_twice_counts_no_retry(tmp_path, name):
    """Each frame again 300 ns later (two mirror sessions): the same connections, the same
    retries and the same CM findings as the capture of each frame once."""
    cap, path = capture_of(tmp_path, name)
    frames, ts = cap.frame_list(), cap.ts_ns.tolist()
    twice = write_frames(tmp_path / "twice.pcap", frames + frames, ts + [t + 300 for t in ts])
    once, doubled = roceview.analyze(path), roceview.analyze(twice)
    columns = ("connection", "state", "req_retries", "rep_retries", "mra_count")
    assert [once.connections_table.data[c] for c in columns[:2]] == [doubled.connections_table.data[c]
                                                                     for c in columns[:2]]
    for c in columns[2:]:
        assert doubled.connections_table.data[c].tolist() == once.connections_table.data[c].tolist(), c
    kinds = [sorted(f["summary"] for f in find(r) if f["kind"] in CM_KINDS) for r in (once, doubled)]
    assert kinds[0] == kinds[1]


def _without(tmp_path, cap, path, drop) -> Path:
    """The capture without the frames `drop(messages)` names (frame numbers)."""
    gone = set(drop(cm_frames(path)))
    frames, ts = cap.frame_list(), cap.ts_ns.tolist()
    keep = [i for i in range(len(frames)) if i + 1 not in gone]
    return write_frames(tmp_path / "without.pcap", [frames[i] for i in keep], [ts[i] for i in keep])


def test_a_reject_whose_req_the_capture_missed_is_still_reported(tmp_path):
    """The REJ names the client's comm id and says it rejects a REQ: the connection is known from
    it, as from a REP whose REQ went by before the capture."""
    cap, path = capture_of(tmp_path, "cm-reject")
    out = _without(tmp_path, cap, path, lambda m: [f for f, x in m.items() if x == "REQ"])
    found = of_kind(find(roceview.analyze(out)), "cm_reject")
    assert len(found) == 2 and {"Consumer reject (28)" in f["evidence"] for f in found} == {True, False}
    assert all(sorted(cm_frames(out)[x] for x in listed(f)) == ["REJ"] for f in found)


def test_a_connection_whose_rep_the_capture_missed_was_answered(tmp_path):
    """cm-retry's first connection: REQ, REQ again, REP, RTU. Without the REP the RTU still shows
    the server answered: a resent REQ, not one that got no answer."""
    cap, path = capture_of(tmp_path, "cm-retry")
    out = _without(tmp_path, cap, path, lambda m: [min(f for f, x in m.items() if x == "REP")])
    text = [f["summary"] for f in of_kind(find(roceview.analyze(out)), "cm_retry")]
    assert sum("got no answer" in s for s in text) == 1 and "3 times and got no answer" in " ".join(text), text
    assert any("again: no answer came" in s for s in text), text


def test_an_mra_of_the_rep_is_worded_as_the_clients_asking_before_its_rtu(tmp_path):
    """MsgMRAed 1 (IBTA 12.6.6): the client, not the server, asked for more time."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from dissectors import scapy_layers as S

    client, server = "10.0.0.1", "10.0.0.2"

    def mad(short, src, dst, tid, **fields):
        pkt = Ether() / IP(src=src, dst=dst) / UDP(sport=49152, dport=4791) / S.BTH(opcode=0x64, destqp=1) / \
            S.DETH(qkey=0x80010000, srcqp=1) / S.MAD(attributeid=cm.ATTR[short], transactionid=tid) / \
            S.CM_CLASSES[short](**fields)
        return bytes(S.with_icrc(pkt))

    frames = [mad("REQ", client, server, 1, localcommid=0x11, serviceid=0x106000000001388, localqpn=0x101,
                  startpsn=500, remoteresptout=16, localresptout=14, maxcmretr=15),
              mad("REP", server, client, 1, localcommid=0x22, remotecommid=0x11, localqpn=0x202, startpsn=900),
              mad("MRA", client, server, 2, localcommid=0x11, remotecommid=0x22, msgmraed=1, svctimeout=20),
              mad("RTU", client, server, 2, localcommid=0x11, remotecommid=0x22)]
    path = write_frames(tmp_path / "mra-rep.pcap", frames, [10**18 + k * 10**6 for k in range(4)])
    (found,) = of_kind(find(roceview.analyze(path)), "cm_retry")
    assert found["summary"].startswith(f"{client} answered the REP of {server}") and "RTU" in found["summary"]
    assert found["severity"] == "info" and "client" in found["advice"]
