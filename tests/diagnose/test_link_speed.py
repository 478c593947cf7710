"""Link_speed_mismatch must not call a healthy line-rate host's link
faster because a software-timestamped capture bunched its packets into one window.

The report states the link speed pause times were computed at: quanta are
512 bit times, so a pause's length depends on a speed the capture rarely shows."""
from __future__ import annotations

from helpers.findings import MACS, Cap, listing
import subprocess
import sys
from pathlib import Path


MS = 1_000_000
FRAME_NS = 336          # a 4,174-byte WRITE frame every 336 ns: 99.4 Gb/s of frame bytes, a 100 Gb/s wire
STALL_NS = 60_000       # the capture thread stalls 60 us before the first ms and stamps the backlog after it


def _line_rate_with_stalls(c: Cap, packets: int) -> Cap:
    t0 = c.t - c.t % MS + MS
    for psn in range(packets):
        t = t0 + psn * FRAME_NS
        late = t0 + MS - STALL_NS <= t < t0 + MS              # caught up just after the ms boundary
        c.t = t - t % MS + MS + (t % MS - (MS - STALL_NS)) // 100 if late else t
        c.roce(0, 1, 0x0A, psn, 4096, reth=(0x1000, 0x1234, 4096))
    return c.ack(1, 0, packets - 1)


def test_line_rate_traffic_with_timestamp_stalls_is_no_link_speed_mismatch(tmp_path):
    c = _line_rate_with_stalls(Cap().pfc(0xFFFF, mac=MACS[1]).at(1000).pfc(0, mac=MACS[1]), 9_000)
    found = c.findings(tmp_path)
    assert "link_speed_mismatch" not in {f["kind"] for f in found}, listing(found)


def test_the_same_traffic_at_twice_the_assumed_speed_is_still_a_mismatch(tmp_path):
    c = _line_rate_with_stalls(Cap().pfc(0xFFFF, mac=MACS[1]).at(1000).pfc(0, mac=MACS[1]), 9_000)
    found = c.findings(tmp_path, link_speed=50.0)
    doubt = [f for f in found if f["kind"] == "link_speed_mismatch"]
    assert len(doubt) == 1, listing(found)
    assert "reached 105 Gb/s over 1 ms" in doubt[0]["summary"], doubt[0]["summary"]
    assert "each frame twice" in doubt[0]["summary"]


def test_a_pause_only_capture_is_not_called_a_slow_link(tmp_path):
    """mlx5 ports send 802.3x PAUSE by default when PFC is off, at 25-100 Gb/s: a PAUSE-only
    capture shows no speed, so the finding asks for it and does not claim a 1 Gb/s link."""
    found = Cap().pause(0, mac=bytes(6)).at(1000).pause(0xFFFF, mac=bytes(6)).findings(tmp_path)
    doubt = [f for f in found if f["kind"] == "link_speed_mismatch"]
    assert len(doubt) == 1, listing(found)
    assert "1 Gb/s and slower links" not in doubt[0]["summary"]
    assert "nothing here shows the link speed" in doubt[0]["summary"]
    assert "at 100 Mb/s 335.5 ms, not 335.5 us" in doubt[0]["summary"]


def _findings_with_bucket(path, bucket_ms: float) -> list[dict]:
    from roceview.analysis import Analyzer
    from roceview.diagnose import FactCollector, find
    from roceview.packets.read import iter_batches

    analyzer, facts = Analyzer(bucket_ms=bucket_ms), FactCollector()
    for batch in iter_batches([str(path)], warn=lambda m: None):
        analyzer.feed(batch)
        facts.feed(batch)
    return find(analyzer.finish(files=[str(path)]), facts=facts.finish())


def test_timeline_buckets_that_do_not_tile_the_window_add_no_traffic(tmp_path):
    """--bucket 0.7: a 1 ms window keyed by bucket start held one or two buckets (1.4 ms of
    traffic), so a 99.4 Gb/s line-rate host read as 139 Gb/s; windows are whole buckets now."""
    c = Cap().pfc(0xFFFF, mac=MACS[1]).at(1000).pfc(0, mac=MACS[1])
    for psn in range(9_000):
        c.t += FRAME_NS - 100
        c.roce(0, 1, 0x0A, psn, 4096, reth=(0x1000, 0x1234, 4096))
    path = tmp_path / "cap.pcapng"
    from test_boundaries import write_pcapng

    write_pcapng(path, c.frames, c.ts)
    found = _findings_with_bucket(path, 0.7)
    assert "link_speed_mismatch" not in {f["kind"] for f in found}, listing(found)


REPO = Path(__file__).resolve().parents[2]


def _report(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "roceview", "analyze", *args], cwd=REPO, capture_output=True,
                          text=True, check=True, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"}).stdout


def test_the_pfc_table_names_the_assumed_link_speed():
    out = _report("captures/pfc-storm.pcap", "--link-speed", "25")
    assert "pause times at an assumed 25 Gb/s link (--link-speed)" in out.split("PFC / PAUSE", 1)[1]


def test_no_speed_line_without_pause_frames():
    assert "assumed" not in _report("captures/clean.pcap").split("PFC / PAUSE", 1)[1]
