"""BTH opcode table (IBTA 9.2, Table 38) and which extended headers each opcode carries."""
from dissectors import ib

# transport prefix by the opcode's upper three bits (IBTA 9.2: OpCode[7:5])
TRANSPORTS = {0x00: "RC", 0x20: "UC", 0x40: "RD", 0x60: "UD", 0x80: "CNP", 0xA0: "XRC"}

# operation (low five bits) -> (name, extended headers after the transport-specific ones)
_OPERATIONS = {
    0x00: ("SEND_FIRST", ()),
    0x01: ("SEND_MIDDLE", ()),
    0x02: ("SEND_LAST", ()),
    0x03: ("SEND_LAST_WITH_IMMEDIATE", ("ImmDt",)),
    0x04: ("SEND_ONLY", ()),
    0x05: ("SEND_ONLY_WITH_IMMEDIATE", ("ImmDt",)),
    0x06: ("RDMA_WRITE_FIRST", ("RETH",)),
    0x07: ("RDMA_WRITE_MIDDLE", ()),
    0x08: ("RDMA_WRITE_LAST", ()),
    0x09: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", ("ImmDt",)),
    0x0A: ("RDMA_WRITE_ONLY", ("RETH",)),
    0x0B: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", ("RETH", "ImmDt")),
    0x0C: ("RDMA_READ_REQUEST", ("RETH",)),
    0x0D: ("RDMA_READ_RESPONSE_FIRST", ("AETH",)),
    0x0E: ("RDMA_READ_RESPONSE_MIDDLE", ()),
    0x0F: ("RDMA_READ_RESPONSE_LAST", ("AETH",)),
    0x10: ("RDMA_READ_RESPONSE_ONLY", ("AETH",)),
    0x11: ("ACKNOWLEDGE", ("AETH",)),
    0x12: ("ATOMIC_ACKNOWLEDGE", ("AETH", "AtomicAckETH")),
    0x13: ("CMP_SWAP", ("AtomicETH",)),
    0x14: ("FETCH_ADD", ("AtomicETH",)),
    0x16: ("SEND_LAST_WITH_INVALIDATE", ("IETH",)),
    0x17: ("SEND_ONLY_WITH_INVALIDATE", ("IETH",)),
}
_UC_OPS = range(0x00, 0x0C)                       # SEND and RDMA WRITE only (IBTA 9.2)
_RD_OPS = list(range(0x00, 0x15))
_UD_OPS = (0x04, 0x05)
_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12)   # responder-generated packets
_ACKNOWLEDGE = 0x11

# Opcodes 0x40-0x55: IBTA Reliable Datagram (RDETH always, DETH on requests; IBTA 9.2) was never
# shipped by any NIC; the packets on real wires with these opcodes are ConnectX DC transport.
# They carry 8 vendor bytes after the BTH (ib.DCETH; tshark 4.0 likewise reads a 20-byte BTH
# for the whole range), then RDETH and DETH as RD requests do, and the ACKNOWLEDGE carries a
# DETH too: in both ConnectX captures of ../shared/captures/real, every 0x51 frame reads RDETH,
# DETH, AETH (ACKs, syndrome 0x1F, end there; the NAK, 0x64 Invalid RD Request, has 8 more
# bytes), and the RDMA WRITE ONLYs' RETH DMA length equals their payload. The other responses
# (READ responses, ATOMIC ACKNOWLEDGE) keep the IBTA RD headers after the 8 bytes, as tshark
# does: no capture shows them. docs/columns.md has the details.
_DC = ("DCETH",)


def _build():
    table = {}
    for op in _OPERATIONS:                                   # RC, IBTA 9.2 Table 38
        table[op] = ("RC", _OPERATIONS[op][0], _OPERATIONS[op][1])
    for op in _UC_OPS:
        table[0x20 | op] = ("UC", _OPERATIONS[op][0], _OPERATIONS[op][1])
    for op in _RD_OPS:                                       # RD as ConnectX DC sends it: see _DC
        name, ext = _OPERATIONS[op]
        deth = () if op in _RESPONSES and op != _ACKNOWLEDGE else ("DETH",)
        table[0x40 | op] = ("RD", name, _DC + ("RDETH",) + deth + ext)
    table[0x55] = ("RD", "RESYNC", _DC + ("RDETH", "DETH"))
    for op in _UD_OPS:
        table[0x60 | op] = ("UD", _OPERATIONS[op][0], ("DETH",) + _OPERATIONS[op][1])
    table[ib.CNP_OPCODE] = ("CNP", "CNP", ("CNP",))
    for op, (name, ext) in _OPERATIONS.items():              # XRC: XRCETH on requests
        xrc = () if op in _RESPONSES else ("XRCETH",)
        table[0xA0 | op] = ("XRC", name, xrc + ext)
    return table


# opcode -> (transport, operation, extended header names in wire order)
OPCODES: dict[int, tuple[str, str, tuple[str, ...]]] = _build()


def opcode_name(opcode: int) -> str:
    entry = OPCODES.get(opcode)
    if entry is None:
        return f"UNKNOWN_0x{opcode:02x}"
    transport, op, _ = entry
    return "CNP" if transport == "CNP" else f"{transport}_{op}"
