"""What the tshark comparisons share: the payload dissectors tshark tries on RoCE payloads, and
the protocols this tshark knows."""
from __future__ import annotations

import subprocess

PAYLOAD_HEURISTICS = ("smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser", "fcoib", "drbd",
                      "infiniband_sdp", "infiniband.eoib")
_PROTOCOLS: dict[str, set[str]] = {}


def known_protocols(tshark: str) -> set[str]:
    if tshark not in _PROTOCOLS:
        out = subprocess.run([tshark, "-G", "protocols"], capture_output=True, text=True, timeout=120).stdout
        _PROTOCOLS[tshark] = {line.split("\t")[2] for line in out.splitlines() if line.count("\t") >= 2}
    return _PROTOCOLS[tshark]
