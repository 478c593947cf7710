"""BTH OpCode classification for PSN analysis (IBTA Vol. 1, Table 38, section 9.2).

The OpCode's top three bits select the transport (RC, UC, RD, UD, CNP, XRC); the low five bits the
operation. Each opcode maps to one class code; lookup tables are 256-entry numpy arrays so that a
whole chunk is classified with one gather.
"""
from __future__ import annotations

import numpy as np

# class codes
NONE, REQUEST, READ_REQUEST, READ_RESPONSE, ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, CNP = range(7)

# PSN spaces of one direction of a QP: its own requests, its responses to the peer
REQUEST_SPACE, RESPONSE_SPACE, NO_SPACE = 0, 1, 2

TRANSPORT_NAMES = ("RC", "UC", "RD", "UD", "CNP", "XRC", "other", "other")
TRANSPORT_UD = 3
TRANSPORT_CNP = 4
OPCODE_CNP = 0x81

_RC_REQUESTS = list(range(0x00, 0x0C)) + [0x13, 0x14, 0x16, 0x17, 0x1C, 0x1D]
_READ_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10)
# FIRST and MIDDLE packets carry exactly one path MTU of payload (IBTA 9.7.7)
_FIRST_MIDDLE = (0x00, 0x01, 0x06, 0x07, 0x0D, 0x0E)


def _build_tables():
    cls = np.full(256, NONE, dtype=np.uint8)
    for base in (0x00, 0x40, 0xA0):  # RC, RD, XRC share the operation table
        for low in _RC_REQUESTS:
            cls[base | low] = REQUEST
        cls[base | 0x0C] = READ_REQUEST
        for low in _READ_RESPONSES:
            cls[base | low] = READ_RESPONSE
        cls[base | 0x11] = ACKNOWLEDGE
        cls[base | 0x12] = ATOMIC_ACKNOWLEDGE
    for low in range(0x00, 0x0C):  # UC: SEND and RDMA WRITE
        cls[0x20 | low] = REQUEST
    cls[0x64] = cls[0x65] = REQUEST  # UD SEND_ONLY (with immediate)
    cls[OPCODE_CNP] = CNP
    space = np.full(256, NO_SPACE, dtype=np.uint8)
    space[(cls == REQUEST) | (cls == READ_REQUEST)] = REQUEST_SPACE
    space[(cls == READ_RESPONSE) | (cls == ACKNOWLEDGE) | (cls == ATOMIC_ACKNOWLEDGE)] = RESPONSE_SPACE
    # UD has no acknowledgements or retransmissions, and many senders share one destination QP
    # (QP1 for CM MADs, IPoIB): its PSNs say nothing about loss, so it gets no PSN space.
    space[0x64] = space[0x65] = NO_SPACE
    first_middle = np.zeros(256, dtype=bool)
    for base in (0x00, 0x20, 0x40, 0xA0):
        for low in _FIRST_MIDDLE:
            if cls[base | low] != NONE:
                first_middle[base | low] = True
    return cls, space, first_middle


OPCLASS, SPACE_OF_OPCODE, FIRST_OR_MIDDLE = _build_tables()
IS_DATA = np.zeros(256, dtype=bool)  # data packet: a request or a READ response
IS_DATA[(OPCLASS == REQUEST) | (OPCLASS == READ_REQUEST) | (OPCLASS == READ_RESPONSE)] = True


CONTINUES_RESPONSE = np.zeros(256, dtype=bool)  # READ response MIDDLE/LAST continue a message
for _base in (0x00, 0x40, 0xA0):
    CONTINUES_RESPONSE[_base | 0x0E] = CONTINUES_RESPONSE[_base | 0x0F] = True


# One byte of flags per opcode, so that a chunk is classified with a single gather (bit tests on
# uint8 are far cheaper than one 256-entry table lookup per property).
F_REQUEST_SPACE, F_RESPONSE_SPACE, F_DATA, F_ACK = 1, 2, 4, 8
F_CNP, F_READ_REQUEST, F_CONTINUES_RESPONSE, F_FIRST_OR_MIDDLE = 16, 32, 64, 128
FLAGS = (np.where(SPACE_OF_OPCODE == REQUEST_SPACE, F_REQUEST_SPACE, 0)
         | np.where(SPACE_OF_OPCODE == RESPONSE_SPACE, F_RESPONSE_SPACE, 0)
         | np.where(IS_DATA, F_DATA, 0) | np.where(OPCLASS == ACKNOWLEDGE, F_ACK, 0)
         | np.where(OPCLASS == CNP, F_CNP, 0) | np.where(OPCLASS == READ_REQUEST, F_READ_REQUEST, 0)
         | np.where(CONTINUES_RESPONSE, F_CONTINUES_RESPONSE, 0)
         | np.where(FIRST_OR_MIDDLE, F_FIRST_OR_MIDDLE, 0)).astype(np.uint8)


def may_be_read_request(opcode: np.ndarray) -> np.ndarray:
    """A cheap superset of READ requests (low five bits 0x0C), to skip the exact test."""
    return (opcode & 0x1F) == 0x0C


def transport_code(opcode: np.ndarray) -> np.ndarray:
    """Index into TRANSPORT_NAMES from the opcode's top three bits (0x81 is CNP)."""
    code = (np.asarray(opcode, dtype=np.uint8) >> 5).astype(np.int8)
    return code


# AETH syndrome bits 6:5 (IBTA 9.3.5, Table 42)
AETH_ACK, AETH_RNR_NAK, AETH_RESERVED, AETH_NAK = 0, 1, 2, 3
NAK_PSN_SEQUENCE_ERROR = 0
NAK_CODE_NAMES = {0: "PSN sequence error", 1: "invalid request", 2: "remote access error",
                  3: "remote operational error", 4: "invalid RD request"}
