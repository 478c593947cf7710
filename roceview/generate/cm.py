"""RDMA CM connection establishment on QP1 (the GSI QP): REQ -> REP -> RTU (IBTA 12.6,
12.9), as librdmacm's active and passive sides exchange them before the first request.

Each MAD travels as a UD SEND ONLY (opcode 0x64) to QP 1 with a DETH (GSI Q_Key
0x80010000, source QP 1), 256 bytes: the 24-byte MAD common header (IBTA 13.4.3, management
class 0x07 CM, class version 2, method Send) and the CM message. The REQ carries the path
MTU both ends will use (12.6.5 "Path Packet Payload MTU"), the requester's QPN and starting
PSN; the REP the responder's. The active side starts its work requests once the REP is in.

The faults of the handshake (scenarios_cm.py) are the CM agents' settings: a passive side that
rejects a REQ (REJ, 12.6.7: `refuse`, or no listener on the REQ's port: `listening`), never sees
the first REQs (its QP1 had no receive buffer: `ignore`), or answers late, with or without an MRA
first (12.6.6: `slow`); an active side resends an unanswered REQ with the same transaction id
after the REQ's remote CM response timeout, up to its max CM retries, then gives up (12.9.2).
"""
from __future__ import annotations

import struct

from roceview.generate import ibta as ib
from roceview.generate.frames import RocePacket

UD_SEND_ONLY = 0x64               # IBTA Table 38: UD, SEND Only
GSI_QP, GSI_QKEY = 1, 0x80010000  # IBTA 13.5.1: QP1 and its well-known Q_Key
MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND = 0x07, 2, 0x03
ATTR_REQ, ATTR_MRA, ATTR_REJ, ATTR_REP, ATTR_RTU = 0x0010, 0x0011, 0x0012, 0x0013, 0x0014
MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}    # IBTA 9.4 / Table 222 path MTU
RDMA_PS_TCP, NVMF_PORT = 0x0106, 4420                    # rdma_cm service id: PS and port
CM_TIMEOUT, RETRY, MAX_CM_RETRIES = 20, 7, 15
INVALID_SERVICE_ID = 8            # IBTA 12.6.7 Table 103: Linux ib_cm's answer when nobody listens
SOFTWARE_PS = 5_000_000           # rdma_cm / application reaction time: 5 us


def timeout_ps(t: int) -> int:
    """A CM timeout exponent in ps: 4.096 us x 2^t (IBTA 12.6.5)."""
    return 4_096_000 << t


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


def req_message(qp, ips, port: int = NVMF_PORT, cm_timeout: int = CM_TIMEOUT,
                max_retries: int = MAX_CM_RETRIES) -> bytes:
    """ConnectRequest, IBTA 12.6.5 Table 99 (byte offsets in the message): 0 local comm id,
    8 service id, 16 local CA GUID, 28 Q_Key, 32 QPN | responder resources, 36 EECN |
    initiator depth, 40 remote EECN | CM timeout | transport type (RC 0) | flow control,
    44 starting PSN | CM timeout | retry count, 48 P_Key, 50 path MTU | RDC | RNR retry,
    51 max CM retries, 52 primary path, 96 alternate path (none), 140 private data: the
    librdmacm cma_hdr (version, IP version 4, source port, source and destination IPv4)."""
    host = qp.host
    service_id = 0x0000000001000000 | RDMA_PS_TCP << 16 | port
    cma_hdr = struct.pack("!BBH", 0, 0x40, 0xC000 | qp.qpn & 0x3FFF)
    cma_hdr += bytes(12) + ips[host.index] + bytes(12) + ips[qp.peer]
    return (struct.pack("!IIQ8sIIIII", comm_id(qp.qpn), 0, service_id, _guid(host.mac), 0, 0,
                        qp.qpn << 8 | 16, 16, cm_timeout << 3 | 1)
            + struct.pack("!IHBB", (qp.sq_psn & ib.PSN_MASK) << 8 | CM_TIMEOUT << 3 | RETRY,
                          ib.PKEY_DEFAULT, MTU_CODE[qp.mtu] << 4 | _peer_rnr_retry(qp), max_retries << 4)
            + _path(qp, ips[host.index], ips[qp.peer]) + bytes(44) + cma_hdr)


def rep_message(qp, remote_comm: int) -> bytes:
    """ConnectReply, IBTA 12.6.8: 0 local / 4 remote comm id, 8 Q_Key, 12 QPN, 16 EECN,
    20 starting PSN, 24 responder resources, 25 initiator depth, 26 target ACK delay |
    failover | flow control, 27 RNR retry, 28 local CA GUID."""
    return struct.pack("!IIIIIIBBBB8s", comm_id(qp.qpn), remote_comm, 0, qp.qpn << 8, 0,
                       (qp.sq_psn & ib.PSN_MASK) << 8, 16, 16, 14 << 3 | 1, _peer_rnr_retry(qp) << 5,
                       _guid(qp.host.mac))


def _peer_rnr_retry(qp) -> int:
    """The RNR Retry Count a REQ or REP carries: what its sender wants the OTHER end's QP to use
    (IBTA 12.6.5, 12.6.8; Linux ib_cm applies the REQ's to the passive side's QP, the REP's to the
    active side's), i.e. the peer QP's rnr_retry."""
    peer = qp.peer_qp
    return (peer if peer is not None else qp).requester.rnr_retry


def rej_message(remote_comm: int, reason: int) -> bytes:
    """ConnectReject of a REQ, IBTA 12.6.7: 0 local comm id (0: the REJ a CM sends without a
    connection of its own, as Linux cm_issue_rej does), 4 remote comm id, 8 message REJected
    (0: the REQ) | reserved, 9 ARI length (0), 10 reason."""
    return struct.pack("!IIBBH", 0, remote_comm, 0, 0, reason)


def mra_message(local_comm: int, remote_comm: int, service_timeout: int) -> bytes:
    """MsgRcptAck of a REQ, IBTA 12.6.6: 0 local / 4 remote comm id, 8 message MRAed (0: the
    REQ), 9 service timeout (4.096 us x 2^t): how much longer the REQ's sender is to wait."""
    return struct.pack("!IIBB", local_comm, remote_comm, 0, service_timeout << 3)


class ConnectionManager:
    """One host's CM agent: the active side sends a REQ per QP and starts that QP's
    application when the REP arrives; the passive side answers a REQ with a REP for the QP
    the REQ names as its peer (or as its settings below say)."""

    def __init__(self, host, ips):
        self.host, self.ips = host, ips
        self.psn = 0                    # QP1's own PSN
        self.tid = 0
        self.waiting: dict[int, list] = {}   # own comm id -> [qp, start callback, REQ tid, attempts, REQ]
        # active side: the REQ's remote CM response timeout and max CM retries; a QP's service port
        self.cm_timeout, self.max_retries = CM_TIMEOUT, MAX_CM_RETRIES
        self.port_of: dict[int, int] = {}
        # passive side, by the requester's QPN: a REJ reason; REQs never seen (a count); an answer
        # `delay` ps late, after an MRA with service timeout `mra` when not None
        self.listening: set | None = None    # service ports listened on (None: every one)
        self.refuse: dict[int, int] = {}
        self.ignore: dict[int, int] = {}
        self.slow: dict[int, tuple] = {}

    def connect(self, qp, on_established) -> None:
        message = req_message(qp, self.ips, self.port_of.get(qp.qpn, NVMF_PORT), self.cm_timeout, self.max_retries)
        tid = self._send(qp, ATTR_REQ, message)
        self.waiting[comm_id(qp.qpn)] = [qp, on_established, tid, 0, message]
        self._arm(comm_id(qp.qpn), timeout_ps(self.cm_timeout))

    def _arm(self, comm: int, wait_ps: int) -> None:
        entry = self.waiting[comm]
        self.host.sim.after(wait_ps, self._req_timeout, comm, entry[3])

    def _req_timeout(self, comm: int, attempt: int) -> None:
        """No answer (REP, REJ or MRA) to attempt `attempt` of the REQ: send it again, or give up."""
        entry = self.waiting.get(comm)
        if entry is None or entry[3] != attempt:
            return
        if attempt >= self.max_retries:
            self.waiting.pop(comm)
            self.host.truth.count("cm_req_given_up")
            return
        entry[3] += 1
        self.host.truth.count("cm_req_resent")
        self._send(entry[0], ATTR_REQ, entry[4], tid=entry[2])
        self._arm(comm, timeout_ps(self.cm_timeout))

    def receive(self, pkt: RocePacket) -> None:
        attr = struct.unpack_from("!H", pkt.data, 16)[0]
        local, remote = struct.unpack_from("!II", pkt.data, 24)   # the message's own / peer's comm id
        if attr == ATTR_REQ:
            self._answer(pkt, local)
        elif attr == ATTR_REP and remote in self.waiting:
            qp, start = self.waiting.pop(remote)[:2]
            rtu = struct.pack("!II", remote, local)
            self.host.sim.after(SOFTWARE_PS, self._send, qp, ATTR_RTU, rtu)
            self.host.sim.after(SOFTWARE_PS, start)
        elif attr == ATTR_REJ and remote in self.waiting:
            self.waiting.pop(remote)             # rejected: the application is told, sends nothing
        elif attr == ATTR_MRA and remote in self.waiting:
            entry = self.waiting[remote]         # wait the service timeout more (IBTA 12.6.6)
            entry[3] += 1
            service = pkt.data[24 + 9] >> 3
            self._arm(remote, timeout_ps(service) + timeout_ps(self.cm_timeout))

    def _answer(self, pkt: RocePacket, remote: int) -> None:
        """The passive side's answer to a REQ: nothing (not seen), a REJ, or a REP (after an MRA)."""
        requester_qpn = struct.unpack_from("!I", pkt.data, 24 + 32)[0] >> 8
        port = struct.unpack_from("!H", pkt.data, 24 + 14)[0]
        qp = next(q for q in self.host.qps.values() if q.peer_qpn == requester_qpn)
        if self.ignore.get(requester_qpn, 0) > 0:
            self.ignore[requester_qpn] -= 1
            self.host.truth.count("cm_req_ignored")
            return
        reason = INVALID_SERVICE_ID if self.listening is not None and port not in self.listening \
            else self.refuse.get(requester_qpn)
        if reason is not None:
            self.host.truth.count("cm_rej_sent")
            self.host.sim.after(SOFTWARE_PS, self._send, qp, ATTR_REJ, rej_message(remote, reason))
            return
        delay, mra = self.slow.get(requester_qpn, (0, None))
        if mra is not None:
            self.host.truth.count("cm_mra_sent")
            self.host.sim.after(SOFTWARE_PS, self._send, qp, ATTR_MRA, mra_message(comm_id(qp.qpn), remote, mra))
        self.host.sim.after(SOFTWARE_PS + delay, self._send, qp, ATTR_REP, rep_message(qp, remote))

    def _send(self, qp, attr: int, message: bytes, tid: int | None = None) -> int:
        """Send one CM MAD to the peer's QP1; a resend keeps its transaction id (IBTA 13.4.6.4)."""
        if tid is None:
            self.tid += 1
            tid = self.host.index << 32 | self.tid
        data = _mad(attr, tid, message)
        pkt = RocePacket(src=self.host.index, dst=qp.peer, sport=qp.sport, pcp=qp.pcp, dscp=qp.dscp,
                         ecn=qp.ecn, opcode=UD_SEND_ONLY, dest_qp=GSI_QP, psn=self.psn,
                         deth=(GSI_QKEY, GSI_QP), payload_len=len(data), data=data,
                         ip_id=self.host.next_ip_id(), v1=self.host.v1)
        self.psn = (self.psn + 1) & ib.PSN_MASK
        self.host.truth.count("cm_mads_sent")
        self.host.port.enqueue(pkt, qp.pcp)
        return tid
