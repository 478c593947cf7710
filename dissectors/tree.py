"""Per-packet detail tree, derived from the header declarations (`dissect -V`).

Plain data (title, [(label, value text, meaning)]): the renderer decides how it looks.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from dissectors.fields import Field, Header, field_value


@dataclass
class Node:
    title: str
    spec: str
    lines: list[tuple[str, str, str]]
    offset: int


BYTES_SHOWN = 32                 # a longer bytes field (CM private data) shows its first bytes and its length


def _show(f: Field, value: int) -> str:
    if f.kind == "bytes":
        raw = value.to_bytes(f.bits // 8, "big")
        if not any(raw):
            return f"{len(raw)} bytes, all zero"
        text = ":".join(f"{b:02x}" for b in raw[:BYTES_SHOWN])
        return text if len(raw) <= BYTES_SHOWN else f"{text}... ({len(raw)} bytes)"
    if f.kind == "ipv6" and value >> 32 == 0 and value:          # RDMA CM's IPv4 in 16 bytes (IBTA A11.4)
        return "::" + str(ipaddress.IPv4Address(value))
    if f.kind == "mac":
        return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))
    if f.kind == "ipv4":
        return str(ipaddress.IPv4Address(value))
    if f.kind == "ipv6":
        return str(ipaddress.IPv6Address(value))
    if f.kind == "bool":
        return "1" if value else "0"
    text = f"{value}" if f.bits <= 8 and not f.values else f"0x{value:0{(f.bits + 3) // 4}x} ({value})"
    if f.values and value in f.values:
        text += f" {f.values[value]}"
    return text


def header_node(header: Header, data: bytes, base: int) -> Node:
    """One header of one frame; fields past the captured bytes are marked missing."""
    lines = []
    for f in header.fields:
        if base + f.end > len(data):
            lines.append((f.name, "[missing: frame truncated]", f.meaning))
            continue
        lines.append((f.name, _show(f, field_value(data, base, f)), f.meaning))
    return Node(header.title, header.spec, lines, base)
