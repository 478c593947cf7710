"""Batch -> pandas DataFrame with the documented column names and nullable dtypes."""
from __future__ import annotations


import numpy as np
import pandas as pd

from dissectors import cm, ib, opcodes
from roceview.packets.batch import PROTO_NAMES, Batch
from roceview.packets.names import address_text, mac_text

COLUMNS = (
    "frame ts_ns wire_len cap_len interface mirror_session src_mac dst_mac vlan_id pcp "
    "inner_vlan_id inner_pcp ethertype proto src_ip dst_ip dscp ecn ttl ip_id ip_frag flow_label "
    "udp_sport udp_dport opcode opcode_name transport se migreq pad tver pkey fecn becn dest_qp "
    "ackreq psn reth_va reth_rkey reth_dmalen aeth_syndrome aeth_kind aeth_code aeth_msn "
    "deth_qkey deth_src_qp rdeth_ee_context imm_data ieth_rkey atomic_va atomic_rkey "
    "atomic_swap_add atomic_compare atomic_ack_data xrc_srq payload_len icrc icrc_ok truncated "
    "pfc_enable pfc_quanta0 pfc_quanta1 pfc_quanta2 pfc_quanta3 pfc_quanta4 pfc_quanta5 "
    "pfc_quanta6 pfc_quanta7 pause_quanta lldp_pfc_enable slid dlid sl vl mad_class mad_attr_id "
    "cm_local_comm_id cm_remote_comm_id cm_local_qpn cm_path_mtu "
    "mad_tid cm_message cm_service_id cm_start_psn cm_responder_resources cm_initiator_depth cm_local_ack_timeout "
    "cm_target_ack_delay cm_retry_count cm_rnr_retry_count cm_remote_cm_response_timeout cm_max_cm_retries "
    "cm_local_cm_response_timeout "
    "cm_reject_reason cm_rejected_message cm_mraed_message cm_service_timeout cm_status cm_remote_qpn "
    "llc_dsap llc_ssap llc_control stp_version stp_bpdu_type stp_flags stp_root_id stp_root_cost stp_port"
).split()

OPCODE_NAMES = [opcodes.opcode_name(i) for i in range(256)]
CM_MESSAGE_NAMES = [m.name for m in cm.MESSAGES.values()]
_CM_MESSAGE_CODE = {attr: k for k, attr in enumerate(cm.MESSAGES)}
TRANSPORT_NAMES = list(opcodes.TRANSPORTS.values())
_TRANSPORT_CODE = np.array([TRANSPORT_NAMES.index(opcodes.TRANSPORTS[k << 5]) if k << 5 in opcodes.TRANSPORTS
                            else -1 for k in range(8)], np.int64)   # by OpCode[7:5]


def _categorical(codes: np.ndarray, ok: np.ndarray, categories) -> pd.Categorical:
    return pd.Categorical.from_codes(np.where(ok, codes.astype(np.int64), -1), categories=list(categories))


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, index of each distinct value's first row), by hashing, not sorting: 16-byte
    addresses are factorized as two 64-bit words and the pairs of codes again."""
    if values.ndim == 1:
        codes, _ = pd.factorize(values)
    else:
        words = np.ascontiguousarray(values).view("<u8").reshape(len(values), -1)
        codes = np.zeros(len(values), np.int64)
        for w in range(words.shape[1]):
            part, distinct = pd.factorize(words[:, w])
            codes, _ = pd.factorize(codes * len(distinct) + part)
    first = np.full(int(codes.max(initial=-1)) + 1, len(codes), np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return codes, first


def _unique_formatted(values: np.ndarray, ok: np.ndarray, fmt) -> pd.Categorical:
    """Format only the distinct values (a capture has few addresses, many packets)."""
    rows = np.flatnonzero(ok)
    codes = np.full(len(values), -1, np.int64)
    inverse, first = _factorize(values[rows]) if len(rows) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    codes[rows] = inverse
    names = [fmt(values[rows[i]]) for i in first]
    # distinct raw values can format alike (IPv4 vs IPv4-mapped GID): merge them
    cats = list(dict.fromkeys(names))
    remap = np.array([cats.index(n) for n in names] + [-1], np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=cats)


def string_columns(b: Batch) -> dict:
    out = {}
    out["src_mac"] = _unique_formatted(b.cols["_src_mac"], b.mask("_src_mac"), mac_text)
    out["dst_mac"] = _unique_formatted(b.cols["_dst_mac"], b.mask("_dst_mac"), mac_text)
    out["proto"] = _categorical(b.cols["_proto"], np.ones(b.n, bool), PROTO_NAMES)
    out["src_ip"] = _unique_formatted(b.cols["_src_addr"], b.mask("_src_addr"), lambda v: address_text(v.tobytes()))
    out["dst_ip"] = _unique_formatted(b.cols["_dst_addr"], b.mask("_dst_addr"), lambda v: address_text(v.tobytes()))
    op, has = b.cols["opcode"], b.mask("opcode")
    out["opcode_name"] = _categorical(op, has, OPCODE_NAMES)
    tcode = _TRANSPORT_CODE[op >> 5]
    out["transport"] = _categorical(tcode, has & (tcode >= 0), TRANSPORT_NAMES)
    kind = (b.cols["aeth_syndrome"] >> 5) & 3
    out["aeth_kind"] = _categorical(kind, b.mask("aeth_syndrome"), [ib.AETH_KINDS[k] for k in range(4)])
    out["cm_message"] = _categorical(*cm_message_codes(b), CM_MESSAGE_NAMES)
    return out


def cm_message_codes(b: Batch) -> tuple[np.ndarray, np.ndarray]:
    """(code into CM_MESSAGE_NAMES, valid) of each row: a CM MAD's message, by attribute id
    (CM MADs are few: looked up one by one)."""
    codes = np.full(b.n, -1, np.int64)
    rows = np.flatnonzero(b.mask("mad_attr_id") & b.mask("mad_class") & (b.cols["mad_class"] == cm.MGMT_CLASS_CM))
    codes[rows] = [_CM_MESSAGE_CODE.get(a, -1) for a in b.cols["mad_attr_id"][rows].tolist()]
    return codes, codes >= 0


def to_dataframe(b: Batch | None, columns=None) -> pd.DataFrame:
    wanted = list(COLUMNS if columns is None else columns)
    if b is None or b.n == 0:
        return pd.DataFrame({c: pd.Series([], dtype="object") for c in wanted})
    strings = string_columns(b) if any(c in wanted for c in ("src_mac", "dst_mac", "proto", "src_ip", "dst_ip",
                                                        "opcode_name", "transport", "aeth_kind", "cm_message")) else {}
    data = {}
    for name in wanted:
        if name in strings:
            data[name] = strings[name]
            continue
        values = b.cols[name]
        mask = b.valid.get(name)
        if mask is None:                    # never null: frame, ts_ns, lengths, truncated
            data[name] = values
        else:
            data[name] = _nullable(values, mask)
    return pd.DataFrame(data, copy=False)


def _nullable(values: np.ndarray, mask: np.ndarray):
    if not values.flags.writeable:           # a rare protocol's zero view (packets/decode.py): a column of its own
        values = np.zeros(len(values), values.dtype) if values.strides == (0,) else values.copy()
    if values.dtype == bool:
        return pd.arrays.BooleanArray(values, ~mask)
    return pd.arrays.IntegerArray(values, ~mask) if values.dtype.kind in "iu" else values
