"""The detail tree of one packet, as (label, children) nodes: the `dissect -V` tree from the
same header declarations for what roceview decodes, scapy's dissection for the rest."""
from __future__ import annotations

import numpy as np

Node = tuple  # (label, [Node, ...])


def packet_nodes(chunk, row_in_chunk: int, ports) -> list[Node]:
    """The headers of one record of a RecordChunk (render.detail's layout: title, fields)."""
    from dissectors import ib, opcodes
    from dissectors.tree import header_node
    from roceview.kernels import consts
    from roceview.kernels import backend as kernels
    from roceview.render.detail import headers

    i = row_in_chunk
    o = np.empty((1, len(consts.OUT_FIELDS)), np.int64)
    meta = np.empty((1, len(consts.META_FIELDS)), np.int64)
    kernels.parse_layers(chunk.buf, chunk.off[i:i + 1], chunk.cap[i:i + 1], chunk.linktype[i:i + 1], ports, o, meta)
    frame = chunk.frame(i)
    nodes = []
    for header, base in headers(frame, o[0], int(chunk.off[i]), meta[0]):
        node = header_node(header, frame, base)
        lines = []
        for label, value, meaning in node.lines:
            if header is ib.BTH and label == "opcode":
                value += f" {opcodes.opcode_name(frame[base])}"
            lines.append((f"{label} = {value}  {meaning}".rstrip(), []))
        nodes.append((f"{node.title} ({header.name}, {node.spec}) @ {base}", lines))
    return nodes


def scapy_nodes(frame: bytes, linktype: int) -> list[Node]:
    """scapy's layers and fields, for frames roceview does not decode (LLDP, ARP, TCP, ...)."""
    try:
        from scapy.config import conf
        from scapy.layers.l2 import Ether
        # the layers that bind over Ethernet/IP: with l2 alone an IPv4/IPv6 frame was 'Raw'
        import scapy.layers.dhcp, scapy.layers.dns, scapy.layers.inet, scapy.layers.inet6, scapy.layers.llmnr  # noqa: E401,F401,I001

        cls = conf.l2types.get(linktype) or Ether
        pkt = cls(frame)
    except Exception as exc:   # noqa: BLE001  a frame scapy cannot take is shown as such
        return [(f"scapy could not dissect this frame: {exc}", [])]
    nodes = []
    layer = pkt
    while layer is not None and layer.__class__.__name__ != "NoPayload":
        fields = [(f"{f.name} = {layer.getfieldval(f.name)!r}"[:200], []) for f in layer.fields_desc]
        nodes.append((f"{layer.name} (scapy)", fields))
        layer = layer.payload if layer.payload else None
    return nodes


def nodes_for(index, row: int, proto: str) -> list[Node]:
    """The tree of a packet of the index; scapy's for frames roceview does not decode."""
    got = index.frame_bytes(row)
    if got is None:
        return [("the bytes of this packet are not kept (a live stream keeps its recent batches only)", [])]
    frame, linktype = got
    chunk = index.chunk_of(np.array([row]))
    roce = proto in ("roce_v1", "roce_v2", "ib", "pfc", "pause")
    if roce and chunk is not None:
        return packet_nodes(chunk, 0, index.ports)
    if roce:
        chunk = _one_record(frame, linktype)
        return packet_nodes(chunk, 0, index.ports)
    return scapy_nodes(frame, linktype)


def analysis_nodes(df, gbps: float = 100.0) -> list[Node]:
    """`dissect -V`'s Analysis subtree of a packet with flags (the first row of a packets
    table with the analysis columns): render.detail's own, collected as plain-text nodes."""
    if not len(df) or "flags" not in df.columns or not int(df["flags"].iloc[0]):
        return []
    from roceview.render.detail import analysis_node
    from roceview.render.lines import packet_rows

    row, quanta = next(packet_rows(df))
    tree = _Collected("")
    analysis_node(tree, row, quanta, gbps)
    return [child.node() for child in tree.children]


class _Collected:
    """What a rich Tree's add() is given (markup, wrapped lines), kept as a plain-text node."""

    def __init__(self, label: str):
        from rich.text import Text

        self.label = Text.from_markup(label).plain.replace("\n", " ") if label else ""
        self.children: list[_Collected] = []

    def add(self, label: str) -> "_Collected":
        self.children.append(_Collected(label))
        return self.children[-1]

    def node(self) -> Node:
        return self.label, [child.node() for child in self.children]


def _one_record(frame: bytes, linktype: int):
    from roceview.capture.readers import RecordChunk

    buf = np.zeros(len(frame) + 64, np.uint8)        # padded: the kernels may read past the end
    buf[: len(frame)] = np.frombuffer(frame, np.uint8)
    n = np.array([len(frame)], np.uint32)
    return RecordChunk(buf, np.zeros(1, np.int64), n, n.copy(), np.zeros(1, np.int64), np.zeros(1, np.uint16),
                       np.array([linktype], np.uint16))
