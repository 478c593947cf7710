"""One summary line per packet (the `dissect` default), from a packets-table DataFrame."""
from __future__ import annotations

import numpy as np
import pandas as pd

from dissectors.ib import NAK_CODES
from roceview.render.flag_text import ANALYSIS_NAMES, TAGGED, tag_text

PROTO_LABEL = {"roce_v1": "RoCEv1", "roce_v2": "RoCEv2", "ib": "IB", "pfc": "PFC", "pause": "PAUSE",
               "lldp": "LLDP", "other": "Eth"}


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
    """(row dict, PFC quanta per priority) of each packet: the columns the lines read, and
    with the analysis columns `flags`, and the others (render/flag_text.py) where it is set."""
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


def packet_lines(df: pd.DataFrame, first_ts: int | None, gbps: float = 100.0, colour: bool = False) -> list[str]:
    """One line per packet; with the analysis columns, its flags in brackets at the end
    (ANSI-coloured with `colour`; pause times at `gbps`)."""
    if len(df) == 0:
        return []
    first_ts = int(df["ts_ns"].iloc[0]) if first_ts is None else first_ts
    rel = ((df["ts_ns"].to_numpy(np.int64) - first_ts) / 1e9).tolist()
    lines = []
    for i, (row, quanta) in enumerate(packet_rows(df)):
        src = row["src_ip"] or row["src_mac"] or "?"
        dst = row["dst_ip"] or row["dst_mac"] or "?"
        label = PROTO_LABEL.get(row["proto"], row["proto"])
        info = _info(row, quanta)
        if row.get("flags") and row["flags"] & TAGGED:
            info = f"{info} {tag_text(row, quanta, gbps, colour)}"
        lines.append(f"{row['frame']:>7} {rel[i]:12.6f} {src} → {dst} {label} {row['wire_len']} {info}".rstrip())
    return lines


def _info(row: dict, quanta: list) -> str:
    parts = []
    if row["opcode_name"] is not None:
        parts += [row["opcode_name"], f"QP=0x{row['dest_qp']:06x}", f"PSN={row['psn']}"]
        parts += [flag for flag, key in (("AckReq", "ackreq"), ("SE", "se"), ("FECN", "fecn"), ("BECN", "becn"))
                  if row[key]]
        if row["aeth_kind"] == "NAK":
            parts.append(f"NAK({NAK_CODES.get(row['aeth_code'], row['aeth_code'])})")
        elif row["aeth_kind"] == "RNR_NAK":
            parts.append(f"RNR_NAK(timer={row['aeth_code']})")
    elif row["proto"] == "pfc" and row["pfc_enable"] is not None:
        en = row["pfc_enable"]
        parts.append(f"enable=0x{en:02x} " + " ".join(f"P{p}={quanta[p]}" for p in range(8) if en >> p & 1))
    elif row["proto"] == "pause" and row["pause_quanta"] is not None:
        parts.append(f"quanta={row['pause_quanta']}" + (" (XON)" if row["pause_quanta"] == 0 else ""))
    elif row["proto"] == "lldp" and row["lldp_pfc_enable"] is not None:
        parts.append(f"DCBX PFC enable=0x{row['lldp_pfc_enable']:02x}")
    elif row["ethertype"] is not None:
        parts.append(f"ethertype=0x{row['ethertype']:04x}")
    if row["ecn"] == 3:
        parts.append("CE")
    if row["vlan_id"] is not None:
        parts.append(f"VLAN={row['vlan_id']} PCP={row['pcp']}")
    if row["mirror_session"] is not None:
        parts.append(f"mirror={row['mirror_session']}")
    if row["icrc_ok"] is False:
        parts.append("[bad ICRC]")
    if row["truncated"]:
        parts.append("[truncated]")
    return " ".join(parts)
