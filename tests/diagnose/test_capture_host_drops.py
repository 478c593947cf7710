"""capture_loss names the capture host's own drops (live: tcpdump's "dropped by kernel") when
the capture tool counted them: the mirror is then not the first suspect."""
from __future__ import annotations

from pathlib import Path

import roceview
from roceview.diagnose import find

SAMPLE = Path(__file__).resolve().parents[2] / "captures" / "capture-drop.pcap"


def _capture_loss(result):
    return next(f for f in find(result) if f["kind"] == "capture_loss")


def test_kernel_drops_are_named_as_the_cause_of_capture_loss():
    result = roceview.analyze(str(SAMPLE))
    result.summary["capture_drops"] = 18_072
    f = _capture_loss(result)
    assert "the capture host dropped them (18,072 kernel drops), not the network" in f["summary"]
    assert f["evidence"].startswith("the capture tool counted 18,072 packets dropped by the kernel")
    assert f["advice"].startswith("The capture host dropped packets: give tcpdump a bigger buffer (`-B`)")


def test_without_counted_drops_the_mirror_is_suspected_as_before():
    f = _capture_loss(roceview.analyze(str(SAMPLE)))
    assert "the mirror or capture host dropped them" in f["summary"] and "kernel" not in f["evidence"]
