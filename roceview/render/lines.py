"""One summary line per packet (the `dissect` default), from a packets-table DataFrame."""
from __future__ import annotations

import numpy as np
import pandas as pd

from dissectors import cm, ethernet
from dissectors.ib import NAK_CODES
from roceview.render.cells import column_parts
from roceview.render.flag_text import ANALYSIS_NAMES, TAGGED
from roceview.render.line_parts import (NONE, BatchColumns, Columns, digits, gather, lit, mapped, or_none,
                                        right_aligned, text_block, time_parts)
from roceview.packets.times import DEFAULT_DIGITS, DIGITS_COLUMN, TimeColumn
from roceview.render.line_tags import tag_parts

PROTO_LABEL = {"roce_v1": "RoCEv1", "roce_v2": "RoCEv2", "ib": "IB", "pfc": "PFC", "pause": "PAUSE",
               "lldp": "LLDP", "other": "Eth"}
BLOCK_ROWS = 1 << 16     # rows built together: the numpy calls per block (~200) amortised, ~20 MB of matrices


def _col(df: pd.DataFrame, name: str) -> list:
    """Python values of a column, None where null (categoricals through their categories)."""
    s = df[name]
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = list(s.cat.categories) + [None]
        return [cats[c] for c in s.cat.codes.to_numpy().tolist()]
    if hasattr(s.array, "_mask"):
        values, mask = s.array._data.tolist(), s.array._mask.tolist()
        return [None if m else v for v, m in zip(values, mask)]
    return s.to_numpy().tolist()


_NAMES = ("frame", "proto", "src_ip", "dst_ip", "src_mac", "dst_mac", "opcode_name", "dest_qp", "psn",
          "ackreq", "se", "fecn", "becn", "ecn", "aeth_kind", "aeth_code", "icrc_ok", "truncated",
          "pfc_enable", "pause_quanta", "lldp_pfc_enable", "ethertype", "vlan_id", "pcp", "wire_len",
          "mirror_session")


def packet_rows(df: pd.DataFrame):
    """(row dict, PFC quanta per priority) of each packet, for `-V`'s flag sentences (a few
    rows: the lines themselves are built column-wise): the columns a line shows, and with the
    analysis columns `flags`, and the others (render/flag_text.py) where it is set."""
    cols = [_col(df, name) for name in _NAMES]
    quanta = list(zip(*[_col(df, f"pfc_quanta{p}") for p in range(8)]))
    if "flags" not in df.columns:
        for i, values in enumerate(zip(*cols)):
            yield dict(zip(_NAMES, values)), quanta[i]
        return
    flags = df["flags"].to_numpy(np.int64)
    tagged = np.flatnonzero(flags & TAGGED)         # the other analysis columns: read only there
    names = [n for n in ANALYSIS_NAMES[1:] if n in df.columns]
    picked = df[names].iloc[tagged]                 # (not the whole table: wide, slow to copy)
    values = [_col(picked, n) for n in names]
    extra = {int(i): dict(zip(names, v)) for i, v in zip(tagged.tolist(), zip(*values))}
    flags = flags.tolist()
    for i, values in enumerate(zip(*cols)):
        row = dict(zip(_NAMES, values))
        row["flags"] = flags[i]
        if i in extra:
            row.update(extra[i])
        yield row, quanta[i]


def packet_lines(df: pd.DataFrame, first_ts: int | None, gbps: float = 100.0, colour: bool = False,
                 times: TimeColumn | None = None) -> list[str]:
    """One line per packet; with the analysis columns, its flags in brackets at the end
    (ANSI-coloured with `colour`; pause times at `gbps`). `times`: the time column (tshark's -t
    formats, packets/times.py); without it, seconds since `first_ts` (or the first row)."""
    return packet_text(df, first_ts, gbps, colour, times).decode("utf-8").split("\n")[:-1]


def packet_text(df: pd.DataFrame, first_ts: int | None, gbps: float = 100.0, colour: bool = False,
                times: TimeColumn | None = None) -> bytes:
    """The lines of packet_lines as UTF-8 bytes, each ended by a newline: built column-wise
    (render/line_parts.py), a block of rows at a time so that the matrices stay bounded."""
    blocks = ((Columns(df.iloc[lo:lo + BLOCK_ROWS] if len(df) > BLOCK_ROWS else df), lo)
              for lo in range(0, len(df), BLOCK_ROWS))
    return _text(blocks, first_ts, gbps, colour, times)


def batch_text(batch, first_ts: int | None, gbps: float = 100.0, colour: bool = False,
               times: TimeColumn | None = None) -> bytes:
    """packet_text of a Batch (the packets table's numpy columns), without a DataFrame."""
    blocks = ((BatchColumns(batch.select(slice(lo, lo + BLOCK_ROWS)) if batch.n > BLOCK_ROWS else batch), lo)
              for lo in range(0, batch.n, BLOCK_ROWS))
    return _text(blocks, first_ts, gbps, colour, times)


def _text(blocks, first_ts: int | None, gbps: float, colour: bool, times: TimeColumn | None) -> bytes:
    out = []
    for cols, lo in blocks:
        if times is None:
            if first_ts is None:                # times relative to the first row
                first_ts = int(cols.num("ts_ns")[0][0])
            block_times = TimeColumn(cols.num("ts_ns")[0] - first_ts, _digits_of(cols))
        else:
            block_times = times.rows(slice(lo, lo + cols.n))
        parts = _head_parts(cols, block_times) + _info_parts(cols)
        if cols.has("flags"):
            parts += tag_parts(cols, gbps, colour)
        out.append(text_block(parts))
    return b"".join(out)


def time_texts(times: TimeColumn) -> list[str]:
    """The time column's text of each row, unpadded (JSON, the TUI's detail)."""
    if not len(times.values):
        return []
    return text_block(time_parts(times.values, times.digits, times.fmt, times.hms, 0)).decode().split("\n")[:-1]


def _digits_of(c: Columns) -> np.ndarray:
    """Each row's time decimals: the file's (packets/times.py), 6 where the rows do not say."""
    places, known = c.num(DIGITS_COLUMN, np.uint8)
    return np.where(known, places, DEFAULT_DIGITS).astype(np.uint8)


def _head_parts(c: Columns, times: TimeColumn) -> list:
    """`{frame:>7} {time:>12} {src} → {dst} {protocol} {wire_len}`."""
    n = c.n
    frame, _ = c.num("frame")
    every = np.ones(n, bool)
    proto, names = c.cat("proto")
    labels = [str(PROTO_LABEL.get(p, p)) for p in names] + ["None", "LLC", "STP"]
    index = np.where(proto == NONE, len(names), proto)
    index = np.where(c.num("llc_dsap")[1], len(names) + 1, index)            # an IEEE 802.3 frame, as tshark
    index = np.where(c.num("stp_bpdu_type")[1], len(names) + 2, index)       # names its protocol
    wire, wire_ok = c.num("wire_len")
    return [right_aligned(digits(frame, every), 7), lit(n, " "),
            *time_parts(times.values, times.digits, times.fmt, times.hms),
            lit(n, " "), _address(c, "src"), lit(n, " → "), _address(c, "dst"), lit(n, " "),
            gather(index, labels, every), lit(n, " ")] + or_none(wire, wire_ok, every)


def _address(c: Columns, side: str):
    """`row[ip] or row[mac] or "?"`: one table of texts, the IPs', the MACs' and "?"."""
    ip, ips = c.cat(f"{side}_ip")
    mac, macs = c.cat(f"{side}_mac")
    ip_ok = np.array([bool(t) for t in ips] + [False])[ip]        # a null's code (-1) reads the False
    mac_ok = np.array([bool(t) for t in macs] + [False])[mac]
    index = np.where(ip_ok, ip, np.where(mac_ok, len(ips) + mac, len(ips) + len(macs)))
    return gather(index, [str(t) for t in ips] + [str(t) for t in macs] + ["?"], np.ones(c.n, bool))


def _info_parts(c: Columns) -> list:
    """What the packet carries, each piece with its leading space (shown on its rows only):
    RoCE/IB headers, else PFC, PAUSE, LLDP or the EtherType; then CE, VLAN, mirror, checks."""
    op, op_names = c.cat("opcode_name")
    roce, pfc, pause, lldp, other = _kinds(c, op != NONE)
    mad = roce & c.num("mad_class")[1] & c.num("mad_attr_id")[1]
    llc = other & c.num("llc_dsap")[1]
    parts = []                                  # a kind no row of the block has costs nothing
    if (roce & ~mad).any():
        parts += _roce_parts(c, roce & ~mad, op, op_names)
    if mad.any():                               # rare: a text per row
        rows = np.flatnonzero(mad)
        parts.append(gather(np.cumsum(mad) - 1, [" " + mad_info(_row(c, r, MAD_NAMES)) for r in rows], mad))
    if llc.any():
        rows = np.flatnonzero(llc)
        parts.append(gather(np.cumsum(llc) - 1, [" " + llc_info(_row(c, r, LLC_NAMES)) for r in rows], llc))
        other = other & ~llc
    if pfc.any():
        parts += _pfc_parts(c, pfc, c.num("pfc_enable")[0])
    if pause.any():
        pq, _ = c.num("pause_quanta")
        parts += [lit(c.n, " quanta=", pause)] + digits(pq, pause) + [lit(c.n, " (XON)", pause & (pq == 0))]
    if lldp.any():
        parts += mapped(*c.num("lldp_pfc_enable"), lldp, lambda v: f" DCBX PFC enable=0x{v:02x}")
    if other.any():
        parts += mapped(*c.num("ethertype"), other, lambda v: f" ethertype=0x{v:04x}")
    return [p for p in parts + _tail_parts(c) if p[1].any()]      # parts no row shows: no width


MAD_NAMES = ("mad_class", "mad_attr_id", "cm_local_comm_id", "cm_remote_comm_id", "cm_local_qpn", "cm_start_psn",
             "cm_service_id", "cm_path_mtu", "cm_reject_reason", "cm_rejected_message", "cm_mraed_message",
             "cm_service_timeout", "cm_status", "cm_remote_qpn")
LLC_NAMES = ("llc_dsap", "llc_ssap", "llc_control", "stp_bpdu_type", "stp_version", "stp_flags", "stp_root_id",
             "stp_root_cost", "stp_port")


def _row(c: Columns, r: int, names: tuple) -> dict:
    """Row r's values of `names`, None where null (a few rare rows: one dict each)."""
    out = {}
    for name in names:
        values, valid = c.num(name, np.uint64)
        out[name] = int(values[r]) if valid[r] else None
    return out


def mad_info(v: dict) -> str:
    """tshark's Info of a MAD on QP0/QP1 ("CM: ConnectRequest"), then what the message says."""
    message = cm.MESSAGES.get(v["mad_attr_id"]) if v["mad_class"] == cm.MGMT_CLASS_CM else None
    if message is None:
        name = cm.CLASSES.get(v["mad_class"], "class")
        return f"MAD {name} (0x{v['mad_class']:02x}) attribute 0x{v['mad_attr_id']:04x}"
    hexes = lambda *names: [f"{label}=0x{v[n]:0{w}x}" for label, n, w in names if v[n] is not None]  # noqa: E731
    words = [f"CM: {message.name}"] + hexes(("comm", "cm_local_comm_id", 8), ("remote", "cm_remote_comm_id", 8),
                                            ("QPN", "cm_local_qpn", 6), ("remote_QPN", "cm_remote_qpn", 6))
    if v["cm_start_psn"] is not None:
        words.append(f"PSN={v['cm_start_psn']}")
    if v["cm_service_id"] is not None:
        words.append(f"service={cm.service_text(v['cm_service_id']) or hex(v['cm_service_id'])}")
    if v["cm_path_mtu"] is not None:
        words.append(f"MTU={cm.MTU_VALUES.get(v['cm_path_mtu'], v['cm_path_mtu'])}")
    if v["cm_reject_reason"] is not None:
        words.append(f"reason={v['cm_reject_reason']} ({cm.reject_text(v['cm_reject_reason'])}) rejected="
                     f"{cm.MESSAGES_REJECTED.get(v['cm_rejected_message'], v['cm_rejected_message'])}")
    if v["cm_mraed_message"] is not None:
        words.append(f"MRAed={cm.MESSAGES_MRAED.get(v['cm_mraed_message'], v['cm_mraed_message'])} "
                     f"timeout={cm.timeout_us(v['cm_service_timeout'] or 0):.0f}us")
    if v["cm_status"] is not None:
        status = (cm.AP_STATUS if message.short == "APR" else cm.SIDR_STATUS).get(v["cm_status"], "")
        words.append(f"status={v['cm_status']}" + (f" ({status})" if status else ""))
    return " ".join(words)


_U_FUNCS = {0x03: "UI", 0x6F: "SABME", 0x43: "DISC", 0x63: "UA", 0x0F: "DM", 0x87: "FRMR", 0xAF: "XID", 0xE3: "TEST"}


def llc_info(v: dict) -> str:
    """tshark's Info of an IEEE 802.3 frame: the spanning tree BPDU's (packet-bpdu.c), else the
    LLC header's (packet-llc.c: control; DSAP, SSAP)."""
    if v["stp_bpdu_type"] is not None:
        kind, flags = v["stp_bpdu_type"], v["stp_flags"] or 0
        if kind == 0x80:
            return "Topology Change Notification"
        if kind not in (0x00, 0x02):
            return f"Unknown BPDU type ({kind})"
        root, tc = v["stp_root_id"] or 0, "TC + " if flags & 1 else ""
        head = "Conf." if kind == 0 else {3: "MST.", 4: "SPT."}.get(v["stp_version"], "RST.")
        mac = ":".join(f"{(root >> s) & 0xFF:02x}" for s in range(40, -8, -8))
        return (f"{head} {tc}Root = {root >> 48 & 0xF000}/{root >> 48 & 0x0FFF}/{mac}  "
                f"Cost = {v['stp_root_cost']}  Port = 0x{v['stp_port']:04x}")
    control = v["llc_control"] or 0
    kind = "U" if control & 3 == 3 else "S" if control & 3 == 1 else "I"
    text = f"U, func={_U_FUNCS.get(control & 0xEF, 'Unknown')}" if kind == "U" else kind
    sap = lambda x: ethernet.SAPS.get(x & 0xFE, f"0x{x & 0xFE:02x}")  # noqa: E731
    return (f"{text}; DSAP {sap(v['llc_dsap'])} {'Group' if v['llc_dsap'] & 1 else 'Individual'}, "
            f"SSAP {sap(v['llc_ssap'])} {'Response' if v['llc_ssap'] & 1 else 'Command'}")


def _kinds(c: Columns, roce: np.ndarray) -> tuple:
    """The rows of each kind of info, first that applies: RoCE/IB, PFC, PAUSE, LLDP (each with
    its field read), else any frame with an EtherType."""
    proto, names = c.cat("proto")
    is_proto = lambda p: proto == names.index(p) if p in names else np.zeros(c.n, bool)  # noqa: E731
    pfc = ~roce & is_proto("pfc") & c.num("pfc_enable")[1]
    pause = ~roce & ~pfc & is_proto("pause") & c.num("pause_quanta")[1]
    lldp = ~roce & ~pfc & ~pause & is_proto("lldp") & c.num("lldp_pfc_enable")[1]
    other = ~roce & ~pfc & ~pause & ~lldp & c.num("ethertype")[1]
    return roce, pfc, pause, lldp, other


def _roce_parts(c: Columns, roce: np.ndarray, op: np.ndarray, op_names: list) -> list:
    n = c.n
    qp, qp_ok = c.num("dest_qp")
    psn, psn_ok = c.num("psn")
    parts = [lit(n, " ", roce), gather(op, [str(t) for t in op_names], roce)]
    parts += [lit(n, " QP=0x", roce), _hex6(qp, roce & qp_ok), lit(n, " PSN=", roce)] + or_none(psn, psn_ok, roce)
    for text, name in ((" AckReq", "ackreq"), (" SE", "se"), (" FECN", "fecn"), (" BECN", "becn")):
        parts.append(lit(n, text, roce & c.true(name)))
    kind, kinds = c.cat("aeth_kind")
    code, code_ok = c.num("aeth_code")
    nak = roce & (kind == kinds.index("NAK")) if "NAK" in kinds else np.zeros(n, bool)
    rnr = roce & (kind == kinds.index("RNR_NAK")) if "RNR_NAK" in kinds else np.zeros(n, bool)
    parts += mapped(code, code_ok, nak, lambda v: f" NAK({NAK_CODES.get(v, v)})")
    parts += mapped(code, code_ok, rnr, lambda v: f" RNR_NAK(timer={v})")
    return parts


def _hex6(qp: np.ndarray, shown: np.ndarray):
    """The 6+ lowercase hex digits of f"{qp:06x}" (a QPN is 24 bits: 6 digits)."""
    (mat, mask), = column_parts(np.where(shown, qp, 0), "qp")[1:]
    return mat, mask & shown[:, None]


def _pfc_parts(c: Columns, pfc: np.ndarray, en: np.ndarray) -> list:
    """`enable=0x89 P0=65535 P3=0 P7=3`: the enabled priorities' quanta (a space after the
    enable vector even when none is enabled, as the per-packet code wrote it)."""
    n = c.n
    parts = mapped(en, pfc, pfc, lambda v: f" enable=0x{v:02x} ")
    for p in range(8):
        on = pfc & (en >> p & 1).astype(bool)
        quanta, ok = c.num(f"pfc_quanta{p}")
        parts += [lit(n, " ", on & (en & ((1 << p) - 1) != 0)), lit(n, f"P{p}=", on)] + or_none(quanta, ok, on)
    return parts


def _tail_parts(c: Columns) -> list:
    n = c.n
    ecn, ecn_ok = c.num("ecn")
    vlan, vlan_ok = c.num("vlan_id")
    pcp, pcp_ok = c.num("pcp")
    mirror, mirror_ok = c.num("mirror_session")
    icrc_ok, icrc_known = c.num("icrc_ok", bool)
    parts = [lit(n, " CE", ecn_ok & (ecn == 3))]
    parts += mapped(vlan, vlan_ok, vlan_ok, lambda v: f" VLAN={v} PCP=") + mapped(pcp, pcp_ok, vlan_ok, str)
    parts += mapped(mirror, mirror_ok, mirror_ok, lambda v: f" mirror={v}")
    return parts + [lit(n, " [bad ICRC]", icrc_known & ~icrc_ok), lit(n, " [truncated]", c.true("truncated"))]
