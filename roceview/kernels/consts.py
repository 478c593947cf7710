"""Constants shared by the decode kernels (the C one in _ckernel.c and the numba fallback)
and the Python around them. Importing this module imports neither numba nor the kernels."""
from __future__ import annotations

# The protocol code of each row (the packets table's `protocol` column, the `_proto` helper
# column of a Batch): the kernels write it, everything above reads it.
PROTO_NAMES = ("other", "roce_v1", "roce_v2", "ib", "pfc", "pause", "lldp")
PROTO_CODE = {name: i for i, name in enumerate(PROTO_NAMES)}

# link types (tcpdump.org linktypes)
LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
LINKTYPE_ERF = 197
LINKTYPE_INFINIBAND = 247
LINKTYPE_LINUX_SLL2 = 276
SUPPORTED_LINKTYPES = {LINKTYPE_ETHERNET: "Ethernet", LINKTYPE_LINUX_SLL: "Linux SLL",
                       LINKTYPE_ERF: "ERF", LINKTYPE_INFINIBAND: "InfiniBand",
                       LINKTYPE_LINUX_SLL2: "Linux SLL2"}

ERF_TYPE_ETH = 2
ERF_TYPE_INFINIBAND = 21
ERF_TYPE_INFINIBAND_LINK = 25

# l3 kinds
L3_NONE, L3_IPV4, L3_IPV6, L3_GRH = 0, 4, 6, 1

P_OTHER, P_V1, P_V2, P_IB = PROTO_CODE["other"], PROTO_CODE["roce_v1"], PROTO_CODE["roce_v2"], PROTO_CODE["ib"]
P_PFC, P_PAUSE, P_LLDP = PROTO_CODE["pfc"], PROTO_CODE["pause"], PROTO_CODE["lldp"]

# Per-frame header offsets o[i, k] (-1 where absent) ...
OUT_FIELDS = ("eth", "sll", "sll2", "vlan1", "vlan2", "l3", "udp", "lrh", "bth", "macctl",
              "lldp", "gre", "erspan2", "erspan3", "vxlan")
# ... and facts meta[i, k] found on the way: proto code, l3 kind, roce_len (BTH to ICRC
# inclusive), mirror session, frame length from the IP/GRH length fields, IP fragment,
# ERSPAN truncation bit, ethertype, link-layer wire length override, decapsulated.
META_FIELDS = ("proto", "l3", "rocelen", "session", "innerlen", "frag", "trunc", "etype", "wire", "decap")

# Record walks: why a walk stopped.
NEED_MORE = 0        # a record straddles the end of the buffer: read more and call again
ABSURD = 1           # a record's captured length is absurd: the file is damaged there
FULL = 2             # the output arrays are full: hand them on and call again
BLOCK = 3            # pcapng: a block Python must parse (SHB, IDB) starts at position
BAD_BLOCK = 4        # pcapng: a block length that cannot be right

# Projections: the declared columns a consumer reads. `roceview analyze` reads only these
# (analysis/, diagnose/; tests/packets/test_projection.py checks it reads nothing else and gets the
# same results), so its kernel extracts 22 columns instead of all of them: 170 bytes a packet
# written instead of 477. KERNEL_COLUMNS are read by the kernel itself (payload length,
# IB addresses) and are in every projection.
KERNEL_COLUMNS = ("opcode", "pad", "slid", "dlid")
PROJECTIONS = {
    "analysis": KERNEL_COLUMNS + (
        "dest_qp", "psn", "ackreq", "ip_id", "ttl", "aeth_syndrome", "reth_dmalen", "ecn", "dscp", "pcp", "src_mac",
        "dst_mac", "pfc_enable", "pause_quanta") + tuple(f"pfc_quanta{p}" for p in range(8)),
}
PROJECTION_CODE = {None: 0, "analysis": 1}   # the kernels' `projection` argument

MAX_CAPLEN = 256 * 1024
ICRC_LEN = 4
