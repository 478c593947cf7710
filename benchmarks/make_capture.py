"""Build large synthetic RoCEv2 captures, vectorised (no scapy): RC RDMA WRITE_ONLY data
packets and ACKs over many flows, valid ICRCs, at a chosen snaplen.

    python benchmarks/make_capture.py OUT.pcap --packets 1000000 [--snaplen 128] [--payload 1024] [--flows 128]
"""
from __future__ import annotations

import argparse
import struct
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from roceview.capture.writer import pcap_header, pcap_records  # noqa: E402

BLOCK = 65536


def _template(payload: int, ack: bool) -> bytearray:
    bth_ext = 4 if ack else 16                      # AETH or RETH
    body = 0 if ack else payload
    udp_len = 8 + 12 + bth_ext + body + 4
    ip_len = 20 + udp_len
    f = bytearray(14 + ip_len)
    f[0:14] = bytes.fromhex("02000000000102000000000208 00".replace(" ", ""))
    f[14:34] = struct.pack(">BBHHHBBH4s4s", 0x45, 0x02, ip_len, 0, 0x4000, 64, 17, 0, bytes(4), bytes(4))
    f[34:42] = struct.pack(">HHHH", 49152, 4791, udp_len, 0)
    f[42] = 0x11 if ack else 0x0A
    f[43] = 0x40
    f[44:46] = b"\xff\xff"
    return f


def build_block(start: int, count: int, flows: int, payload: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Frames for packets start..start+count: every 4th packet is an ACK."""
    idx = np.arange(start, start + count)
    is_ack = (idx % 4) == 3
    flow = idx % flows
    psn = (idx // flows) & 0xFFFFFF
    frames, lens = [], np.empty(count, np.int64)
    tmpl = {False: _template(payload, False), True: _template(payload, True)}
    for i in range(count):
        f = bytearray(tmpl[bool(is_ack[i])])
        fl = int(flow[i])
        a, b = (1, 2) if not is_ack[i] else (2, 1)
        f[26:30] = bytes((10, fl >> 16, (fl >> 8) & 0xFF, a))     # past 65,536 flows: 10.x.y.a
        f[30:34] = bytes((10, fl >> 16, (fl >> 8) & 0xFF, b))
        f[34:36] = (49152 + fl % 16384).to_bytes(2, "big")
        f[47:50] = (0x100 + fl).to_bytes(3, "big")
        f[50] = 0x80 if not is_ack[i] else 0
        f[51:54] = int(psn[i]).to_bytes(3, "big")
        if is_ack[i]:
            f[54:58] = (0x1F000000 | int(psn[i])).to_bytes(4, "big")
        else:
            f[54:70] = struct.pack(">QII", 0x7F0000000000 + int(psn[i]) * payload, 0x1234, payload)
        f[24:26] = _ipv4_checksum(f[14:34])
        f[-4:] = _icrc(f[:-4])
        frames.append(bytes(f))
        lens[i] = len(f)
    return np.frombuffer(b"".join(frames), np.uint8), lens


def _ipv4_checksum(h: bytes) -> bytes:
    h = bytearray(h)
    h[10:12] = b"\0\0"
    s = sum(struct.unpack(">10H", bytes(h)))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return struct.pack(">H", ~s & 0xFFFF)


def _icrc(f: bytes) -> bytes:
    m = bytearray(f[14:])
    m[1] = m[8] = m[10] = m[11] = 0xFF          # TOS, TTL, checksum
    m[26:28] = b"\xff\xff"                       # UDP checksum
    m[32] = 0xFF                                 # BTH resv8a
    return (zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF).to_bytes(4, "little")


def write(out: Path, packets: int, snaplen: int, payload: int, flows: int = 128) -> None:
    rng = np.random.default_rng(1)
    tmp = out.with_suffix(out.suffix + ".part")
    with open(tmp, "wb") as fh:
        fh.write(pcap_header(snaplen=snaplen))
        for start in range(0, packets, BLOCK):
            count = min(BLOCK, packets - start)
            frames, lens = build_block(start, count, flows, payload, rng)
            ts = 1_700_000_000_000_000_000 + (np.arange(start, start + count) * 250)
            cap = np.minimum(lens, snaplen)
            if snaplen < lens.max():
                keep = np.concatenate([np.arange(o, o + c) for o, c in zip(np.cumsum(lens) - lens, cap)])
                frames = frames[keep]
            fh.write(pcap_records(frames, cap, ts, wire_lengths=lens).tobytes())
    tmp.replace(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--snaplen", type=int, default=65535)
    ap.add_argument("--payload", type=int, default=1024)
    ap.add_argument("--flows", type=int, default=128, help="queue pairs (up to 16 M)")
    a = ap.parse_args()
    write(a.out, a.packets, a.snaplen, a.payload, a.flows)


if __name__ == "__main__":
    main()
