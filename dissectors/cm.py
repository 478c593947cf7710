"""InfiniBand communication management: the MAD common header (IBTA Vol. 1 13.4.3) and every
CM message (12.6: REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR; 12.11: SIDR_REQ, SIDR_REP),
with the IP CM private data and service ID that RDMA CM puts in a REQ (IBTA Annex A11).

A CM MAD is 256 bytes on QP1: the 24-byte common header, then the message. Message fields are
counted from the start of the message (the MAD's byte 24), as IBTA's tables and Linux's
include/rdma/ibta_vol1_c12.h count them. Field names are tshark's where Wireshark 4.0 has the
field (`infiniband.cm.req.localqpn` -> `localqpn`; `tshark_name` gives the whole name); the
messages Wireshark 4.0 does not decode (MRA, LAP, APR, SIDR) get names in the same style.
Declared once: the decoder (packets/decode.py), the -V tree, the scapy layers, the display
filter's and -T fields/json's `infiniband.cm.*` fields are all derived from these tables.
"""
from __future__ import annotations

from dataclasses import dataclass

from dissectors.fields import Field, Header

SMI_QP, GSI_QP = 0, 1            # the subnet management QP and the general services QP (CM): MADs (IBTA 13.5.1)
MGMT_CLASS_CM = 0x07              # IBTA 13.4.4 Table 121
MAD_LEN, MAD_HEADER_LEN = 256, 24
IP_CM_SID_MASK, IP_CM_SID_PREFIX = 0xFFFFFFFFFF000000, 0x0000000001000000   # IBTA A11.2.1

CLASSES = {0x01: "SubnMgt", 0x81: "SubnMgt (directed route)", 0x03: "SubnAdm", 0x04: "Perf",
           0x05: "BM", 0x06: "DevMgt", MGMT_CLASS_CM: "CM", 0x08: "SNMP"}
ATTRIBUTE_NAMES = {0x0001: "ClassPortInfo", 0x0010: "ConnectRequest", 0x0011: "MsgRcptAck", 0x0012: "ConnectReject",
                   0x0013: "ConnectReply", 0x0014: "ReadyToUse", 0x0015: "DisconnectRequest",
                   0x0016: "DisconnectReply", 0x0017: "ServiceIDResReq", 0x0018: "ServiceIDResReqResp",
                   0x0019: "LoadAlternatePath", 0x001A: "AlternatePathResponse"}    # CM's (IBTA 12.6)
METHODS = {0x01: "Get", 0x02: "Set", 0x03: "Send", 0x05: "Trap", 0x06: "Report", 0x07: "TrapRepress",
           0x81: "GetResp", 0x86: "ReportResp"}

MAD = Header("MAD", "Management Datagram common header", MAD_HEADER_LEN, (
    Field("baseversion", 0, 8, meaning="base version (1)"),
    Field("mgmtclass", 1, 8, column="mad_class", meaning="management class", values=CLASSES),
    Field("classversion", 2, 8, meaning="class version (CM: 2)"),
    Field("method", 3, 8, meaning="R bit and method", values=METHODS),
    Field("status", 4, 16, meaning="status"),
    Field("classspecific", 6, 16, meaning="class-specific"),
    Field("transactionid", 8, 64, column="mad_tid", meaning="transaction id (a resent MAD keeps it)"),
    Field("attributeid", 16, 16, column="mad_attr_id", meaning="attribute id (CM: the message)",
          values=ATTRIBUTE_NAMES),
    Field("attributemodifier", 20, 32, meaning="attribute modifier"),
), spec="IBTA 13.4.3")


def _f(name, offset, bits, bit=0, column=None, kind="uint", meaning="", values=None) -> Field:
    return Field(name, offset, bits, bit, column, kind, meaning, values)


def _ids(remote: bool = True) -> tuple[Field, ...]:
    """Local and remote communication ids, the first words of every CM message but the REQ's."""
    return (_f("localcommid", 0, 32, column="cm_local_comm_id", meaning="local communication id"),) + (
        (_f("remotecommid", 4, 32, column="cm_remote_comm_id", meaning="remote communication id (the peer's)"),)
        if remote else ())


def _bytes(name, offset, nbytes, meaning) -> Field:
    return _f(name, offset, nbytes * 8, kind="bytes", meaning=meaning)


def _path(p, at, alt_lap=False) -> tuple[Field, ...]:
    """A REQ path (12.6.5: primary at 52, alternate at 96) or the LAP's alternate path (12.8.1)."""
    what = "alternate" if p == "alt" else "primary"
    head = (_f(f"{p}_locallid", at, 16, meaning=f"{what} local port LID"),
            _f(f"{p}_remotelid", at + 2, 16, meaning=f"{what} remote port LID"),
            _f(f"{p}_localgid", at + 4, 128, kind="ipv6", meaning=f"{what} local port GID"),
            _f(f"{p}_remotegid", at + 20, 128, kind="ipv6", meaning=f"{what} remote port GID"),
            _f(f"{p}_flowlabel", at + 36, 20, meaning=f"{what} flow label"))
    tail = (_f(f"{p}_sl", at + 42, 4, meaning=f"{what} service level"),
            _f(f"{p}_subnetlocal", at + 42, 1, bit=4, meaning=f"{what} subnet local"),
            _f(f"{p}_localacktout", at + 43, 5, meaning=f"{what} local ACK timeout (4.096 us x 2^t)",
               column="cm_local_ack_timeout" if p == "prim" else None))
    if alt_lap:                      # LAP: traffic class after the flow label, rate after the hop limit
        return head + (_f("alt_tfcclass", at + 39, 8, meaning="alternate traffic class"),
                       _f("alt_hoplim", at + 40, 8, meaning="alternate hop limit"),
                       _f("alt_pktrate", at + 41, 6, bit=2, meaning="alternate packet rate")) + tail
    return head + (_f(f"{p}_reserved0", at + 38, 6, bit=4, meaning="reserved"),
                   _f(f"{p}_pktrate", at + 39, 6, bit=2, meaning=f"{what} packet rate"),
                   _f(f"{p}_tfcclass", at + 40, 8, meaning=f"{what} traffic class"),
                   _f(f"{p}_hoplim", at + 41, 8, meaning=f"{what} hop limit")) + tail[:2] + (
        _f(f"{p}_reserved1", at + 42, 3, bit=5, meaning="reserved"), tail[2],
        _f(f"{p}_reserved2", at + 43, 3, bit=5, meaning="reserved"))


MTU_VALUES = {1: "256", 2: "512", 3: "1024", 4: "2048", 5: "4096"}          # IBTA 9.4 / 7.7.8
TRANSPORTS = {0: "RC", 1: "UC", 2: "RD", 3: "XRC (extended)"}

REQ = Header("CM REQ", "CM ConnectRequest", 232, _ids(remote=False) + (
    _f("vendorid", 5, 24, meaning="vendor id (IBA comment 9434)"),
    _f("serviceid", 8, 64, column="cm_service_id", meaning="service id"),
    _f("localcaguid", 16, 64, meaning="local CA GUID"),
    _f("localqkey", 28, 32, meaning="local Q_Key"),
    _f("localqpn", 32, 24, column="cm_local_qpn", meaning="local QPN (the requester's QP)"),
    _f("responderres", 35, 8, column="cm_responder_resources", meaning="responder resources (RDMA READs it takes)"),
    _f("localeecn", 36, 24, meaning="local EE context number"),
    _f("initdepth", 39, 8, column="cm_initiator_depth", meaning="initiator depth (RDMA READs it sends at once)"),
    _f("remoteeecn", 40, 24, meaning="remote EE context number"),
    _f("remoteresptout", 43, 5, column="cm_remote_cm_response_timeout",
       meaning="remote CM response timeout (4.096 us x 2^t)"),
    _f("transpsvctype", 43, 2, bit=5, meaning="transport service type", values=TRANSPORTS),
    _f("e2eflowctrl", 43, 1, bit=7, meaning="end-to-end flow control"),
    _f("startpsn", 44, 24, column="cm_start_psn", meaning="starting PSN (the requester's first request)"),
    _f("localresptout", 47, 5, column="cm_local_cm_response_timeout",
       meaning="local CM response timeout (4.096 us x 2^t): how long the sender takes to answer a REP"),
    _f("retrcount", 47, 3, bit=5, column="cm_retry_count", meaning="retry count (transport retries)"),
    _f("pkey", 48, 16, meaning="partition key"),
    _f("pppmtu", 50, 4, column="cm_path_mtu", meaning="path packet payload MTU", values=MTU_VALUES),
    _f("rdcexist", 50, 1, bit=4, meaning="RDC exists"),
    _f("rnrretrcount", 50, 3, bit=5, column="cm_rnr_retry_count", meaning="RNR retry count (7: forever)"),
    _f("maxcmretr", 51, 4, column="cm_max_cm_retries", meaning="max CM retries"),
    _f("srq", 51, 1, bit=4, meaning="SRQ"),
    _f("ext_transport", 51, 3, bit=5, meaning="extended transport type"),
) + _path("prim", 52) + _path("alt", 96) + (_bytes("private", 140, 92, "private data"),), spec="IBTA 12.6.5")

MESSAGES_MRAED = {0: "REQ", 1: "REP", 2: "LAP"}
MRA = Header("CM MRA", "CM MsgRcptAck", 232, _ids() + (
    _f("msgmraed", 8, 2, column="cm_mraed_message", meaning="message MRAed", values=MESSAGES_MRAED),
    _f("reserved0", 8, 6, bit=2, meaning="reserved"),
    _f("svctimeout", 9, 5, column="cm_service_timeout", meaning="service timeout (4.096 us x 2^t)"),
    _f("reserved1", 9, 3, bit=5, meaning="reserved"),
    _bytes("private", 10, 222, "private data"),
), spec="IBTA 12.6.6")

# IBTA 12.6.7 Table 103 (and Linux enum ib_cm_rej_reason); each reason's ARI (12.6.7.2)
REJECT_REASONS = {
    1: "No QP available", 2: "No EEC available", 3: "No resources available", 4: "Timeout",
    5: "Unsupported request", 6: "Invalid communication ID", 7: "Invalid communication instance",
    8: "Invalid service ID", 9: "Invalid transport service type", 10: "Stale connection",
    11: "RDC does not exist", 12: "Primary remote port GID rejected", 13: "Primary remote port LID rejected",
    14: "Invalid primary SL", 15: "Invalid primary traffic class", 16: "Invalid primary hop limit",
    17: "Invalid primary packet rate", 18: "Alternate remote port GID rejected",
    19: "Alternate remote port LID rejected", 20: "Invalid alternate SL", 21: "Invalid alternate traffic class",
    22: "Invalid alternate hop limit", 23: "Invalid alternate packet rate", 24: "Port and CM redirection",
    25: "Port redirection", 26: "Invalid path MTU", 27: "Insufficient responder resources",
    28: "Consumer reject", 29: "RNR retry count reject", 30: "Duplicate local communication ID",
    31: "Unsupported class version", 32: "Invalid primary flow label", 33: "Invalid alternate flow label",
    35: "Vendor option not supported"}
REJECT_ARI = {4: "CA GUID of the side that timed out", 12: "acceptable GID", 13: "acceptable LID",
              14: "acceptable SL", 15: "acceptable traffic class", 16: "acceptable hop limit",
              17: "acceptable packet rate", 18: "acceptable GID", 19: "acceptable LID", 20: "acceptable SL",
              21: "acceptable traffic class", 22: "acceptable hop limit", 23: "acceptable packet rate",
              24: "ClassPortInfo to redirect to", 25: "ClassPortInfo to redirect to", 26: "acceptable path MTU",
              27: "responder resources available", 28: "consumer defined", 29: "acceptable RNR retry count",
              31: "highest class version supported", 32: "acceptable flow label", 33: "acceptable flow label"}
MESSAGES_REJECTED = {0: "REQ", 1: "REP", 2: "no message (a timeout, or unsolicited)"}
REJ = Header("CM REJ", "CM ConnectReject", 232, _ids() + (
    _f("msgrej", 8, 2, column="cm_rejected_message", meaning="message REJected", values=MESSAGES_REJECTED),
    _f("reserved0", 8, 6, bit=2, meaning="reserved"),
    _f("rejinfolen", 9, 7, meaning="reject info length (ARI bytes)"),
    _f("reserved1", 9, 1, bit=7, meaning="reserved"),
    _f("reason", 10, 16, column="cm_reject_reason", meaning="reason", values=REJECT_REASONS),
    _bytes("ari", 12, 72, "additional reject information (ARI)"),
    _bytes("private", 84, 148, "private data"),
), spec="IBTA 12.6.7")

REP = Header("CM REP", "CM ConnectReply", 232, _ids() + (
    _f("localqkey", 8, 32, meaning="local Q_Key"),
    _f("localqpn", 12, 24, column="cm_local_qpn", meaning="local QPN (the responder's QP)"),
    _f("localeecn", 16, 24, meaning="local EE context number"),
    _f("startpsn", 20, 24, column="cm_start_psn", meaning="starting PSN (the responder's first request)"),
    _f("respres", 24, 8, column="cm_responder_resources", meaning="responder resources (RDMA READs it takes)"),
    _f("initdepth", 25, 8, column="cm_initiator_depth", meaning="initiator depth (RDMA READs it sends at once)"),
    _f("tgtackdelay", 26, 5, column="cm_target_ack_delay", meaning="target ACK delay (4.096 us x 2^t)"),
    _f("failoveracc", 26, 2, bit=5, meaning="failover accepted"),
    _f("e2eflowctrl", 26, 1, bit=7, meaning="end-to-end flow control"),
    _f("rnrretrcount", 27, 3, column="cm_rnr_retry_count", meaning="RNR retry count (7: forever)"),
    _f("srq", 27, 1, bit=3, meaning="SRQ"),
    _f("reserved", 27, 4, bit=4, meaning="reserved"),
    _f("localcaguid", 28, 64, meaning="local CA GUID"),
    _bytes("private", 36, 196, "private data"),
), spec="IBTA 12.6.8")

RTU = Header("CM RTU", "CM ReadyToUse", 232, _ids() + (_bytes("private", 8, 224, "private data"),),
             spec="IBTA 12.6.9")
DREQ = Header("CM DREQ", "CM DisconnectRequest", 232, _ids() + (
    _f("remoteqpneecn", 8, 24, column="cm_remote_qpn", meaning="remote QPN/EECN (the receiver's QP)"),
    _bytes("private", 12, 220, "private data"),
), spec="IBTA 12.6.10")
DREP = Header("CM DREP", "CM DisconnectReply", 232, _ids() + (_bytes("private", 8, 224, "private data"),),
              spec="IBTA 12.6.11")
LAP = Header("CM LAP", "CM LoadAlternatePath", 232, _ids() + (
    _f("remoteqpneecn", 12, 24, column="cm_remote_qpn", meaning="remote QPN/EECN"),
    _f("remoteresptout", 15, 5, column="cm_remote_cm_response_timeout",
       meaning="remote CM response timeout (4.096 us x 2^t)"),
) + _path("alt", 20, alt_lap=True) + (_bytes("private", 64, 168, "private data"),), spec="IBTA 12.8.1")

AP_STATUS = {0: "Path loaded", 1: "Invalid communication ID", 2: "Unsupported request", 3: "Rejected",
             4: "Redirect", 5: "Path is the current one", 6: "Invalid QPN/EECN", 7: "Invalid LID",
             8: "Invalid GID", 9: "Invalid flow label", 10: "Invalid traffic class", 11: "Invalid hop limit",
             12: "Invalid packet rate", 13: "Invalid SL"}
APR = Header("CM APR", "CM AlternatePathResponse", 232, _ids() + (
    _f("addinfolen", 8, 8, meaning="additional info length"),
    _f("apstatus", 9, 8, column="cm_status", meaning="AP status", values=AP_STATUS),
    _bytes("addinfo", 12, 72, "additional info"),
    _bytes("private", 84, 148, "private data"),
), spec="IBTA 12.8.2")

SIDR_STATUS = {0: "Valid QPN", 1: "Service ID not supported", 2: "Rejected", 3: "No QP", 4: "Redirect",
               5: "Unsupported class version"}
SIDR_REQ = Header("CM SIDR_REQ", "CM ServiceIDResReq", 232, (
    _f("requestid", 0, 32, column="cm_local_comm_id", meaning="request id"),
    _f("pkey", 4, 16, meaning="partition key"),
    _f("serviceid", 8, 64, column="cm_service_id", meaning="service id"),
    _bytes("private", 16, 216, "private data"),
), spec="IBTA 12.11.1")
SIDR_REP = Header("CM SIDR_REP", "CM ServiceIDResReqResp", 232, (
    _f("requestid", 0, 32, column="cm_local_comm_id", meaning="request id (the SIDR_REQ's)"),
    _f("status", 4, 8, column="cm_status", meaning="status", values=SIDR_STATUS),
    _f("addinfolen", 5, 8, meaning="additional info length"),
    _f("qpn", 8, 24, column="cm_local_qpn", meaning="QPN of the service"),
    _f("serviceid", 12, 64, column="cm_service_id", meaning="service id"),
    _f("qkey", 20, 32, meaning="Q_Key"),
    _bytes("classportinfo", 24, 72, "ClassPortInfo (redirect)"),
    _bytes("private", 96, 136, "private data"),
), spec="IBTA 12.11.2")

# RDMA CM's IP service id (IBTA A11.2.1: prefix 0x0000000001, port space, port) and REQ private data
IP_CM_SID = Header("IP CM ServiceID", "RDMA CM IP service id", 8, (
    _bytes("prefix", 0, 5, "IP CM prefix 00:00:00:00:01"),
    _f("protocol", 5, 8, meaning="port space: IP protocol (0x06 TCP, 0x11 UDP, 0x3f IB)"),
    _f("dport", 6, 16, meaning="destination port"),
), spec="IBTA A11.2.1")
IP_CM_REQ = Header("IP CM", "RDMA CM IP private data (REQ)", 92, (
    _f("majv", 0, 4, meaning="major version"),
    _f("minv", 0, 4, bit=4, meaning="minor version"),
    _f("ipv", 1, 4, meaning="IP version"),
    _f("reserved", 1, 4, bit=4, meaning="reserved"),
    _f("sport", 2, 16, meaning="source port"),
    _f("sip6", 4, 128, kind="ipv6", meaning="source IP (IPv4: in the last 4 bytes)"),
    _f("dip6", 20, 128, kind="ipv6", meaning="destination IP (IPv4: in the last 4 bytes)"),
    _bytes("private", 36, 56, "consumer private data"),
), spec="IBTA A11.4")


@dataclass(frozen=True)
class Message:
    attr: int                 # MAD attribute id
    short: str                # REQ, REP, ...
    header: Header
    prefix: str               # the display filter's prefix of its fields

    @property
    def name(self) -> str:
        """tshark's name, as its Info shows it: "CM: ConnectRequest"."""
        return ATTRIBUTE_NAMES[self.attr]


MESSAGES = {m.attr: m for m in (
    Message(0x10, "REQ", REQ, "infiniband.cm.req"), Message(0x11, "MRA", MRA, "infiniband.cm.mra"),
    Message(0x12, "REJ", REJ, "infiniband.cm.rej"), Message(0x13, "REP", REP, "infiniband.cm.rep"),
    Message(0x14, "RTU", RTU, "infiniband.cm.rtu"), Message(0x15, "DREQ", DREQ, "infiniband.cm.dreq"),
    Message(0x16, "DREP", DREP, "infiniband.cm.drsp"),
    Message(0x17, "SIDR_REQ", SIDR_REQ, "infiniband.cm.sidr_req"),
    Message(0x18, "SIDR_REP", SIDR_REP, "infiniband.cm.sidr_rep"),
    Message(0x19, "LAP", LAP, "infiniband.cm.lap"), Message(0x1A, "APR", APR, "infiniband.cm.apr"),
)}
ATTR = {m.short: m.attr for m in MESSAGES.values()}
HEADERS = (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR)

# tshark 4.0's names where they are not prefix.field (packet-infiniband.c hf_cm_*)
_RENAMED = {("REQ", "localcommid"): "infiniband.cm.req", ("REP", "localcommid"): "infiniband.cm.rep",
            ("REQ", "alt_reserved2"): "infiniband.cm.req.alt_reserved1",   # tshark names both so
            ("DREQ", "remoteqpneecn"): "infiniband.cm.req.remoteqpneecn"}


# the messages Wireshark 4.0 decodes (packet-infiniband.c parse_COM_MGT), and what it leaves out of them
WIRESHARK_MESSAGES = ("REQ", "REP", "RTU", "REJ", "DREQ", "DREP")
NOT_IN_WIRESHARK = {("REQ", "vendorid")}             # tshark shows these 3 bytes as reserved


def tshark_name(message: Message, field: Field) -> str:
    return _RENAMED.get((message.short, field.name), f"{message.prefix}.{field.name}")


# where each header sits in the 256-byte MAD: the common header, a message, and within a REQ its
# IP CM service id and private data (the display filter reads their fields by these names)
LOCATIONS = {"MAD": (MAD, 0), "SID": (IP_CM_SID, MAD_HEADER_LEN + 8), "IPCM": (IP_CM_REQ, MAD_HEADER_LEN + 140)} | {
    m.short: (m.header, MAD_HEADER_LEN) for m in MESSAGES.values()}


# ---------------------------------------------------------------- values read from the fields

# RDMA CM port spaces (rdma/rdma_cm.h enum rdma_ucm_port_space) and services by port
PORT_SPACES = {0x0002: "IPoIB", 0x0106: "TCP", 0x0111: "UDP", 0x013F: "IB"}
SERVICES = {4420: "NVMe-oF", 3260: "iSER", 5445: "SMB Direct", 20049: "NFS-RDMA"}
IPOIB_CM_SID = 0x1000000000000000         # IPoIB connected mode (RFC 4755): | the QPN (Linux ipoib_cm)


def is_ip_cm(service_id: int) -> bool:
    return service_id & IP_CM_SID_MASK == IP_CM_SID_PREFIX


def service_text(service_id: int) -> str:
    """The service an RDMA CM service id names (0x0000000001 | port space | port): the
    protocol when the port is a known one ("NVMe-oF"), else "TCP port 12345"; IPoIB connected
    mode's; "" for another id."""
    space, port = (service_id >> 16) & 0xFFFF, service_id & 0xFFFF
    if service_id >> 32 == IPOIB_CM_SID >> 32:
        return "IPoIB connected mode"
    if service_id >> 32 or space not in PORT_SPACES:
        return ""
    return SERVICES.get(port) or f"{PORT_SPACES[space]} port {port}"


def timeout_us(t: int) -> float:
    """A CM / transport timer exponent as microseconds: 4.096 us x 2^t (IBTA 9.7.6.1.3, 12.7.34)."""
    return 4.096 * (1 << t)


def ack_timeout(ack_delay: int, packet_life_time: int) -> int:
    """The active side's Local ACK Timeout exponent once it has the REP: 2 x PacketLifeTime +
    the target's ACK delay (IBTA 12.7.34), rounded to a power of two as Linux ib_cm does it
    (drivers/infiniband/core/cm.c cm_ack_timeout)."""
    timeout = packet_life_time + 1
    if timeout >= ack_delay:
        timeout += ack_delay >= timeout - 1
    else:
        timeout = ack_delay + (timeout >= ack_delay - 1)
    return min(31, timeout)


def reject_text(reason: int) -> str:
    return REJECT_REASONS.get(reason, f"reason {reason}")
