"""The PFC storm says which rule fired and spans the episode; every
PFC/PAUSE finding states the link speed its pause times assume, and link_speed_mismatch says
when the capture contradicts it.

The storm rule reads pause periods from the event log, which keeps
only the first MAX_PER_KIND events of a kind (1 M pauses: 250,000). The finding must not state the
storm's length and frame count of that prefix as if they were the whole capture's.

Pfc.pause_frames reads the events' pfc_priority / pfc_quanta columns into numpy rows; they
must equal what each event's detail text says (the per-event parse they replaced: time order,
then quanta), for several MACs, priorities, 802.3x PAUSE and XONs."""
from __future__ import annotations

from helpers.findings import MACS, SYN_NAK_SEQ, Cap, listing, one
from roceview.analysis.events import EventLog
import re
from collections import defaultdict
import numpy as np
from helpers.findings import SWITCH_MAC
from roceview.analysis import Analyzer
from roceview.diagnose.config import Config
from roceview.diagnose.context import Context
from roceview.diagnose.pfc import pause_frames
from roceview.packets.read import iter_batches
from test_boundaries import write_pcapng


XOFF_100G_NS = 335_539          # 65535 quanta x 512 bit times at 100 Gb/s


def _xoffs(gap_ns: int, total_ns: int = 150_000_000) -> Cap:
    c = Cap()
    for _ in range(total_ns // gap_ns):
        c.pfc(0xFFFF).at(gap_ns - 100)
    return c.pfc(0)


def test_pauses_that_lapse_a_moment_are_a_storm_by_share_over_the_whole_episode(tmp_path):
    found = _xoffs(336_000).findings(tmp_path)            # each XOFF lapses 0.46 us before the next
    assert listing(found) == [("critical", "pfc_storm"), ("info", "pfc_pause")]   # no RoCE on priority 3
    storm = one(found, "pfc_storm")
    assert "paused 99.9% of 149.856 ms" in storm["summary"] and "at least 99% of a 100 ms window" in storm["summary"]
    assert "continuously" not in storm["summary"] and "each refreshed" not in storm["evidence"]
    assert "rule: paused share of a window" in storm["evidence"]
    assert "446 pause frames in 446 paused periods: the pauses lapsed for up to 461 ns" in storm["evidence"]
    assert storm["end_ts"] - storm["start_ts"] == 446 * 336_000 - 336_000 + XOFF_100G_NS   # first XOFF to the last's end


def test_refreshed_pauses_are_a_continuous_storm_spanning_the_period(tmp_path):
    storm = one(_xoffs(300_000).findings(tmp_path), "pfc_storm")
    assert "paused continuously for 150.000 ms (watchdog threshold 100 ms)" in storm["summary"]
    assert "rule: continuous pause" in storm["evidence"]
    assert "500 pause frames in the episode, each refreshed before the previous one ran out" in storm["evidence"]
    assert storm["end_ts"] - storm["start_ts"] == 500 * 300_000


def test_a_short_dense_burst_of_pauses_is_no_storm(tmp_path):
    found = _xoffs(300_000, total_ns=60_000_000).at(100_000_000).pfc(0).findings(tmp_path)
    assert listing(found) == [("info", "pfc_pause")]      # 60 ms paused: 60 % of any 100 ms window, no RoCE


def _roce_then(c: Cap, prio: int = 3) -> Cap:
    """Ten ECN-marked RDMA WRITEs answered with a CNP and an ACK on `prio` (PCP), then c's frames."""
    head = Cap()
    for psn in range(10):
        head.req(0, 1, psn, pcp=prio, ecn=3)
    head.cnp(1, 0, pcp=prio).ack(1, 0, 9, pcp=prio)
    shift = head.t - Cap().t                     # both start at the same T0
    head.frames += c.frames
    head.ts += [t + shift for t in c.ts]
    head.t = c.t + shift
    return head


def test_a_long_pause_on_the_roce_priority_is_a_warning(tmp_path):
    found = _roce_then(_xoffs(300_000, total_ns=60_000_000).at(100_000_000).pfc(0)).findings(tmp_path)
    assert one(found, "pfc_pause")["severity"] == "warning", listing(found)


def test_a_long_pause_on_a_priority_without_roce_is_info_and_says_so(tmp_path):
    found = _roce_then(_xoffs(300_000, total_ns=60_000_000).at(100_000_000).pfc(0), prio=5).findings(tmp_path)
    pause = one(found, "pfc_pause")
    assert pause["severity"] == "info" and "no RoCE data, ACK or CNP was seen on priority 3" in pause["evidence"]


def test_a_host_pausing_a_priority_without_roce_is_no_slow_receiver(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(0, 1, psn, pcp=3)
    c.ack(1, 0, 9, pcp=3).pfc(0xFFFF, mac=MACS[1], prio=5).at(3000).pfc(0, mac=MACS[1], prio=5)
    found = c.findings(tmp_path)
    assert not {"slow_receiver", "priority_mismatch"} & {k for _, k in listing(found)}, listing(found)


def test_every_pfc_finding_states_the_assumed_link_speed(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(0, 1, psn)
    c.pfc(0xFFFF).at(3000).pfc(0).ack(1, 0, 9)
    found = c.findings(tmp_path)
    assert listing(found) == [("warning", "pfc_pause"), ("warning", "pfc_without_ecn")]
    for f in found:
        assert "pause times at an assumed 100 Gb/s link (--link-speed)" in f["evidence"], f["kind"]
    assert "assumed 100 Gb/s link (--link-speed)" in one(found, "pfc_pause")["summary"]


def _usb_nic_pauses() -> Cap:
    """The netdev capture's shape: an XON then an XOFF 0xffff from a MAC that sends nothing else."""
    return Cap().pause(0, mac=bytes(6)).at(1000).pause(0xFFFF, mac=bytes(6))


def test_pause_only_capture_without_roce_asks_for_the_link_speed(tmp_path):
    found = _usb_nic_pauses().findings(tmp_path)
    # the capture contradicts the assumed speed: the paused share computed at it is only info
    assert listing(found) == [("info", "link_speed_mismatch"), ("info", "pfc_pause")]
    doubt = one(found, "link_speed_mismatch")
    assert "at 100 Mb/s 335.5 ms, not 335.5 us" in doubt["summary"] and "--link-speed" in doubt["advice"]


def test_pause_only_capture_at_a_given_low_speed_is_not_questioned(tmp_path):
    found = _usb_nic_pauses().findings(tmp_path, link_speed=0.1)
    assert listing(found) == [("info", "pfc_pause")]      # info: no RoCE in the capture to be paused
    assert "longest 335.539 ms; pause times at an assumed 0.1 Gb/s link" in one(found, "pfc_pause")["summary"]


def _heavy(c: Cap, packets: int) -> Cap:
    for psn in range(packets):
        c.roce(0, 1, 0x0A, psn, 4096, reth=(0x1000, 0x1234, 4096), step=200)   # 4.1 kB per 200 ns: ~165 Gb/s
    return c.ack(1, 0, packets - 1)


def test_traffic_faster_than_the_assumed_link_is_link_speed_mismatch(tmp_path):
    c = _heavy(Cap().pfc(0xFFFF, mac=MACS[1]).at(1000).pfc(0, mac=MACS[1]), 6000)
    found = c.findings(tmp_path)
    doubt = one(found, "link_speed_mismatch")
    # 6,000 frames of 4,174 bytes, one per 200 ns: 1 ms holds 5,000 of them, 167 Gb/s out of the writer
    assert doubt["severity"] == "info" and "out of 10.0.0.1 reached 167 Gb/s over 1 ms" in doubt["summary"]


def test_traffic_within_the_given_link_speed_raises_no_doubt(tmp_path):
    c = _heavy(Cap().pfc(0xFFFF, mac=MACS[1]).at(1000).pfc(0, mac=MACS[1]), 6000)
    found = c.findings(tmp_path, link_speed=400.0)
    assert "link_speed_mismatch" not in {f["kind"] for f in found}, listing(found)


def test_a_storm_beyond_the_event_budget_says_it_saw_only_the_first_frames(tmp_path, monkeypatch):
    monkeypatch.setattr(EventLog.__init__, "__defaults__", (400,))     # 1,000 XOFFs, 400 kept as events
    c = Cap()
    for _ in range(1000):
        c.pfc(0xFFFF).at(300_000 - 100)                                  # refreshed every 300 us: 300 ms paused
    found = c.findings(tmp_path)
    storm = one(found, "pfc_storm")
    assert "in the first 400 pause/resume frames of this source" in storm["summary"], storm["summary"]
    assert "600 later pause/resume frames of the capture were not kept" in storm["summary"]
    assert "1,000 pause frames" in one(found, "pfc_pause")["summary"]        # the PFC table is exact


def test_a_storm_within_the_budget_says_nothing_of_it(tmp_path):
    c = Cap()
    for _ in range(1000):
        c.pfc(0xFFFF).at(300_000 - 100)
    storm = one(c.findings(tmp_path), "pfc_storm")
    assert "paused continuously for 299.700 ms" in storm["summary"] and "not kept" not in storm["summary"]


PAUSE_DETAIL = re.compile(r"priority (\w+) quanta (\d+)")   # the detail text's words


def _per_event(ctx) -> dict:
    rows = defaultdict(list)
    for kind in ("pfc_pause", "pfc_resume"):
        for mac in ctx.flows_with(kind):
            ev = ctx.ev(kind, mac)
            for ts, d in zip(ev.ts.tolist(), ev.detail):
                m = PAUSE_DETAIL.search(d or "")
                if m:
                    rows[(mac, m.group(1))].append((ts, int(m.group(2))))
    return {k: sorted(v) for k, v in rows.items()}


def test_pause_frames_equal_the_per_event_parse(tmp_path):
    c = Cap()
    rng = np.random.default_rng(7)
    for i in range(600):
        mac = (SWITCH_MAC, MACS[1], MACS[2])[i % 3]
        if i % 7 == 0:
            c.pause(int(rng.choice([0, 0x8000, 0xFFFF])), mac=mac)
        else:
            c.pfc(int(rng.choice([0, 0x100, 0xFFFF])), mac=mac)
        c.at(int(rng.integers(0, 3000)))
    path = tmp_path / "p.pcapng"
    write_pcapng(path, c.frames, c.ts)
    an = Analyzer()
    for batch in iter_batches([str(path)], warn=lambda m: None):
        an.feed(batch)
    ctx = Context(an.finish(files=[str(path)]), Config())
    got = pause_frames(ctx)
    want = _per_event(ctx)
    assert sorted(got) == sorted(want) and len(want) == 6
    for key, rows in want.items():
        assert got[key].tolist() == [list(r) for r in rows], key
    assert pause_frames(ctx) is got                                   # built once per Context


def test_a_pause_on_the_priority_the_cnps_use_counts_as_roce(tmp_path):
    c = Cap()
    for psn in range(10):
        c.req(0, 1, psn, pcp=3, ecn=3)
    c.cnp(1, 0, pcp=6).ack(1, 0, 9, pcp=3)
    for _ in range(30):
        c.pfc(0xFFFF, prio=6).at(300_000)
    pause = one(c.pfc(0, prio=6).findings(tmp_path), "pfc_pause")
    assert pause["severity"] == "warning" and "no RoCE" not in pause["evidence"]


def _loss_beside_pauses_on_5(c: Cap) -> Cap:
    for psn in (0, 1, 2, 4, 5):                 # 3 lost in the network
        c.req(0, 1, psn)
    c.ack(1, 0, 3, syndrome=SYN_NAK_SEQ)
    for psn in (3, 4, 5):                       # go-back-N
        c.req(0, 1, psn)
    return c.ack(1, 0, 5).pfc(0xFFFF, prio=5).at(1000).pfc(0, prio=5)


def test_loss_advice_keeps_pfc_on_the_priorities_seen_paused(tmp_path):
    loss = one(_loss_beside_pauses_on_5(Cap()).findings(tmp_path), "network_loss")
    assert "--pfc 0,0,0,1,0,1,0,0" in loss["advice"] and "prio-pfc 3:on 5:on" in loss["advice"]


def test_8023x_advice_names_the_roce_priorities_and_the_paused_ones(tmp_path):
    c = _loss_beside_pauses_on_5(Cap()).pause(0xFFFF).at(1000).pause(0)
    pause = [f for f in c.findings(tmp_path) if f["kind"] == "pfc_pause" and "802.3x" in f["summary"]]
    assert len(pause) == 1 and "prio-pfc 3:on 5:on" in pause[0]["advice"] and "--pfc 0,0,0,1,0,1,0,0" in pause[0]["advice"]
