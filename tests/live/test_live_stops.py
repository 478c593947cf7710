"""Every way `roceview live -r - -w FILE` can be stopped leaves FILE ending at the last whole
record (tshark and tcpdump read it without "cut short in the middle of a packet"): SIGTERM and
SIGHUP while a record is half read kept the half; a SIGINT delivered twice at once (as
`timeout -s INT` does: the child, then its process group) ended at once with exit 130 and no
CSV/JSON; a stall inside the file header then a stop left an unreadable file. A SIGINT the
parent set to be ignored (`roceview live ... &` in a script) stays ignored."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from live_feed import REPO, Fed, check_whole, record_ends

LOSS = REPO / "captures" / "network-loss-receiver-side.pcap"


def capture_of(tmp_path, kind: str) -> bytes:
    if kind == "pcap":
        return LOSS.read_bytes()
    path = tmp_path / "loss.pcapng"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "network-loss-receiver-side", "-o", str(path)],
                   cwd=REPO, check=True, capture_output=True)
    return path.read_bytes()


def with_half_a_record(data: bytes) -> bytes:
    """The capture, then the first 30 bytes of its first record again: a record never finished."""
    first = record_ends(data)[1 if data[:4] == b"\x0a\x0d\x0d\x0a" else 0]
    return data + data[first:first + 30]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_sigterm_and_sighup_mid_record_leave_whole_records(kind, sig, code, tmp_path):
    data = capture_of(tmp_path, kind)
    saved = tmp_path / f"saved.{kind}"
    fed = Fed(tmp_path, with_half_a_record(data), "-w", saved)
    fed.wait_for_status()
    fed.signal(sig)
    got, _, err = fed.finish()
    assert got == code and "Traceback" not in err, err
    assert saved.read_bytes() == data
    check_whole(saved, data)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []      # no .part left


def test_a_sigint_delivered_twice_at_once_stops_cleanly_and_writes_the_outputs(tmp_path):
    data = LOSS.read_bytes()
    saved = tmp_path / "saved.pcap"
    fed = Fed(tmp_path, with_half_a_record(data), "-w", saved, "--csv", tmp_path / "csv", "--json", tmp_path / "l.json")
    fed.wait_for_status()
    fed.signal(signal.SIGINT, signal.SIGINT, gap_s=0.1)   # the second after the first was handled
    code, out, err = fed.finish()
    assert code == 0, err
    assert b"stopped by interrupt" in out
    assert saved.read_bytes() == data
    assert (tmp_path / "csv" / "qps.csv").exists()
    assert json.loads((tmp_path / "l.json").read_text())["summary"]["live"]["stopped_by"] == "interrupt"


def test_a_second_sigint_later_ends_at_once_with_whole_records(tmp_path):
    """A Ctrl-C pressed again (not the same one delivered twice) still ends at once: exit 130."""
    data = LOSS.read_bytes()
    saved = tmp_path / "saved.pcap"
    fed = Fed(tmp_path, with_half_a_record(data), "-w", saved)
    fed.wait_for_status()
    fed.signal(signal.SIGINT, signal.SIGINT, gap_s=1.5)
    code, _, err = fed.finish()
    assert code in (0, 130) and "Traceback" not in err, err
    assert saved.read_bytes() == data


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_inside_the_file_header_leaves_no_unreadable_file(sig, tmp_path):
    saved = tmp_path / "saved.pcap"
    fed = Fed(tmp_path, LOSS.read_bytes()[:10], "-w", saved)
    fed.wait_for_status()
    fed.signal(sig)
    code, _, err = fed.finish()
    assert "Traceback" not in err and "link type" not in err, err
    assert code in (0, 143), err
    assert not saved.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_stream_stopped_inside_its_pcap_header_says_so(tmp_path):
    fed = Fed(tmp_path, LOSS.read_bytes()[:10])
    fed.wait_for_status()
    fed.signal(signal.SIGINT)
    code, _, err = fed.finish()
    assert code == 0, err
    assert "inside" in err and "file header (10 of 24 bytes)" in err and "link type" not in err, err


def test_an_ignored_sigint_stays_ignored(tmp_path):
    """`roceview live ... &` in a script runs with SIGINT ignored: a Ctrl-C meant for the
    script's foreground job must not stop it; the stream's end does."""
    fed = Fed(tmp_path, LOSS.read_bytes(), preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    fed.wait_for_status()
    fed.signal(signal.SIGINT)
    fed.wait_for_status(2)
    assert fed.proc.poll() is None, "an ignored SIGINT stopped live"
    fed.end_stream()
    code, out, err = fed.finish()
    assert code == 0, err
    assert b"stopped by end of stream" in out


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_a_stream_ending_mid_record_leaves_whole_records(kind, tmp_path):
    """The writer gone in the middle of a record (ssh dropped): the reader warns, and the -w
    file ends at the record before (it kept the half)."""
    data = capture_of(tmp_path, kind)
    saved = tmp_path / f"saved.{kind}"
    fed = Fed(tmp_path, with_half_a_record(data), "-w", saved, stall=False)
    code, out, err = fed.finish()
    assert code == 0 and "ends in the middle of a" in err, err
    assert saved.read_bytes() == data
    check_whole(saved, data)
