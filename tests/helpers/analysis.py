"""Build `roceview.packets.batch.Batch` chunks directly from row dicts, for analysis unit tests.

A row is a dict; RoCE rows name `opcode`, `psn`, `qp` (dest QP), `src`/`dst` (IP text), `ts` (ns);
optional `ackreq`, `payload`, `dmalen`, `syndrome`, `ecn`, `wire`. PFC rows: `proto="pfc"`,
`mac`, `enable` (class-enable vector), `quanta` (8 values); PAUSE rows: `proto="pause"`, `mac`,
`quanta` (one value).
"""
from __future__ import annotations

import ipaddress

import numpy as np

from roceview.analysis import analyze_batches
from roceview.packets.batch import PROTO_CODE, Batch

A, B = "10.0.0.1", "10.0.0.2"
T0 = 1_700_000_000_000_000_000  # ns

# IBTA opcodes used by the tests
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
READ_REQUEST, READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY = 0x0C, 0x0D, 0x0E, 0x0F, 0x10
ACKNOWLEDGE, ATOMIC_ACK, CNP, UD_SEND_ONLY = 0x11, 0x12, 0x81, 0x64
SYN_ACK, SYN_RNR, SYN_NAK_SEQ, SYN_NAK_INVALID = 0x1F, 0x20 | 0x0E, 0x60, 0x61

_ROCE_COLS = {  # name -> (dtype, row key, default)
    "opcode": (np.uint8, "opcode", 0), "dest_qp": (np.uint32, "qp", 0), "psn": (np.uint32, "psn", 0),
    "ackreq": (bool, "ackreq", False), "payload_len": (np.uint32, "payload", 0),
    "reth_dmalen": (np.uint32, "dmalen", None), "aeth_syndrome": (np.uint8, "syndrome", None),
    "ecn": (np.uint8, "ecn", 2),
}


def _addr(text: str) -> np.ndarray:
    ip = ipaddress.ip_address(text)
    raw = (ipaddress.IPv6Address(f"::ffff:{ip}") if ip.version == 4 else ip).packed
    return np.frombuffer(raw, dtype=np.uint8)


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def make_batch(rows: list[dict]) -> Batch:
    n = len(rows)
    cols: dict[str, np.ndarray] = {}
    valid: dict[str, np.ndarray] = {}
    proto = [r.get("proto", "roce_v2") for r in rows]
    roce = np.array([p in ("roce_v1", "roce_v2", "ib") for p in proto])
    cols["frame"] = np.arange(1, n + 1, dtype=np.int64)
    cols["ts_ns"] = np.array([r["ts"] for r in rows], dtype=np.int64)
    cols["_proto"] = np.array([PROTO_CODE[p] for p in proto], dtype=np.uint8)
    cols["wire_len"] = np.array([r.get("wire", 64 + r.get("payload", 0)) for r in rows], dtype=np.uint32)
    cols["_src_addr"] = np.array([_addr(r.get("src", A)) for r in rows], dtype=np.uint8).reshape(n, 16)
    cols["_dst_addr"] = np.array([_addr(r.get("dst", B)) for r in rows], dtype=np.uint8).reshape(n, 16)
    cols["_src_mac"] = np.array([_mac(r.get("mac", "02:00:00:00:00:01")) for r in rows], dtype=np.uint64)
    for name, (dtype, key, default) in _ROCE_COLS.items():
        values = [r.get(key, default) for r in rows]
        ok = roce & np.array([v is not None for v in values])
        cols[name] = np.array([v or 0 for v in values], dtype=dtype)
        valid[name] = ok
    if any("ip_id" in r for r in rows):          # the IPv4 identification, where a test gives one
        cols["ip_id"] = np.array([r.get("ip_id") or 0 for r in rows], dtype=np.uint16)
        valid["ip_id"] = np.array([r.get("ip_id") is not None for r in rows])
    _pfc_columns(rows, proto, cols, valid)
    return Batch(n, cols, valid)


def _pfc_columns(rows, proto, cols, valid) -> None:
    is_pfc = np.array([p == "pfc" for p in proto])
    is_pause = np.array([p == "pause" for p in proto])
    cols["pfc_enable"] = np.array([r.get("enable", 0) if p == "pfc" else 0 for r, p in zip(rows, proto)],
                                  dtype=np.uint8)
    valid["pfc_enable"] = is_pfc
    for k in range(8):
        cols[f"pfc_quanta{k}"] = np.array([r["quanta"][k] if p == "pfc" else 0 for r, p in zip(rows, proto)],
                                          dtype=np.uint16)
        valid[f"pfc_quanta{k}"] = is_pfc
    cols["pause_quanta"] = np.array([r["quanta"] if p == "pause" else 0 for r, p in zip(rows, proto)],
                                    dtype=np.uint16)
    valid["pause_quanta"] = is_pause


def chunks(rows: list[dict], size: int) -> list[Batch]:
    return [make_batch(rows[i:i + size]) for i in range(0, len(rows), size)]


def analyze_rows(rows: list[dict], chunk: int | None = None, **options):
    batches = [make_batch(rows)] if chunk is None else chunks(rows, chunk)
    return analyze_batches(batches, **options)


def flow_row(result, flow: str) -> dict:
    """The qps.csv row of one flow, as text (what the CSV would say)."""
    table = result.flows_table
    names = table.data["flow"]
    i = names.index(flow)
    return {c: table.text_column(c)[i] for c in table.columns}


def flow_id(src: str, dst: str, qp: int) -> str:
    return f"{src}>{dst}:0x{qp:06x}"


# ---- row builders ------------------------------------------------------------------------
def req(ts, psn, opcode=WRITE_ONLY, src=A, dst=B, qp=0xD2, payload=1024, ackreq=False, **kw) -> dict:
    return dict(ts=ts, psn=psn, opcode=opcode, src=src, dst=dst, qp=qp, payload=payload, ackreq=ackreq, **kw)


def ack(ts, psn, syndrome=SYN_ACK, src=B, dst=A, qp=0xC1, **kw) -> dict:
    return dict(ts=ts, psn=psn, opcode=ACKNOWLEDGE, src=src, dst=dst, qp=qp, payload=0,
                syndrome=syndrome, **kw)


# ---- wire frames (for end-to-end CLI tests) ----------------------------------------------
import socket  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402

_RETH_OPS = {0x06, 0x0A, 0x0B, 0x0C}
_AETH_OPS = {0x0D, 0x0F, 0x10, 0x11, 0x12}


def _ipv4_checksum(header: bytes) -> int:
    s = sum(struct.unpack("!10H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def roce_v2_frame(row: dict) -> bytes:
    """Ethernet/IPv4/UDP 4791/BTH[/RETH][/AETH]/payload/ICRC for one analysis row dict."""
    opcode, payload_len = row["opcode"], row.get("payload", 0)
    ext = b""
    if opcode in _RETH_OPS:
        ext += struct.pack("!QII", 0x1000, 0x1234, row.get("dmalen", payload_len))
    if opcode in _AETH_OPS:
        ext += struct.pack("!I", (row.get("syndrome", SYN_ACK) << 24) | 1)
    payload = bytes(16) if opcode == CNP else bytes(payload_len)
    pad = -len(payload) % 4
    bth = struct.pack("!BBHBBHBBH", opcode, pad << 4, 0xFFFF, 0, 0, row.get("qp", 0) & 0xFFFF,
                      0x80 if row.get("ackreq") else 0, (row["psn"] >> 16) & 0xFF, row["psn"] & 0xFFFF)
    bth = bth[:5] + struct.pack("!I", row.get("qp", 0))[1:] + bth[8:]
    body = bth + ext + payload + bytes(pad)
    udp_len = 8 + len(body) + 4
    tos = (26 << 2) | row.get("ecn", 2)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                     socket.inet_aton(row.get("src", A)), socket.inet_aton(row.get("dst", B)))
    ip = ip[:10] + struct.pack("!H", _ipv4_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 49152, 4791, udp_len, 0)
    masked_ip = ip[:1] + b"\xff" + ip[2:8] + b"\xff" + ip[9:10] + b"\xff\xff" + ip[12:]
    masked_bth = body[:4] + b"\xff" + body[5:]
    icrc = zlib.crc32(b"\xff" * 8 + masked_ip + udp[:6] + b"\xff\xff" + masked_bth) & 0xFFFFFFFF
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001") + b"\x08\x00"
    return eth + ip + udp + body + struct.pack("<I", icrc)


def pfc_frame(row: dict) -> bytes:
    dst = bytes.fromhex("0180c2000001")
    src = bytes.fromhex(row.get("mac", "02:00:00:00:00:01").replace(":", ""))
    if row["proto"] == "pause":
        body = struct.pack("!HH", 0x0001, row["quanta"])
    else:
        body = struct.pack("!HH8H", 0x0101, row["enable"], *row["quanta"])
    frame = dst + src + b"\x88\x08" + body
    return frame + bytes(max(0, 60 - len(frame)))


def write_rows_pcap(path, rows: list[dict]) -> None:
    from roceview.capture.writer import write_pcap

    frames = [pfc_frame(r) if r.get("proto") in ("pfc", "pause") else roce_v2_frame(r) for r in rows]
    buf = np.frombuffer(b"".join(frames), dtype=np.uint8)
    write_pcap(path, buf, [len(f) for f in frames], [r["ts"] for r in rows])
