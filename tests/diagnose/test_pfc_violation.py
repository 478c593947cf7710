"""pfc_violation: frames a station sent on a paused priority later than IEEE 802.3 Annex 31B's
response bound (plus two frames in flight and the capture point's margin) are a critical
finding with those frames and their XOFFs; conformant stations, and captures whose pause times
the link speed makes doubtful, are not reported."""
from __future__ import annotations

from functools import lru_cache

import pytest

from helpers.diagnose import findings_of, kinds, show
from helpers.findings import one
from roceview.diagnose import load_config
from roceview.diagnose.pfc_violation import response_bound_ns
from roceview.errors import BadInput
from roceview.generate import generate, write_capture

KIND = "pfc_violation"


@lru_cache(maxsize=None)
def _path(name: str, seed: int) -> str:
    import tempfile

    path = f"{tempfile.mkdtemp(prefix='pfc-violation-')}/{name}-{seed}.pcap"
    write_capture(generate(name, seed=seed), path)
    return path


@pytest.mark.parametrize("seed", [0, 1])
def test_a_nic_that_keeps_sending_while_paused_is_a_critical_finding(seed):
    truth = generate("pfc-violator", seed=seed).truth
    found = findings_of(_path("pfc-violator", seed))
    f = one(found, KIND)
    assert f["severity"] == "critical"
    late = {v["src"] for v in truth.pfc_violations}
    assert f["summary"].startswith(f"{late.pop()} kept sending on priority 3 while 0e:5c:00:00:ff:10 paused it")
    assert "394 pause_quanta (IEEE 802.3 Annex 31B.3.7, the 100 Gb/s row) = 2.017 us" in f["evidence"]
    assert "pause times at an assumed 100 Gb/s link" in f["evidence"]
    assert "rx_prio3_pause" in f["advice"] and "dcb pfc show dev" in f["advice"]
    # every flow named is a flow of the violating host; frames: the late ones and their XOFFs
    assert all(name.startswith("10.0.0.1>") for name in f["flows"].split(";"))
    assert f["frame_count"] >= len({(v["dest_qp"], v["psn"]) for v in truth.pfc_violations}) // 2


@pytest.mark.parametrize("name", ["hol-victim", "ecn-pfc-inverted", "pfc-storm", "slow-receiver", "pfc-without-ecn"])
def test_stations_that_obey_pauses_are_not_reported(name):
    found = findings_of(_path(name, 3))
    assert KIND not in kinds(found), show(found)


def test_a_margin_longer_than_the_late_frames_silences_it():
    path = _path("pfc-violator", 0)
    assert KIND in kinds(findings_of(path, load_config(pause_response_margin_us=0.0)))
    assert KIND not in kinds(findings_of(path, load_config(pause_response_margin_us=50.0)))


def test_doubtful_pause_times_are_not_judged(monkeypatch):
    """When link_speed_mismatch fires the pause times (and so the delays) are doubtful."""
    import roceview.diagnose.pfc_violation as rule

    path = _path("pfc-violator", 0)
    monkeypatch.setattr(rule, "link_speed_findings", lambda ctx: [{"kind": "link_speed_mismatch"}])
    found = findings_of(path)
    assert KIND not in kinds(found), show(found)


@pytest.mark.parametrize("gbps,row,ns", [(100.0, 100.0, 2017.28), (400.0, 100.0, 2017.28), (40.0, 40.0, 1510.4),
                                         (25.0, 10.0, 3788.8), (10.0, 10.0, 3788.8), (1.0, 1.0, 1024.0),
                                         (0.01, 0.1, 57600.0)])
def test_the_response_bound_takes_the_row_at_or_below_the_speed(gbps, row, ns):
    bound, speed, _ = response_bound_ns(gbps)
    assert speed == row and bound == pytest.approx(ns)


@pytest.mark.parametrize("value", [-1.0, float("inf")])
def test_a_bad_margin_is_a_one_line_refusal(value):
    with pytest.raises(BadInput) as err:
        load_config(pause_response_margin_us=value)
    assert "pause_response_margin_us" in str(err.value) and "\n" not in str(err.value)


def test_its_display_filter_is_the_kind_alone_so_the_xoffs_show_with_the_late_frames():
    """The late frames have queue pairs, the XOFFs that began their paused periods have none: a
    filter on the finding's QPs would hide the pauses it is about."""
    from roceview.diagnose.evidence_frames import finding_filter

    f = one(findings_of(_path("pfc-violator", 0)), KIND)
    assert finding_filter(f) == 'roceview.finding == "pfc_violation"'


def _rewritten(name: str, tmp_path, change) -> str:
    """The scenario's capture with its records changed by `change` (records -> records)."""
    from helpers import transforms as tf

    link, records = tf.read_pcap(_path(name, 0))
    out = str(tmp_path / f"{name}-changed.pcap")
    tf.write_pcap(out, link, change(records))
    return out


def test_frames_a_host_nic_paused_are_the_switch_ports_not_their_source_hosts(tmp_path):
    """A host's NIC pauses its link: what still comes down that link is sent by the switch port,
    whichever host the frames are from."""
    from helpers import transforms as tf
    from roceview.generate.frames import PfcFrame, pfc_frame

    xoff = pfc_frame(PfcFrame(bytes.fromhex("0ec0de000010"), 1 << 3, (0, 0, 0, 65535, 0, 0, 0, 0)))
    path = _rewritten("hol-victim", tmp_path, lambda r: sorted(r + [tf.Record(r[0].ts + 3000, xoff)],
                                                                key=lambda x: x.ts))
    f = one(findings_of(path), KIND)
    assert f["summary"].startswith("the switch port toward 10.0.0.1 kept sending on priority 3 while "
                                   "0e:c0:de:00:00:10 paused it"), f["summary"]
    assert f["advice"].startswith("On the switch port toward 10.0.0.1: check that PFC is enabled for priority 3")
    assert "tx_prio3_pause" in f["advice"]


def test_a_pausing_mac_that_several_hosts_send_to_is_not_judged(tmp_path, monkeypatch):
    """One router MAC on every port: a pause the switch sent one host looks like a pause of every
    link, and the other hosts' frames, which nothing paused, would look late."""
    from helpers import transforms as tf
    from roceview.generate.frames import PfcFrame, pfc_frame
    from roceview.generate.network import Network

    monkeypatch.setattr(Network, "pause_lag", lambda self, *a, **k: None)     # every NIC obeys
    path = str(tmp_path / "obeying.pcap")
    write_capture(generate("pfc-violator", seed=0), path)
    link, records = tf.read_pcap(path)
    records = [r for r in records if r.frame[12:14] != b"\x88\x08"]          # its own pauses dropped

    def port(quanta: int) -> bytes:
        return pfc_frame(PfcFrame(bytes.fromhex("0e5c0000ff10"), 1 << 3, (0, 0, 0, quanta, 0, 0, 0, 0)))

    t0 = records[0].ts       # one pause of 10.0.0.1's link only, 22 us long
    records = sorted(records + [tf.Record(t0 + 8000, port(65535)), tf.Record(t0 + 30000, port(0))],
                     key=lambda r: r.ts)
    records = [tf.Record(r.ts, _one_router_mac(r.frame)) for r in records]     # every port's MAC the same
    path = str(tmp_path / "one-router-mac.pcap")
    tf.write_pcap(path, link, records)
    found = findings_of(path)
    assert KIND not in kinds(found) and "hol_victim" not in kinds(found), show(found)
    assert "pfc_pause" in kinds(found)


def _one_router_mac(frame: bytes) -> bytes:
    out = bytearray(frame)
    for at in (0, 6):
        if out[at:at + 5] == bytes.fromhex("0e5c0000ff"):
            out[at + 5] = 0x10
    return bytes(out)


def _ip_of(frame: bytes) -> tuple[bytes, bytes] | None:
    """(source, destination) IPv4 address of an Ethernet frame (VLAN-tagged or not), else None."""
    at = 18 if frame[12:14] == b"\x81\x00" else 14
    if frame[at - 2:at] != b"\x08\x00":
        return None
    return frame[at + 12:at + 16], frame[at + 16:at + 20]


def _ip(text: str) -> bytes:
    return bytes(int(x) for x in text.split("."))


def test_a_single_pair_across_a_routed_switch_blames_the_nic_that_sent_the_late_frames(tmp_path):
    """One host pair mirrored on one link: the switch port sends only the peer's replies, one
    address from one MAC, as a NIC would; the late frames' source MAC is the sender's NIC."""
    pair = {_ip("10.0.0.1"), _ip("10.0.0.4")}
    pauser = bytes.fromhex("0e5c0000ff10")

    def keep(records):
        return [r for r in records if (r.frame[6:12] == pauser and r.frame[12:14] == b"\x88\x08")
                or (_ip_of(r.frame) is not None and set(_ip_of(r.frame)) == pair)]

    f = one(findings_of(_rewritten("pfc-violator", tmp_path, keep)), KIND)
    assert f["summary"].startswith("10.0.0.1 kept sending on priority 3 while 0e:5c:00:00:ff:10 paused it"), f["summary"]
    assert f["advice"].startswith("On 10.0.0.1's NIC")


def test_a_host_with_two_addresses_on_one_nic_is_still_one_link(tmp_path):
    """10.0.0.1's link alone, its flows with 10.0.0.5 from a second address on the same NIC: the
    frames to the switch port come from one MAC, so its pauses are judged."""
    nic, pauser = bytes.fromhex("0ec0de000010"), bytes.fromhex("0e5c0000ff10")
    old, new, peer = _ip("10.0.0.1"), _ip("10.0.1.1"), _ip("10.0.0.5")

    def second_address(frame: bytes) -> bytes:
        ips = _ip_of(frame)
        if ips is None or set(ips) != {old, peer}:
            return frame
        at = (18 if frame[12:14] == b"\x81\x00" else 14) + (12 if ips[0] == old else 16)
        return frame[:at] + new + frame[at + 4:]

    def link(records):
        from helpers import transforms as tf

        mine = [r for r in records if nic in (r.frame[0:6], r.frame[6:12])
                or (r.frame[6:12] == pauser and r.frame[12:14] == b"\x88\x08")]
        return [tf.Record(r.ts, second_address(r.frame)) for r in mine]

    found = findings_of(_rewritten("pfc-violator", tmp_path, link))
    late = [f for f in found if f["kind"] == KIND]
    assert {f["summary"].split(" kept")[0] for f in late} == {"10.0.0.1", "10.0.1.1"}, show(found)
