"""What the tshark comparisons share: the payload dissectors tshark tries on RoCE payloads, and
the protocols this tshark knows."""
from __future__ import annotations

import subprocess

PAYLOAD_HEURISTICS = ("smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser", "fcoib", "drbd",
                      "infiniband_sdp", "infiniband.eoib")
_PROTOCOLS: dict[str, set[str]] = {}


def field_rows(path, fields: dict[str, str], value) -> list[dict]:
    """`tshark -T fields` of `fields` (name -> tshark field; first occurrence) over the capture:
    one dict per frame, each text through value(name, text)."""
    cmd = ["tshark", "-r", str(path), "-T", "fields", "-E", "occurrence=f", "-E", "separator=\t"]
    for f in fields.values():
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [{k: value(k, v) for k, v in zip(fields, line.split("\t"))} for line in out.splitlines()]


def known_protocols(tshark: str) -> set[str]:
    if tshark not in _PROTOCOLS:
        out = subprocess.run([tshark, "-G", "protocols"], capture_output=True, text=True, timeout=120).stdout
        _PROTOCOLS[tshark] = {line.split("\t")[2] for line in out.splitlines() if line.count("\t") >= 2}
    return _PROTOCOLS[tshark]
