"""`dissect -V`: a rich Tree per packet, built from the header declarations."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from dissectors import cm, ethernet, ib, ip, macctl, opcodes
from dissectors.tree import header_node
from roceview.kernels import consts
from roceview.kernels import backend as kernels
from roceview.packets.decode import EXT_BY_NAME, UD_SEND_ONLY, O, port_table
from roceview.packets.names import flow_name

_BY_SLOT = (("eth", ethernet.ETHERNET), ("sll", ethernet.SLL), ("sll2", ethernet.SLL2), ("vlan1", ethernet.VLAN),
            ("vlan2", ethernet.INNER_VLAN), ("lrh", ib.LRH))


def headers(frame: bytes, o: np.ndarray, start: int, meta: np.ndarray):
    """(Header, offset within frame) in wire order for one frame."""
    rel = {k: (o[i] - start if o[i] >= 0 else -1) for k, i in O.items()}
    out = [(h, rel[k]) for k, h in _BY_SLOT if rel[k] >= 0]
    if rel["l3"] >= 0:
        kind = meta[1]
        out.append((ip.IPV4 if kind == consts.L3_IPV4 else ip.IPV6 if kind == consts.L3_IPV6 else ib.GRH, rel["l3"]))
    if rel["udp"] >= 0:
        out.append((ip.UDP, rel["udp"]))
    if rel["bth"] >= 0:
        out.append((ib.BTH, rel["bth"]))
        if rel["bth"] < len(frame):
            pos = rel["bth"] + 12
            for name in opcodes.OPCODES.get(frame[rel["bth"]], ("", "", ()))[2]:
                out.append((EXT_BY_NAME[name], pos))
                pos += EXT_BY_NAME[name].length
    if rel["bth"] >= 0 and rel["bth"] < len(frame):
        out += _mad_headers(frame, rel["bth"])
    if rel["eth"] >= 0 and rel["l3"] < 0 and rel["bth"] < 0 and rel["macctl"] < 0:
        out += _llc_headers(frame, max(rel["eth"] + 14, rel["vlan1"] + 4, rel["vlan2"] + 4))
    if rel["macctl"] >= 0:
        op = int.from_bytes(frame[rel["macctl"]:rel["macctl"] + 2], "big")
        out.append((macctl.PFC if op == macctl.MACCTL_OPCODE_PFC else macctl.PAUSE if op == macctl.MACCTL_OPCODE_PAUSE
                    else macctl.MACCTL, rel["macctl"]))
    return sorted(out, key=lambda item: item[1])


def _mad_headers(frame: bytes, bth: int) -> list:
    """A MAD on QP0/QP1 (UD SEND_ONLY, IBTA 13.5.1) and, for CM, its message; a REQ's RDMA CM
    service id and private data when its service id is an IP CM one (IBTA A11)."""
    mad = bth + ib.BTH.length + ib.DETH.length
    if frame[bth] != UD_SEND_ONLY or int.from_bytes(frame[bth + 5:bth + 8], "big") > cm.GSI_QP or \
            mad + cm.MAD_HEADER_LEN > len(frame):
        return []
    out = [(cm.MAD, mad)]
    message = cm.MESSAGES.get(int.from_bytes(frame[mad + 16:mad + 18], "big")) \
        if frame[mad + 1] == cm.MGMT_CLASS_CM else None
    if message is not None:
        out.append((message.header, mad + cm.MAD_HEADER_LEN))
        sid = frame[mad + 32:mad + 40]
        if message.short == "REQ" and len(sid) == 8 and cm.is_ip_cm(int.from_bytes(sid, "big")):
            out += [(cm.IP_CM_SID, mad + cm.LOCATIONS["SID"][1]), (cm.IP_CM_REQ, mad + cm.LOCATIONS["IPCM"][1])]
    return out


def _llc_headers(frame: bytes, at: int) -> list:
    """An IEEE 802.3 frame (a length below 0x0600 where the EtherType goes): LLC, and STP."""
    if int.from_bytes(frame[at - 2:at], "big") >= ethernet.ETHERTYPE_MIN or at + ethernet.LLC.length > len(frame):
        return []
    stp = frame[at:at + 3] == bytes((ethernet.SAP_STP, ethernet.SAP_STP, ethernet.LLC_UI))
    return [(ethernet.LLC, at)] + ([(ethernet.STP, at + ethernet.LLC.length)] if stp else [])


def _label(header, line: tuple, frame: bytes, base: int) -> tuple[str, str, str]:
    """A field's label, value text and meaning as the tree shows them: the BTH opcode with its
    name, an IEEE 802.3 frame's type field as the length it is, a CM REJ's ARI with what it
    holds, a bridge identifier as priority / system id extension / MAC (as tshark)."""
    label, value, meaning = line
    if header is ib.BTH and label == "opcode":
        return label, f"{value} {opcodes.opcode_name(frame[base])}", meaning
    if header in (ethernet.ETHERNET, ethernet.VLAN, ethernet.INNER_VLAN) and label == "type" and \
            int(value.split()[0], 16) < ethernet.ETHERTYPE_MIN:
        return "length", value, "IEEE 802.3 length of the LLC frame that follows (below 0x0600: no EtherType)"
    if header is cm.REJ and label == "ari":
        reason = int.from_bytes(frame[base + 10:base + 12], "big")
        return label, f"{value} [{cm.REJECT_ARI.get(reason, 'no ARI defined for this reason')}]", meaning
    if header is ethernet.STP and label in ("root", "bridge") and value.startswith("0x"):
        ident = int(value.split()[0], 16)
        mac = ":".join(f"{(ident >> k) & 0xFF:02x}" for k in range(40, -8, -8))
        return label, f"{ident >> 48 & 0xF000} / {ident >> 48 & 0x0FFF} / {mac}", meaning
    return label, value, meaning


def _is_8023(frame: bytes, eth: int) -> bool:
    """An Ethernet header whose type field is a length (IEEE 802.3 3.2.6)."""
    return int.from_bytes(frame[eth + 12:eth + 14], "big") < ethernet.ETHERTYPE_MIN


def hex_dump(frame: bytes) -> str:
    """tshark -x: offset, 16 bytes in hex, the same bytes as ASCII ('.' unless printable)."""
    lines = []
    for at in range(0, len(frame), 16):
        row = frame[at:at + 16]
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{at:04x}  {' '.join(f'{b:02x}' for b in row):<47}   {text}")
    return "\n".join(lines) + "\n"


def analysis_node(tree, row: dict, quanta, gbps: float) -> None:
    """The packet's analysis flags, one sentence each (render/flag_text.py)."""
    from roceview.render.flag_text import flag_names, sentences

    src, dst = row["src_ip"] or row["src_mac"] or "?", row["dst_ip"] or row["dst_mac"] or "?"
    flow = flow_name(src, dst, row["dest_qp"]) if row["dest_qp"] is not None else f"{src}>{dst}"
    branch = tree.add(f"[bold]Analysis[/bold] (roceview: {escape(', '.join(flag_names(row['flags'])))})")
    for text in sentences(row, quanta, flow, gbps):
        branch.add(escape("\n".join(textwrap.wrap(text, 100))))      # the tree crops at the console width


def operation_line(batch, i: int) -> str:
    """The RDMA operation row i belongs to (roceview.op.*: present when a filter or -e named
    one, dissect's first pass), in ops.csv's words."""
    from roceview.filter.field_names import OP_NAMES
    from roceview.filter.values import micros_text
    from roceview.units import plural

    c, v = batch.cols, batch.valid
    parts = [OP_NAMES[int(c["_op_kind"][i])], plural(int(c["_op_bytes"][i]), "byte"),
             plural(int(c["_op_packets"][i]), "request packet")]
    known = v.get("_op_latency")
    parts.append(f"latency {micros_text(int(c['_op_latency'][i]))} us" if known is None or known[i] else "not completed")
    parts.append(f"first frame {int(c['_op_first_frame'][i])}")
    if c["_op_retrans"][i]:
        parts.append("retransmitted")
    return "[Operation: " + ", ".join(parts) + "]"


def time_lines(batch, i: int) -> list[str]:
    """tshark -V's times of row i of a batch stamped by packets/times.Clock (all 9 decimals, as
    tshark shows these fields whatever the file's precision; local time as TZ says)."""
    from roceview.packets.times import DELTA, DELTA_DISPLAYED, REL, frame_time_text, signed_seconds

    ts = int(batch.cols["ts_ns"][i])
    lines = [f"Arrival Time: {frame_time_text(ts)}", f"Epoch Time: {signed_seconds(ts)} seconds"]
    for label, name in (("Time delta from previous captured frame", DELTA),
                        ("Time delta from previous displayed frame", DELTA_DISPLAYED),
                        ("Time since reference or first frame", REL)):
        if name in batch.cols:
            lines.append(f"[{label}: {signed_seconds(int(batch.cols[name][i]))} seconds]")
    return lines


def print_details(chunk, df, first_ts, out, n, rows=None, hexdump: bool = False, gbps: float = 100.0,
                  times=None, batch=None) -> None:
    """The detail tree of each row of `df`: packet rows[i] of `chunk` (default: the first n);
    with `hexdump`, each tree is followed by the packet's bytes as `tshark -V -x` shows them;
    with the analysis columns, an "Analysis" subtree of the packet's flags (pause times at `gbps`).
    `times`: the summary's time column (packets/times.TimeColumn); `batch` (the rows of `df`,
    stamped by a Clock): a "Time" subtree of the packet's arrival time and deltas."""
    console = Console(file=out, highlight=False, soft_wrap=True, width=120, emoji=False)
    o = np.empty((chunk.n, len(consts.OUT_FIELDS)), np.int64)
    meta = np.empty((chunk.n, len(consts.META_FIELDS)), np.int64)
    kernels.parse_layers(chunk.buf, chunk.off, chunk.cap, chunk.linktype, port_table(), o, meta)
    from roceview.render.lines import packet_lines, packet_rows

    summaries = packet_lines(df, first_ts, gbps, times=times)
    analysis = list(packet_rows(df)) if "flags" in df.columns else None
    rows = range(n) if rows is None else rows
    for i, k in enumerate(rows):
        frame = chunk.frame(k)
        tree = Tree(escape(f"Frame {summaries[i].strip()}"))
        if batch is not None:
            branch = tree.add("[bold]Time[/bold]")
            for line in time_lines(batch, i):
                branch.add(escape(line))
        for header, base in headers(frame, o[k], int(chunk.off[k]), meta[k]):
            node = header_node(header, frame, base)
            title = "IEEE 802.3 Ethernet" if header is ethernet.ETHERNET and _is_8023(frame, base) else node.title
            branch = tree.add(f"[bold]{title}[/bold] ({header.name}, {node.spec}) @ {base}")
            for line in node.lines:
                label, value, meaning = _label(header, line, frame, base)
                branch.add(f"{escape(label)} = {escape(value)}  [dim]{escape(meaning)}[/dim]")
        if df["icrc"].notna().iloc[i]:
            icrc = df["icrc_ok"].iloc[i]
            state = "not checked: truncated" if icrc is pd.NA else "ok" if icrc else "BAD"
            tree.add(escape(f"ICRC = 0x{int(df['icrc'].iloc[i]):08x} [{state}]"))
        if analysis is not None and analysis[i][0]["flags"]:
            analysis_node(tree, *analysis[i], gbps)
        if batch is not None and batch.valid.get("_op_kind") is not None and batch.valid["_op_kind"][i]:
            tree.add(escape(operation_line(batch, i)))
        console.print(tree)
        if hexdump:
            out.write("\n" + hex_dump(frame) + "\n")
