"""The text of an endpoint, a flow and a MAC address, written one way everywhere (the report,
the tables, the TUI, the Dask client's merge): a flow is `src>dst:0xQPN` (IBTA's 24-bit
destination QP as six hex digits), an address dotted IPv4 for IPv4-mapped addresses, IPv6 or a
GID otherwise, and `lid:0xNNNN` for native IB without a GRH."""
from __future__ import annotations

import ipaddress

import numpy as np


def address_text(raw: bytes) -> str:
    """One endpoint from its 16 bytes (the packets table's `_src_addr` / `_dst_addr` rows): an
    LRH-only IB packet has ten zero bytes, 0xfefe, and its LID in bytes 14-15."""
    if raw[:10] == bytes(10) and raw[10:12] == b"\xfe\xfe":
        return f"lid:0x{int.from_bytes(raw[14:16], 'big'):04x}"
    addr = ipaddress.IPv6Address(raw)
    return str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)


def format_address(words: np.ndarray) -> str:
    """One endpoint from its two little-endian uint64 words (the analysis's address keys)."""
    return address_text(np.asarray(words, dtype="<u8").tobytes())


def flow_name(src: str, dst: str, qp) -> str:
    """A flow: source and destination endpoint text and the destination QP."""
    return f"{src}>{dst}:0x{int(qp):06x}"


def qp_text(qp) -> str:
    """A QP number as the tables write it; "" where there is none (None or negative)."""
    return "" if qp is None or qp < 0 else f"0x{int(qp):06x}"


def mac_text(value: int) -> str:
    """A 48-bit MAC held in the low bits of an integer, as aa:bb:cc:dd:ee:ff."""
    return ":".join(f"{(int(value) >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def mac_int(text: str) -> int:
    """A MAC's text back to its integer."""
    return int(text.replace(":", ""), 16)
