"""Review of the vectorised diagnoser (ea4246f..df2484b): inputs where its findings differed from
the loops it replaced (flows spelt alike)."""
from __future__ import annotations

import ipaddress
import struct
import zlib

import numpy as np

import roceview

T0 = 1_700_000_000_000_000_000


def v6_frame(src: str, dst: str, qp: int, psn: int, ecn: int = 2, payload: int = 256) -> bytes:
    """Ethernet/IPv6/UDP 4791/BTH/RETH/payload/ICRC of a RoCEv2 WRITE ONLY (DSCP 26)."""
    body = bytes([0x0A, 0, 0xFF, 0xFF, 0]) + struct.pack("!I", qp)[1:] + b"\0" + struct.pack("!I", psn)[1:]
    body += struct.pack("!QII", 0x1000, 0x1234, payload) + bytes(payload)
    udp_len = 8 + len(body) + 4
    ip = (struct.pack("!IHBB", (6 << 28) | (((26 << 2) | ecn) << 20), udp_len, 17, 64)
          + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed)
    udp = struct.pack("!HHHH", 49152, 4791, udp_len, 0)
    masked = b"\xff" * 8 + b"\x6f\xff\xff\xff" + ip[4:7] + b"\xff" + ip[8:] + udp[:6] + b"\xff\xff"
    icrc = zlib.crc32(masked + body[:4] + b"\xff" + body[5:]) & 0xFFFFFFFF
    eth = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"
    return eth + ip + udp + body + struct.pack("<I", icrc)


def write_pcap(path, frames: list[bytes], ts: list[int]) -> None:
    from roceview.capture.writer import write_pcap as write

    write(path, np.frombuffer(b"".join(frames), dtype=np.uint8), [len(f) for f in frames], ts)


def test_flows_spelt_alike_are_counted_once(tmp_path):
    """::fefe:1:5 and ::fefe:2:5 are both written lid:0x0005: two flows-table rows of one name,
    whose packet facts fold into one flow. The rules over every flow read the facts once per
    name, as the name lookups do (the vectorised rules read them once per row: 40 CE of 160)."""
    frames, ts = [], []
    for i in range(40):
        for k, src in enumerate(("::fefe:1:5", "::fefe:2:5")):
            frames.append(v6_frame(src, "::fefe:0:9", 0x11, 100 * k + i, ecn=3 if i % 4 == 0 else 0))
            ts.append(T0 + i * 1000 + k)
    path = tmp_path / "alike.pcap"
    write_pcap(path, frames, ts)
    result = roceview.analyze(str(path), warn=lambda m: None)
    assert result.flows_table.data["flow"] == ["lid:0x0005>lid:0x0009:0x000011"] * 2
    evidence = {f["kind"]: f["evidence"] for f in result.findings.to_dict("records")}
    assert evidence["ecn_congestion"].startswith("20 CE of 80 data packets into lid:0x0009;")
    assert evidence["ecn_not_enabled"].startswith("60 of 80 data packets (RoCEv2) from lid:0x0005 have ECN 00 in 1 flow")
