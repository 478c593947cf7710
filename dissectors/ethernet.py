"""Ethernet II and IEEE 802.1Q / 802.1ad VLAN tags; Linux cooked headers (SLL, SLL2)."""
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
