"""Ethernet II and IEEE 802.1Q / 802.1ad VLAN tags; Linux cooked headers (SLL, SLL2); IEEE 802.3
frames' LLC header and the spanning tree BPDU it carries."""
from dissectors.fields import Field, Header

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
ETHERTYPE_VLAN = 0x8100          # IEEE 802.1Q C-tag
ETHERTYPE_QINQ = 0x88A8          # IEEE 802.1ad S-tag
ETHERTYPE_QINQ_OLD = 0x9100      # pre-standard QinQ, still seen on switches
ETHERTYPE_ROCE_V1 = 0x8915       # IBTA Annex A16: RoCE (GRH follows)
ETHERTYPE_MAC_CONTROL = 0x8808   # IEEE 802.3 Clause 31: PAUSE / PFC
ETHERTYPE_LLDP = 0x88CC
ETHERTYPE_ERSPAN_II = 0x88BE     # GRE protocol of ERSPAN type I/II
ETHERTYPE_ERSPAN_III = 0x22EB    # GRE protocol of ERSPAN type III
ETHERTYPE_TEB = 0x6558           # GRE transparent Ethernet bridging

VLAN_ETHERTYPES = (ETHERTYPE_VLAN, ETHERTYPE_QINQ, ETHERTYPE_QINQ_OLD)

ETHERNET = Header("Ethernet", "Ethernet II", 14, (
    Field("dst", 0, 48, column="dst_mac", kind="mac", meaning="destination address"),
    Field("src", 6, 48, column="src_mac", kind="mac", meaning="source address"),
    Field("type", 12, 16, meaning="EtherType"),
), spec="IEEE 802.3 3.2")

VLAN = Header("802.1Q", "802.1Q Virtual LAN tag", 4, (
    Field("pcp", 0, 3, column="pcp", meaning="priority code point"),
    Field("dei", 0, 1, bit=3, kind="bool", meaning="drop eligible"),
    Field("vid", 0, 12, bit=4, column="vlan_id", meaning="VLAN identifier"),
    Field("type", 2, 16, meaning="EtherType"),
), spec="IEEE 802.1Q 9.6")

INNER_VLAN = Header("802.1Q inner", "802.1Q inner tag (QinQ)", 4, (
    Field("pcp", 0, 3, column="inner_pcp", meaning="priority code point"),
    Field("dei", 0, 1, bit=3, kind="bool", meaning="drop eligible"),
    Field("vid", 0, 12, bit=4, column="inner_vlan_id", meaning="VLAN identifier"),
    Field("type", 2, 16, meaning="EtherType"),
), spec="IEEE 802.1ad")

SLL = Header("SLL", "Linux cooked capture", 16, (
    Field("pkttype", 0, 16, meaning="packet type"),
    Field("hatype", 2, 16, meaning="ARPHRD type"),
    Field("halen", 4, 16, meaning="address length"),
    Field("addr", 6, 48, column="src_mac", kind="mac", meaning="source address"),
    Field("protocol", 14, 16, meaning="protocol (EtherType)"),
), spec="tcpdump LINKTYPE_LINUX_SLL")

SLL2 = Header("SLL2", "Linux cooked capture v2", 20, (
    Field("protocol", 0, 16, meaning="protocol (EtherType)"),
    Field("ifindex", 4, 32, meaning="interface index"),
    Field("hatype", 8, 16, meaning="ARPHRD type"),
    Field("pkttype", 10, 8, meaning="packet type"),
    Field("halen", 11, 8, meaning="address length"),
    Field("addr", 12, 48, column="src_mac", kind="mac", meaning="source address"),
), spec="tcpdump LINKTYPE_LINUX_SLL2")

# IEEE 802.3 frames: a type field below 0x0600 is the frame's length (IEEE 802.3 3.2.6) and an
# IEEE 802.2 LLC header follows; with DSAP = SSAP = 0x42 and a UI control, a spanning tree BPDU.
ETHERTYPE_MIN = 0x0600
SAP_STP, LLC_UI = 0x42, 0x03
SAPS = {0x00: "NULL LSAP", 0x02: "LLC Sublayer Management / Individual", 0x06: "TCP/IP", 0x42: "Spanning Tree BPDU",
        0x4E: "EIA RS-511 MMS", 0x7E: "ISO 8208 (X.25 over 802.2)", 0x80: "XNS", 0x8E: "Active station list",
        0xAA: "SNAP", 0xE0: "NetWare", 0xF0: "NetBIOS", 0xF4: "IBM Net Management", 0xFE: "ISO Network Layer (OSLAN 1)",
        0xFF: "Global LSAP"}         # tshark's sap_vals (packet-llc.c) for the common ones

LLC = Header("LLC", "Logical-Link Control", 3, (
    Field("dsap", 0, 8, column="llc_dsap", meaning="destination SAP (low bit: group)", values=SAPS),
    Field("ssap", 1, 8, column="llc_ssap", meaning="source SAP (low bit: response)", values=SAPS),
    Field("control", 2, 8, column="llc_control", meaning="control (0x03: U, func=UI)"),
), spec="IEEE 802.2 3")

STP_TYPES = {0x00: "Configuration", 0x02: "Rapid/Multiple Spanning Tree", 0x80: "Topology Change Notification"}
STP = Header("STP", "Spanning Tree Protocol", 35, (
    Field("protocol", 0, 16, meaning="protocol identifier (0)"),
    Field("version", 2, 8, column="stp_version", meaning="protocol version (0 STP, 2 RSTP, 3 MSTP)"),
    Field("type", 3, 8, column="stp_bpdu_type", meaning="BPDU type", values=STP_TYPES),
    Field("flags", 4, 8, column="stp_flags", meaning="flags (bit 0: topology change)"),
    Field("root", 5, 64, column="stp_root_id",
          meaning="root identifier: priority (4 bits), system id extension (12 bits), MAC"),
    Field("root_cost", 13, 32, column="stp_root_cost", meaning="root path cost"),
    Field("bridge", 17, 64, meaning="bridge identifier"),
    Field("port", 25, 16, column="stp_port", meaning="port identifier"),
    Field("msg_age", 27, 16, meaning="message age, 1/256 s"),
    Field("max_age", 29, 16, meaning="max age, 1/256 s"),
    Field("hello", 31, 16, meaning="hello time, 1/256 s"),
    Field("forward", 33, 16, meaning="forward delay, 1/256 s"),
), spec="IEEE 802.1D 9.3")
