"""A real live capture: frames of generated scenarios (a PSN gap and NAKs, CE marks, PFC
pauses) sent over a veth pair between two network namespaces this test creates, captured by
`roceview live -i` in the other namespace; every per-flow counter equals `analyze` on the
capture that was sent. Root only (namespaces, AF_PACKET); frames go on that veth only.

Run as a script (`python tests/live/test_live_netns.py IFACE CAPTURE`) it is the sender: each
frame of CAPTURE sent on IFACE through an AF_PACKET socket at its capture time.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("network-loss-receiver-side", "cnp-missing", "pfc-storm")
GAP_S = 0.2                  # between scenarios in the sent capture
# qps.csv columns that count (first_ts/last_ts, RTT and goodput are times of arrival here)
FLOW_COUNTERS = ("flow", "src_ip", "dst_ip", "dest_qp", "peer_qp", "transport", "packets", "bytes",
                 "data_packets", "payload_bytes", "acks", "naks_seq", "naks_rnr", "naks_other", "gap_events",
                 "gap_psns", "unrecovered_psns", "retransmitted_packets", "retransmitted_bytes", "ecn_not_ect",
                 "ecn_ce", "cnp_packets")
PFC_COUNTERS = ("src_mac", "priority", "pause_frames", "resume_frames", "pause_quanta")


def send(iface: str, capture: str) -> None:
    """Send every frame of `capture` on `iface`, paced by its timestamps."""
    import socket

    from roceview.capture.readers import read_records

    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    start, first = time.monotonic(), None
    for chunk in read_records(capture, 1 << 16, lambda m: None):
        for i in range(chunk.n):
            ts = int(chunk.ts[i])
            first = ts if first is None else first
            delay = start + (ts - first) / 1e9 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sock.send(chunk.frame(i))
    sock.close()


def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def _can_netns() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, AF_PACKET)"
    if shutil.which("ip") is None or shutil.which("tcpdump") is None:
        return "needs iproute2 and tcpdump"
    return None


@pytest.fixture
def veth_pair():
    """Two namespaces joined by a veth pair, names unique to this run; always removed."""
    reason = _can_netns()
    if reason:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:6]
    ns_a, ns_b, if_a, if_b = f"rvA-{tag}", f"rvB-{tag}", f"rvA{tag}", f"rvB{tag}"
    try:
        made = _sh("ip", "netns", "add", ns_a, check=False)
        if made.returncode:
            pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
        _sh("ip", "netns", "add", ns_b)
        _sh("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
        for ns, iface in ((ns_a, if_a), (ns_b, if_b)):
            # no IPv6: router solicitations and MLD reports would be captured beside the frames sent
            _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1")
            _sh("ip", "-n", ns, "link", "set", iface, "mtu", "9000", "up")
        yield ns_a, if_a, ns_b, if_b
    finally:
        for ns in (ns_a, ns_b):
            _sh("ip", "netns", "del", ns, check=False)     # deletes the veth with it


def _sent_capture(tmp_path: Path) -> Path:
    """The scenarios one after the other, GAP_S apart, as one capture."""
    import numpy as np

    from roceview.capture.readers import read_records
    from roceview.capture.writer import write_pcap

    frames, lengths, stamps, offset = [], [], [], 0
    for name in SCENARIOS:
        path = tmp_path / f"{name}.pcap"
        subprocess.run([sys.executable, "-m", "roceview", "generate", name, "-o", str(path)], cwd=REPO,
                       check=True, capture_output=True)
        first = last = None
        for chunk in read_records(str(path), 1 << 16, lambda m: None):
            for i in range(chunk.n):
                frames.append(chunk.frame(i))
            first = int(chunk.ts[0]) if first is None else first
            last = int(chunk.ts[-1])
            lengths.extend(chunk.cap.tolist())
            stamps.extend((chunk.ts - first + offset).tolist())
        offset += last - first + int(GAP_S * 1e9)
    sent = tmp_path / "sent.pcap"
    write_pcap(sent, np.frombuffer(b"".join(frames), np.uint8), np.array(lengths, np.int64),
               np.array(stamps, np.int64) + 1_700_000_000 * 10**9)
    return sent


def packet_count(path: Path) -> int:
    from roceview.capture.readers import read_records

    return sum(chunk.n for chunk in read_records(str(path), 1 << 16, lambda m: None))


def _rows(path: Path, columns) -> list[tuple]:
    with open(path, newline="") as fh:
        return sorted(tuple(row[c] for c in columns) for row in csv.DictReader(fh))


def test_live_interface_matches_analyze_of_the_sent_capture(veth_pair, tmp_path):
    ns_a, if_a, ns_b, if_b = veth_pair
    sent = _sent_capture(tmp_path)
    live_dir, ref_dir, saved = tmp_path / "live", tmp_path / "ref", tmp_path / "saved.pcap"
    live = subprocess.Popen(["ip", "netns", "exec", ns_b, sys.executable, "-m", "roceview", "live", "-i", if_b,
                             "--duration", "6", "--no-tui", "--csv", str(live_dir), "-w", str(saved),
                             "--json", str(tmp_path / "live.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        status = live.stderr.readline()               # once a second; tcpdump listens once it stops saying so
        while status.startswith("live ") and "capture tool is starting" in status:
            status = live.stderr.readline()
        assert status.startswith("live "), status + live.stderr.read()
        subprocess.run(["ip", "netns", "exec", ns_a, sys.executable, __file__, if_a, str(sent)], cwd=REPO,
                       check=True, capture_output=True, timeout=60)
        out, err = live.communicate(timeout=60)
    finally:
        if live.poll() is None:
            live.kill()
    assert live.returncode == 0, err
    assert "stopped by duration" in out
    subprocess.run([sys.executable, "-m", "roceview", "analyze", str(sent), "--csv", str(ref_dir)], cwd=REPO,
                   check=True, capture_output=True)
    live_flows, ref_flows = _rows(live_dir / "qps.csv", FLOW_COUNTERS), _rows(ref_dir / "qps.csv", FLOW_COUNTERS)
    assert live_flows == ref_flows
    assert any(int(r[FLOW_COUNTERS.index("gap_events")]) for r in ref_flows)
    assert any(int(r[FLOW_COUNTERS.index("naks_seq")]) for r in ref_flows)
    assert any(int(r[FLOW_COUNTERS.index("ecn_ce")]) for r in ref_flows)
    ref_pfc = _rows(ref_dir / "pfc.csv", PFC_COUNTERS)
    assert ref_pfc and _rows(live_dir / "pfc.csv", PFC_COUNTERS) == ref_pfc    # PFC frames cross a veth
    summary = json.loads((tmp_path / "live.json").read_text())["summary"]
    live_counts = summary["live"]
    assert live_counts["kernel_drops"] == 0 and live_counts["roceview_drops"] == 0
    assert live_counts["captured"] == live_counts["packets_analyzed"] == summary["packets"]
    assert packet_count(saved) == summary["packets"]


def _tcpdumps_on(iface: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", f"tcpdump -i {iface} "], capture_output=True, text=True).stdout
    return found.splitlines()


def test_a_signal_mid_capture_leaves_whole_records_and_no_tcpdump(veth_pair, tmp_path, sig=signal.SIGTERM, code=143):
    """SIGTERM (SIGHUP takes the same way) while frames arrive: roceview ends at once, its -w file
    ends at a whole record, and the tcpdump it started (in a session of its own, so a Ctrl-C
    reaches roceview only) does not stay behind on the interface."""
    ns_a, if_a, ns_b, if_b = veth_pair
    sent = tmp_path / "sent.pcap"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "network-loss-receiver-side", "-o", str(sent)],
                   cwd=REPO, check=True, capture_output=True)
    saved = tmp_path / "saved.pcap"
    live = subprocess.Popen(["ip", "netns", "exec", ns_b, sys.executable, "-m", "roceview", "live", "-i", if_b,
                             "--no-tui", "-w", str(saved)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        status = live.stderr.readline()
        while status.startswith("live ") and "capture tool is starting" in status:
            status = live.stderr.readline()
        assert status.startswith("live "), status + live.stderr.read()
        subprocess.run(["ip", "netns", "exec", ns_a, sys.executable, __file__, if_a, str(sent)], cwd=REPO,
                       check=True, capture_output=True, timeout=60)
        while " 0 packets" in status:                 # until roceview has read what was sent
            status = live.stderr.readline()
            assert status.startswith("live "), status + live.stderr.read()
        live.send_signal(sig)
        _, err = live.communicate(timeout=60)
    finally:
        if live.poll() is None:
            live.kill()
    assert live.returncode == code and "Traceback" not in err, err
    warnings: list[str] = []
    from roceview.capture.readers import read_records

    assert sum(c.n for c in read_records(str(saved), 1 << 16, warnings.append)) > 0 and warnings == []
    if shutil.which("tshark"):
        read = subprocess.run(["tshark", "-r", str(saved)], capture_output=True, text=True, timeout=120)
        assert read.returncode == 0 and "cut short" not in read.stderr, read.stderr
    deadline = time.monotonic() + 10
    while _tcpdumps_on(if_b) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tcpdumps_on(if_b) == []


def _steady_capture(tmp_path: Path, frames: int, every_ns: int) -> Path:
    """`frames` frames of a generated scenario (1 KiB WRITEs and their ACKs, cycled), `every_ns` apart."""
    import numpy as np

    from roceview.capture.readers import read_records
    from roceview.capture.writer import write_pcap

    src = tmp_path / "src.pcap"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "incast", "-o", str(src)], cwd=REPO, check=True,
                   capture_output=True)
    one = [chunk.frame(i) for chunk in read_records(str(src), 1 << 16, lambda m: None) for i in range(chunk.n)]
    picked = [one[k % len(one)] for k in range(frames)]
    sent = tmp_path / "steady.pcap"
    write_pcap(sent, np.frombuffer(b"".join(picked), np.uint8), np.array([len(f) for f in picked], np.int64),
               1_700_000_000 * 10**9 + every_ns * np.arange(frames, dtype=np.int64))
    return sent


def test_frames_that_arrive_while_roceview_is_held_up_wait_in_the_kernel_buffer(veth_pair, tmp_path):
    """What arrives while roceview does not read (the TUI's loader building a snapshot with the
    findings of a long capture) waits in the kernel's capture buffer: roceview stopped while
    16,000 frames (about 17 MB) arrive at 10,000/s, then let go, has every one and no kernel
    drop. tcpdump's default 2 MiB buffer held a fifth of a second of them."""
    ns_a, if_a, ns_b, if_b = veth_pair
    frames = 16_000
    sent = _steady_capture(tmp_path, frames, 100_000)
    live = subprocess.Popen(["ip", "netns", "exec", ns_b, sys.executable, "-m", "roceview", "live", "-i", if_b,
                             "--count", str(frames), "--duration", "40", "--no-tui",
                             "--json", str(tmp_path / "live.json")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        status = live.stderr.readline()
        while status.startswith("live ") and "capture tool is starting" in status:
            status = live.stderr.readline()
        assert status.startswith("live "), status + live.stderr.read()
        live.send_signal(signal.SIGSTOP)                # `ip netns exec` became roceview's python
        try:
            subprocess.run(["ip", "netns", "exec", ns_a, sys.executable, __file__, if_a, str(sent)], cwd=REPO,
                           check=True, capture_output=True, timeout=60)
        finally:
            live.send_signal(signal.SIGCONT)
        out, err = live.communicate(timeout=90)
    finally:
        if live.poll() is None:
            live.kill()
    assert live.returncode == 0, err
    s = json.loads((tmp_path / "live.json").read_text())["summary"]
    assert (s["live"]["kernel_drops"], s["packets"]) == (0, frames), out


if __name__ == "__main__":
    send(sys.argv[1], sys.argv[2])
