"""RDMA CM connection establishment on QP1 (the GSI QP): REQ -> REP -> RTU (IBTA 12.6,
12.9), as librdmacm's active and passive sides exchange them before the first request.

Each MAD travels as a UD SEND ONLY (opcode 0x64) to QP 1 with a DETH (GSI Q_Key
0x80010000, source QP 1), 256 bytes: the 24-byte MAD common header (IBTA 13.4.3, management
class 0x07 CM, class version 2, method Send) and the CM message. The REQ carries the path
MTU both ends will use (12.6.5 "Path Packet Payload MTU"), the requester's QPN and starting
PSN; the REP the responder's. The active side starts its work requests once the REP is in.
"""
from __future__ import annotations

import struct

from roceview.generate import ibta as ib
from roceview.generate.frames import RocePacket

UD_SEND_ONLY = 0x64               # IBTA Table 38: UD, SEND Only
GSI_QP, GSI_QKEY = 1, 0x80010000  # IBTA 13.5.1: QP1 and its well-known Q_Key
MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND = 0x07, 2, 0x03
ATTR_REQ, ATTR_REP, ATTR_RTU = 0x0010, 0x0013, 0x0014
MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}    # IBTA 9.4 / Table 222 path MTU
RDMA_PS_TCP, NVMF_PORT = 0x0106, 4420                    # rdma_cm service id: PS and port
CM_TIMEOUT, RETRY = 20, 7
SOFTWARE_PS = 5_000_000           # rdma_cm / application reaction time: 5 us


def comm_id(qpn: int) -> int:
    return (qpn * 0x9E3779B1) & 0xFFFFFFFF     # deterministic, spread like the kernel's ids


def _gid(ip: bytes) -> bytes:
    return bytes(10) + b"\xff\xff" + ip          # IPv4-mapped GID (RoCEv2 GID of an IPv4 address)


def _guid(mac: bytes) -> bytes:
    return bytes([mac[0] ^ 0x02]) + mac[1:3] + b"\xff\xfe" + mac[3:]   # EUI-64 of the port MAC


def _mad(attr: int, tid: int, message: bytes) -> bytes:
    header = struct.pack("!BBBBHHQHHI", 1, MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND, 0, 0, tid,
                         attr, 0, 0)
    return header + message + bytes(232 - len(message))


def _path(qp, local_ip: bytes, remote_ip: bytes) -> bytes:
    """Primary path (IBTA 12.6.5): LIDs permissive on RoCE, GIDs, flow label/rate, traffic
    class, hop limit, SL (= the priority), Local ACK Timeout."""
    return (struct.pack("!HH", 0xFFFF, 0xFFFF) + _gid(local_ip) + _gid(remote_ip)
            + struct.pack("!IBBBB", 0, (qp.dscp << 2) | qp.ecn, 64, qp.pcp << 4,
                          qp.requester.timeout_exp << 3))


def req_message(qp, ips) -> bytes:
    """ConnectRequest, IBTA 12.6.5 Table 99 (byte offsets in the message): 0 local comm id,
    8 service id, 16 local CA GUID, 28 Q_Key, 32 QPN | responder resources, 36 EECN |
    initiator depth, 40 remote EECN | CM timeout | transport type (RC 0) | flow control,
    44 starting PSN | CM timeout | retry count, 48 P_Key, 50 path MTU | RDC | RNR retry,
    51 max CM retries, 52 primary path, 96 alternate path (none), 140 private data: the
    librdmacm cma_hdr (version, IP version 4, source port, source and destination IPv4)."""
    host = qp.host
    service_id = 0x0000000001000000 | RDMA_PS_TCP << 16 | NVMF_PORT
    cma_hdr = struct.pack("!BBH", 0, 0x40, 0xC000 | qp.qpn & 0x3FFF)
    cma_hdr += bytes(12) + ips[host.index] + bytes(12) + ips[qp.peer]
    return (struct.pack("!IIQ8sIIIII", comm_id(qp.qpn), 0, service_id, _guid(host.mac), 0, 0,
                        qp.qpn << 8 | 16, 16, CM_TIMEOUT << 3 | 1)
            + struct.pack("!IHBB", (qp.sq_psn & ib.PSN_MASK) << 8 | CM_TIMEOUT << 3 | RETRY,
                          ib.PKEY_DEFAULT, MTU_CODE[qp.mtu] << 4 | qp.requester.rnr_retry, 15 << 4)
            + _path(qp, ips[host.index], ips[qp.peer]) + bytes(44) + cma_hdr)


def rep_message(qp, remote_comm: int) -> bytes:
    """ConnectReply, IBTA 12.6.8: 0 local / 4 remote comm id, 8 Q_Key, 12 QPN, 16 EECN,
    20 starting PSN, 24 responder resources, 25 initiator depth, 26 target ACK delay |
    failover | flow control, 27 RNR retry, 28 local CA GUID."""
    return struct.pack("!IIIIIIBBBB8s", comm_id(qp.qpn), remote_comm, 0, qp.qpn << 8, 0,
                       (qp.sq_psn & ib.PSN_MASK) << 8, 16, 16, 14 << 3 | 1, qp.requester.rnr_retry << 5,
                       _guid(qp.host.mac))


class ConnectionManager:
    """One host's CM agent: the active side sends a REQ per QP and starts that QP's
    application when the REP arrives; the passive side answers a REQ with a REP for the QP
    the REQ names as its peer."""

    def __init__(self, host, ips):
        self.host, self.ips = host, ips
        self.psn = 0                    # QP1's own PSN
        self.tid = 0
        self.waiting: dict[int, tuple] = {}   # own comm id -> (qp, start callback)

    def connect(self, qp, on_established) -> None:
        self.waiting[comm_id(qp.qpn)] = (qp, on_established)
        self._send(qp, ATTR_REQ, req_message(qp, self.ips))

    def receive(self, pkt: RocePacket) -> None:
        attr = struct.unpack_from("!H", pkt.data, 16)[0]
        local, remote = struct.unpack_from("!II", pkt.data, 24)   # the message's own / peer's comm id
        if attr == ATTR_REQ:
            requester_qpn = struct.unpack_from("!I", pkt.data, 24 + 32)[0] >> 8
            qp = next(q for q in self.host.qps.values() if q.peer_qpn == requester_qpn)
            self.host.sim.after(SOFTWARE_PS, self._send, qp, ATTR_REP, rep_message(qp, local))
        elif attr == ATTR_REP and remote in self.waiting:
            qp, start = self.waiting.pop(remote)
            rtu = struct.pack("!II", remote, local)
            self.host.sim.after(SOFTWARE_PS, self._send, qp, ATTR_RTU, rtu)
            self.host.sim.after(SOFTWARE_PS, start)

    def _send(self, qp, attr: int, message: bytes) -> None:
        self.tid += 1
        data = _mad(attr, self.host.index << 32 | self.tid, message)
        pkt = RocePacket(src=self.host.index, dst=qp.peer, sport=qp.sport, pcp=qp.pcp, dscp=qp.dscp,
                         ecn=qp.ecn, opcode=UD_SEND_ONLY, dest_qp=GSI_QP, psn=self.psn,
                         deth=(GSI_QKEY, GSI_QP), payload_len=len(data), data=data,
                         ip_id=self.host.next_ip_id(), v1=self.host.v1)
        self.psn = (self.psn + 1) & ib.PSN_MASK
        self.host.truth.count("cm_mads_sent")
        self.host.port.enqueue(pkt, qp.pcp)
