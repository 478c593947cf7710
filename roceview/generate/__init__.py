"""Synthetic RoCEv2 fault captures from a discrete-event model.

    from roceview.generate import generate, write_capture
    cap = generate("network-loss", seed=1)
    write_capture(cap, "loss.pcapng")
    cap.truth.drops_at("switch")

Model: RC queue pairs (requester: go-back-N, Local ACK Timeout, RNR wait up to rnr_retry times;
responder: ePSN, coalesced ACKs, NAK PSN sequence error, RNR NAK, remote access error, READ
responses), NICs with DCQCN notification/reaction points, one switch (ECN RED marking, PFC per
ingress port/priority, LLDP DCBX, a loss point) and a SPAN mirror on the sender or the
receiver side that can overflow. See docs in captures/README.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from roceview.generate.ops_truth import operations
from roceview.generate.scenarios import ALL_KINDS, SCENARIOS, Scenario
from roceview.generate.truth import Truth

MIRRORS = ("sender", "receiver")

__all__ = ["ALL_KINDS", "SCENARIOS", "MIRRORS", "Capture", "generate", "write_capture", "Scenario"]


@dataclass
class Capture:
    frames: np.ndarray       # all frame bytes concatenated (uint8)
    lengths: np.ndarray      # int64 per frame
    ts_ns: np.ndarray        # int64 per frame
    truth: Truth

    def __len__(self) -> int:
        return len(self.lengths)

    def frame_list(self) -> list[bytes]:
        ends = np.cumsum(self.lengths)
        data = self.frames.tobytes()
        return [data[e - n:e] for e, n in zip(ends.tolist(), self.lengths.tolist())]


def generate(scenario: str, seed: int = 0, scale: float = 1.0, mirror: str | None = None) -> Capture:
    """Run `scenario`'s model with numpy Generator(seed); `scale` multiplies traffic volume;
    `mirror` ("sender"/"receiver") overrides where the capture is taken."""
    sc = SCENARIOS[scenario]
    mirror = mirror or sc.mirror
    truth = Truth(scenario=scenario, seed=seed, mirror=mirror, expected_kinds=sc.expected,
                  forbidden_kinds=sc.forbidden)
    net, senders, receivers = sc.build(np.random.default_rng(seed), scale, truth)
    net.mirror_links(senders if mirror == "sender" else receivers)
    frames, lengths, ts_ns = net.run()
    truth.ops = operations(net)
    return Capture(frames, lengths, ts_ns, truth)


def write_capture(cap: Capture, path) -> None:
    """pcapng for *.pcapng / *.ntar, classic nanosecond pcap otherwise (atomic write)."""
    from roceview.capture.writer import write_pcap, write_pcapng

    if Path(path).suffix.lower() in (".pcapng", ".ntar"):
        write_pcapng(path, cap.frame_list(), cap.ts_ns.tolist())
    else:
        write_pcap(path, cap.frames, cap.lengths, cap.ts_ns)
