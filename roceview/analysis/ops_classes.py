"""Operations (one RDMA message each, `ops.csv`): what each BTH OpCode says about the message it
belongs to (IBTA Vol. 1, 9.2 Table 38 and 9.4). 256-entry tables, so a chunk is classified with
one gather per property.

A message is FIRST, MIDDLE..., LAST or ONLY packets of one QP in PSN order; an RDMA READ
request, an atomic (CmpSwap, FetchAdd) and the IBTA 1.5 FLUSH and ATOMIC WRITE requests are one
packet each. A message's operation is named by its last packet (SEND LAST with immediate: a
SEND_IMM) and, until that is seen, by its first.
"""
from __future__ import annotations

import numpy as np

OP_NAMES = ("SEND", "SEND_IMM", "SEND_INV", "WRITE", "WRITE_IMM", "READ", "CMP_SWAP", "FETCH_ADD", "FLUSH",
            "ATOMIC_WRITE")
OP_CODE = {name: i for i, name in enumerate(OP_NAMES)}
N_OPS = len(OP_NAMES)
# how an operation completes: any response covering its PSNs (SEND, WRITE, FLUSH, ATOMIC WRITE),
# its own READ responses (the last one), its own ATOMIC ACKNOWLEDGE
BY_ANY, BY_READ_RESPONSE, BY_ATOMIC_ACK = 0, 1, 2
COMPLETES_BY = np.array([BY_READ_RESPONSE if n == "READ" else BY_ATOMIC_ACK if n in ("CMP_SWAP", "FETCH_ADD")
                         else BY_ANY for n in OP_NAMES], dtype=np.int8)
ATOMIC_BYTES = 8          # an atomic's operand (IBTA 9.4.5: 64-bit), its request carries no payload

# (low five bits of the opcode) -> operation, and the packet's place in its message
_FIRST, _MIDDLE, _LAST, _ONLY = 1, 0, 2, 3      # bits: starts a message (1), ends one (2)
_REQUESTS = {
    0x00: ("SEND", _FIRST), 0x01: ("SEND", _MIDDLE), 0x02: ("SEND", _LAST), 0x03: ("SEND_IMM", _LAST),
    0x04: ("SEND", _ONLY), 0x05: ("SEND_IMM", _ONLY), 0x06: ("WRITE", _FIRST), 0x07: ("WRITE", _MIDDLE),
    0x08: ("WRITE", _LAST), 0x09: ("WRITE_IMM", _LAST), 0x0A: ("WRITE", _ONLY), 0x0B: ("WRITE_IMM", _ONLY),
    0x0C: ("READ", _ONLY), 0x13: ("CMP_SWAP", _ONLY), 0x14: ("FETCH_ADD", _ONLY),
    0x16: ("SEND_INV", _LAST), 0x17: ("SEND_INV", _ONLY), 0x1C: ("FLUSH", _ONLY), 0x1D: ("ATOMIC_WRITE", _ONLY),
}
_UC_LOW = range(0x00, 0x0C)                   # UC: SEND and RDMA WRITE only
UD_SEND_ONLY, UD_SEND_ONLY_IMM = 0x64, 0x65


def _tables():
    kind = np.full(256, -1, dtype=np.int8)           # operation of a request packet, -1: none
    starts = np.zeros(256, dtype=bool)
    ends = np.zeros(256, dtype=bool)
    for base in (0x00, 0x20, 0x40, 0xA0):            # RC, UC, RD (ConnectX DC), XRC
        for low, (name, place) in _REQUESTS.items():
            if base == 0x20 and low not in _UC_LOW:
                continue
            kind[base | low] = OP_CODE[name]
            starts[base | low] = bool(place & 1)
            ends[base | low] = bool(place & 2)
    return kind, starts, ends


KIND, STARTS, ENDS = _tables()
# a message's packets are of one family (IBTA 9.7.5.1.x: a SEND MIDDLE follows a SEND FIRST or
# MIDDLE, an RDMA WRITE MIDDLE a WRITE FIRST or MIDDLE): 1 SEND, 2 RDMA WRITE, 0 one-packet kinds
KIND_FAMILY = np.array([1 if n.startswith("SEND") else 2 if n.startswith("WRITE") else 0 for n in OP_NAMES],
                       dtype=np.int8)
FAMILY = np.where(KIND >= 0, KIND_FAMILY.take(np.maximum(KIND, 0)), 0).astype(np.int8)
# FIRST and MIDDLE packets (they end no message): their payload is exactly one path MTU (IBTA 9.7.7)
FIRST_MIDDLE = (KIND >= 0) & ~ENDS
LAST_OR_ONLY = (KIND >= 0) & ENDS
WHOLE = STARTS & ENDS                # a message of one packet: ONLY, READ request, atomic
# a SEND or RDMA WRITE ONLY: its bytes are its payload (a WRITE's RETH DMA length: the same)
PAYLOAD_BYTES = WHOLE & (KIND >= 0) & (KIND <= OP_CODE["WRITE_IMM"])     # SEND .. WRITE_IMM
# the RETH DMA length is the message's length: RDMA WRITE FIRST / ONLY, RDMA READ request
RETH_LENGTH = np.zeros(256, dtype=bool)
for _base in (0x00, 0x20, 0x40, 0xA0):
    for _low in (0x06, 0x0A, 0x0B) + (() if _base == 0x20 else (0x0C,)):
        RETH_LENGTH[_base | _low] = True
# operations answered by their own response: a READ (its READ responses), an atomic (ATOMIC ACK)
OWN_RESPONSE = np.zeros(256, dtype=bool)
OWN_RESPONSE[KIND >= 0] = COMPLETES_BY[KIND[KIND >= 0]] != BY_ANY
# whole_chunk's tests in one byte: a message of one packet, its bytes its payload, a RETH length
F_WHOLE, F_PAYLOAD_BYTES, F_RETH = 1, 2, 4

FAST = (np.where(WHOLE, F_WHOLE, 0) | np.where(PAYLOAD_BYTES, F_PAYLOAD_BYTES, 0)
        | np.where(RETH_LENGTH, F_RETH, 0)).astype(np.uint8)

# response packets (the responder's, in its response space)
RESP_ACK, RESP_READ_RESPONSE, RESP_READ_LAST, RESP_ATOMIC_ACK = 1, 2, 3, 4
RESPONSE = np.zeros(256, dtype=np.int8)
for _base in (0x00, 0x40, 0xA0):
    RESPONSE[_base | 0x11] = RESP_ACK
    RESPONSE[_base | 0x0D] = RESPONSE[_base | 0x0E] = RESP_READ_RESPONSE
    RESPONSE[_base | 0x0F] = RESPONSE[_base | 0x10] = RESP_READ_LAST
    RESPONSE[_base | 0x12] = RESP_ATOMIC_ACK


def ud_kind(opcode: np.ndarray) -> np.ndarray:
    """SEND or SEND_IMM of UD SEND ONLY (with immediate) packets."""
    return np.where(opcode == UD_SEND_ONLY_IMM, OP_CODE["SEND_IMM"], OP_CODE["SEND"]).astype(np.int8)
