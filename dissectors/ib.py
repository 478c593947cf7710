"""InfiniBand headers carried by RoCE: LRH, GRH, BTH and the extended transport headers.

Section numbers are those of the IBTA InfiniBand Architecture Specification Vol. 1
(chapter 9, transport) and its RoCE annexes A16 (RoCE) and A17 (RoCEv2).
"""
from dissectors.fields import Field, Header

ROCE_V2_UDP_PORT = 4791      # IANA, IBTA A17.2.2
CNP_OPCODE = 0x81            # RoCEv2 congestion notification packet, A17.9.2
ICRC_LEN = 4
VCRC_LEN = 2                 # native IB only

LRH = Header("LRH", "Local Route Header", 8, (
    Field("vl", 0, 4, column="vl", meaning="virtual lane"),
    Field("lver", 0, 4, bit=4, meaning="link version"),
    Field("sl", 1, 4, column="sl", meaning="service level"),
    Field("lnh", 1, 2, bit=6, meaning="link next header",
          values={0: "raw", 1: "IP non-IBA", 2: "IBA local (BTH)", 3: "IBA global (GRH)"}),
    Field("dlid", 2, 16, column="dlid", meaning="destination LID"),
    Field("pktlen", 4, 11, bit=5, meaning="packet length, 4-byte words (LRH to ICRC)"),
    Field("slid", 6, 16, column="slid", meaning="source LID"),
), spec="IBTA 7.7")

GRH = Header("GRH", "Global Route Header", 40, (
    Field("ipver", 0, 4, meaning="IP version (6)"),
    Field("dscp", 0, 6, bit=4, column="dscp", meaning="traffic class: DSCP"),
    Field("ecn", 1, 2, bit=2, column="ecn", meaning="traffic class: ECN"),
    Field("flow_label", 1, 20, bit=4, column="flow_label", meaning="flow label"),
    Field("paylen", 4, 16, meaning="payload length (BTH to ICRC)"),
    Field("nxthdr", 6, 8, meaning="next header (0x1B = BTH)"),
    Field("hoplmt", 7, 8, column="ttl", meaning="hop limit"),
    Field("sgid", 8, 128, kind="ipv6", meaning="source GID"),
    Field("dgid", 24, 128, kind="ipv6", meaning="destination GID"),
), spec="IBTA 8.3")

BTH = Header("BTH", "Base Transport Header", 12, (
    Field("opcode", 0, 8, column="opcode", meaning="operation code"),
    Field("se", 1, 1, column="se", kind="bool", meaning="solicited event"),
    Field("migreq", 1, 1, bit=1, column="migreq", kind="bool", meaning="migration request"),
    Field("pad", 1, 2, bit=2, column="pad", meaning="pad count"),
    Field("tver", 1, 4, bit=4, column="tver", meaning="transport header version"),
    Field("pkey", 2, 16, column="pkey", meaning="partition key"),
    Field("fecn", 4, 1, column="fecn", kind="bool", meaning="forward explicit congestion notification"),
    Field("becn", 4, 1, bit=1, column="becn", kind="bool", meaning="backward explicit congestion notification"),
    Field("resv6", 4, 6, bit=2, meaning="reserved"),
    Field("destqp", 5, 24, column="dest_qp", meaning="destination queue pair"),
    Field("ackreq", 8, 1, column="ackreq", kind="bool", meaning="acknowledge request"),
    Field("resv7", 8, 7, bit=1, meaning="reserved"),
    Field("psn", 9, 24, column="psn", meaning="packet sequence number"),
), spec="IBTA 9.2")

RDETH = Header("RDETH", "Reliable Datagram Extended Transport Header", 4, (
    Field("reserved", 0, 8, meaning="reserved"),
    Field("eecnxt", 1, 24, column="rdeth_ee_context", meaning="EE context"),
), spec="IBTA 9.3.1")

DETH = Header("DETH", "Datagram Extended Transport Header", 8, (
    Field("qkey", 0, 32, column="deth_qkey", meaning="queue key"),
    Field("reserved", 4, 8, meaning="reserved"),
    Field("srcqp", 5, 24, column="deth_src_qp", meaning="source queue pair"),
), spec="IBTA 9.3.2")

XRCETH = Header("XRCETH", "XRC Extended Transport Header", 4, (
    Field("reserved", 0, 8, meaning="reserved"),
    Field("xrcsrq", 1, 24, column="xrc_srq", meaning="XRC shared receive queue"),
), spec="IBTA 9.3.8")

RETH = Header("RETH", "RDMA Extended Transport Header", 16, (
    Field("va", 0, 64, column="reth_va", meaning="virtual address"),
    Field("rkey", 8, 32, column="reth_rkey", meaning="remote key"),
    Field("dmalen", 12, 32, column="reth_dmalen", meaning="DMA length"),
), spec="IBTA 9.3.3")

ATOMICETH = Header("AtomicETH", "Atomic Extended Transport Header", 28, (
    Field("va", 0, 64, column="atomic_va", meaning="virtual address"),
    Field("rkey", 8, 32, column="atomic_rkey", meaning="remote key"),
    Field("swapdt", 12, 64, column="atomic_swap_add", meaning="swap or add data"),
    Field("cmpdt", 20, 64, column="atomic_compare", meaning="compare data"),
), spec="IBTA 9.3.6.1")

AETH_KINDS = {0: "ACK", 1: "RNR_NAK", 2: "RESERVED", 3: "NAK"}   # syndrome bits 6:5, Table 42
NAK_CODES = {0: "PSN sequence error", 1: "invalid request", 2: "remote access error",
             3: "remote operational error", 4: "invalid RD request"}         # Table 44
# RNR NAK timer field (the AETH code of an RNR NAK) -> minimum RNR NAK timer, IBTA 9.7.5.2.8
# Table 45, in microseconds (code 0 = 655.36 ms); and in ms for text
RNR_TIMER_US = (655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
                2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
                163840, 245760, 327680, 491520)
RNR_TIMER_MS = tuple(us / 1000 for us in RNR_TIMER_US)

AETH = Header("AETH", "ACK Extended Transport Header", 4, (
    Field("syndrome", 0, 8, column="aeth_syndrome", meaning="syndrome"),
    Field("kind", 0, 2, bit=1, meaning="syndrome kind", values=AETH_KINDS),
    Field("code", 0, 5, bit=3, column="aeth_code",
          meaning="ACK: credit count; RNR NAK: timer; NAK: code"),
    Field("msn", 1, 24, column="aeth_msn", meaning="message sequence number"),
), spec="IBTA 9.3.5")

ATOMICACKETH = Header("AtomicAckETH", "Atomic Acknowledge Extended Transport Header", 8, (
    Field("origrem", 0, 64, column="atomic_ack_data", meaning="original remote data"),
), spec="IBTA 9.3.6.2")

IMMDT = Header("ImmDt", "Immediate Data Extended Transport Header", 4, (
    Field("imm", 0, 32, column="imm_data", meaning="immediate data"),
), spec="IBTA 9.3.4")

IETH = Header("IETH", "Invalidate Extended Transport Header", 4, (
    Field("rkey", 0, 32, column="ieth_rkey", meaning="R_Key to invalidate"),
), spec="IBTA 9.3.7")

CNP_PAD = Header("CNP", "Congestion Notification Packet reserved bytes", 16, (
    Field("reserved", 0, 128, meaning="reserved (16 bytes)"),
), spec="IBTA A17.9.2")

# Opcodes 0x40-0x55 (IBTA Reliable Datagram, which no NIC implements) are what NVIDIA/Mellanox
# ConnectX "DC" (Dynamically Connected) transport sends, with 8 bytes between the BTH and the
# RDETH that no public spec describes (Wireshark counts them into a 20-byte BTH and names no
# field). Declared as one opaque header so that every later header lands where it is on the
# wire; see dissectors/opcodes.py for which headers follow.
DCETH = Header("DCETH", "ConnectX DC Transport Header", 8, (
    Field("word0", 0, 32, meaning="vendor defined"),
    Field("word1", 4, 32, meaning="vendor defined"),
), spec="vendor, no public spec")

# Every extended header, in no particular order: which ones follow the BTH, and in which order
# (IBTA 9.2, Figure 2), is per opcode in dissectors/opcodes.py.
EXT_HEADERS = (RDETH, DETH, XRCETH, RETH, ATOMICETH, AETH, ATOMICACKETH, IMMDT, IETH, CNP_PAD, DCETH)

# Management datagrams on QP1 (the MAD header and the CM messages): dissectors/cm.py
