"""IPv4 and IPv6 headers (RoCEv2 runs over either)."""
from dissectors.fields import Field, Header

IPPROTO_UDP = 17
IPPROTO_GRE = 47
ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}

IPV4 = Header("IPv4", "Internet Protocol version 4", 20, (
    Field("version", 0, 4, meaning="version"),
    Field("ihl", 0, 4, bit=4, meaning="header length, 32-bit words"),
    Field("dscp", 1, 6, column="dscp", meaning="differentiated services code point"),
    Field("ecn", 1, 2, bit=6, column="ecn", meaning="explicit congestion notification", values=ECN_NAMES),
    Field("total_length", 2, 16, meaning="total length"),
    Field("id", 4, 16, column="ip_id", meaning="identification"),
    Field("flags", 6, 3, meaning="flags (reserved, DF, MF)"),
    Field("frag_offset", 6, 13, bit=3, meaning="fragment offset, 8-byte units"),
    Field("ttl", 8, 8, column="ttl", meaning="time to live"),
    Field("protocol", 9, 8, meaning="protocol", values={17: "UDP", 47: "GRE", 6: "TCP", 1: "ICMP"}),
    Field("checksum", 10, 16, meaning="header checksum"),
    Field("src", 12, 32, kind="ipv4", meaning="source address"),
    Field("dst", 16, 32, kind="ipv4", meaning="destination address"),
), spec="RFC 791")

IPV6 = Header("IPv6", "Internet Protocol version 6", 40, (
    Field("version", 0, 4, meaning="version"),
    Field("dscp", 0, 6, bit=4, column="dscp", meaning="traffic class: DSCP"),
    Field("ecn", 1, 2, bit=2, column="ecn", meaning="traffic class: ECN", values=ECN_NAMES),
    Field("flow_label", 1, 20, bit=4, column="flow_label", meaning="flow label"),
    Field("payload_length", 4, 16, meaning="payload length"),
    Field("next_header", 6, 8, meaning="next header", values={17: "UDP", 47: "GRE"}),
    Field("hop_limit", 7, 8, column="ttl", meaning="hop limit"),
    Field("src", 8, 128, kind="ipv6", meaning="source address"),
    Field("dst", 24, 128, kind="ipv6", meaning="destination address"),
), spec="RFC 8200")

UDP = Header("UDP", "User Datagram Protocol", 8, (
    Field("sport", 0, 16, column="udp_sport", meaning="source port"),
    Field("dport", 2, 16, column="udp_dport", meaning="destination port"),
    Field("length", 4, 16, meaning="length"),
    Field("checksum", 6, 16, meaning="checksum"),
), spec="RFC 768")
