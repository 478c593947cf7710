"""Remote-mirror encapsulations: GRE + ERSPAN type I/II/III, VXLAN.

Switches send port-mirror copies to a collector inside these; roceview strips them so the
mirrored frame is what gets analyzed, keeping the session id and the truncation flag.
"""
from dissectors.fields import Field, Header

VXLAN_UDP_PORT = 4789          # RFC 7348
GRE_FLAG_C, GRE_FLAG_K, GRE_FLAG_S = 0x8000, 0x2000, 0x1000

GRE = Header("GRE", "Generic Routing Encapsulation", 4, (
    Field("checksum_present", 0, 1, kind="bool", meaning="C: checksum present"),
    Field("key_present", 0, 1, bit=2, kind="bool", meaning="K: key present"),
    Field("seq_present", 0, 1, bit=3, kind="bool", meaning="S: sequence number present"),
    Field("version", 1, 3, bit=5, meaning="version"),
    Field("protocol", 2, 16, meaning="protocol type", values={0x88BE: "ERSPAN I/II", 0x22EB: "ERSPAN III"}),
), spec="RFC 2784, RFC 2890")

ERSPAN_II = Header("ERSPAN-II", "ERSPAN type II", 8, (
    Field("ver", 0, 4, meaning="version (1 = type II)"),
    Field("vlan", 0, 12, bit=4, meaning="original VLAN"),
    Field("cos", 2, 3, meaning="class of service"),
    Field("en", 2, 2, bit=3, meaning="trunk encapsulation type"),
    Field("t", 2, 1, bit=5, kind="bool", meaning="T: frame was truncated"),
    Field("session", 2, 10, bit=6, column="mirror_session", meaning="session id"),
    Field("index", 5, 20, bit=4, meaning="port index"),
), spec="draft-foschiano-erspan 4.1")

ERSPAN_III = Header("ERSPAN-III", "ERSPAN type III", 12, (
    Field("ver", 0, 4, meaning="version (2 = type III)"),
    Field("vlan", 0, 12, bit=4, meaning="original VLAN"),
    Field("cos", 2, 3, meaning="class of service"),
    Field("bso", 2, 2, bit=3, meaning="bad/short/oversized"),
    Field("t", 2, 1, bit=5, kind="bool", meaning="T: frame was truncated"),
    Field("session", 2, 10, bit=6, column="mirror_session", meaning="session id"),
    Field("timestamp", 4, 32, meaning="timestamp"),
    Field("sgt", 8, 16, meaning="security group tag"),
    Field("p", 10, 1, kind="bool", meaning="P: Ethernet PDU"),
    Field("ft", 10, 5, bit=1, meaning="frame type"),
    Field("hwid", 10, 6, bit=6, meaning="hardware id"),
    Field("d", 11, 1, bit=4, kind="bool", meaning="direction"),
    Field("gra", 11, 2, bit=5, meaning="timestamp granularity"),
    Field("o", 11, 1, bit=7, kind="bool", meaning="O: optional platform sub-header present"),
), spec="draft-foschiano-erspan 4.2")

VXLAN = Header("VXLAN", "Virtual eXtensible LAN", 8, (
    Field("flags", 0, 8, meaning="flags (I = 0x08)"),
    Field("vni", 4, 24, meaning="VXLAN network identifier"),
), spec="RFC 7348")
