"""Topology: hosts on one switch, QPs between them, a mirror; run and collect the capture.

`routed`: the switch is a routed ToR (RoCEv2 fabrics are IP-routed): a host addresses its frames to
its switch port's MAC (the next hop) and the switch sends each frame out from the egress port's
MAC to the receiving host's, one TTL less. The switch's PFC frames toward host i come from that
port's MAC, a host's from its own: the frames a pause holds are those addressed to the pauser's MAC,
in both directions. Off by default (a bridged fabric: every frame carries the two hosts' MACs)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from roceview.generate import ibta as ib
from roceview.generate.cm import ConnectionManager
from roceview.generate.dcqcn import NotificationPoint
from roceview.generate.simulator import BASE_TS_NS, PS_PER_NS, Simulator
from roceview.generate.frames import Addressing, LldpFrame, RocePacket
from roceview.generate.host import Host, ReceivePipeline
from roceview.generate.mirror import Mirror
from roceview.generate.pause_watch import PauseWatch
from roceview.generate.qp import Application, QpSettings, QueuePair, Workload
from roceview.generate.switch import Switch, SwitchSettings
from roceview.generate.truth import Drop, Truth


@dataclass
class NetworkSettings:
    hosts: int = 2
    gbps: float = 100.0
    prop_ns: int = 500            # ~100 m of fibre
    mtu: int = 1024               # path MTU
    until_ms: float = 1000.0      # hard stop of the simulation
    switch: SwitchSettings = field(default_factory=SwitchSettings)
    np_enabled: bool = True
    min_time_between_cnps_ns: int = 4000
    cnp_pcp: int = 3
    cnp_dscp: int = 26
    mirror_gbps: float | None = None
    mirror_buffer_bytes: int = 0
    mirror_copies: int = 1            # 2: a double mirror (two sessions / ingress + egress)
    mirror_corrupt_prob: float = 0.0  # bit errors in the capture path only
    mtus: tuple | None = None         # per-host NIC MTU (path MTU = the smaller end's); else `mtu`
    roce_v1_hosts: tuple = ()         # hosts whose NIC sends RoCEv1 (GID type RoCE v1)
    first_psn_range: tuple = (0, 1 << 24)   # initial PSNs drawn from [lo, hi)
    rdma_cm: bool = False             # connections set up by RDMA CM REQ/REP/RTU on QP1 first
    routed: bool = False              # a routed ToR: link MACs on each hop (module docstring)


def host_mac(i: int) -> bytes:
    return bytes([0x0E, 0xC0, 0xDE, 0x00, 0x00, 0x10 + i])   # locally administered NIC MACs


def switch_mac(i: int) -> bytes:
    return bytes([0x0E, 0x5C, 0x00, 0x00, 0xFF, 0x10 + i])   # switch port MACs


SWITCH_CHASSIS_MAC = bytes.fromhex("0e5c0000ff00")           # the switch's base MAC (LLDP chassis ID)


class Network:
    def __init__(self, s: NetworkSettings, rng: np.random.Generator, truth: Truth):
        self.s, self.rng, self.truth = s, rng, truth
        self.sim = Simulator(int(s.until_ms * 1e9))
        self.addr = Addressing(tuple(host_mac(i) for i in range(s.hosts)),
                               tuple(bytes([10, 0, 0, 1 + i]) for i in range(s.hosts)))
        self.switch = Switch(self.sim, s.switch, rng, truth, self._drop)
        self.hosts = [self._host(i) for i in range(s.hosts)]
        self.mirror = Mirror(self.addr, rng, self._drop, s.mirror_gbps, s.mirror_buffer_bytes,
                             s.mirror_copies, s.mirror_corrupt_prob, self._corrupt)
        self.apps: list[Application] = []
        self._qpns: set[int] = set()
        self._finish: list = []        # called with the network when the run ends (truth lists)

    def _host(self, i: int) -> Host:
        s = self.s
        np_ = NotificationPoint(s.np_enabled, s.min_time_between_cnps_ns * PS_PER_NS)
        mtu = s.mtus[i] if s.mtus else s.mtu
        host = Host(self.sim, i, host_mac(i), self.truth, s.gbps, s.prop_ns * PS_PER_NS, mtu, np_,
                    s.cnp_pcp, s.cnp_dscp)
        host.v1 = i in s.roce_v1_hosts
        host.cm = ConnectionManager(host, self.addr.ips) if s.rdma_cm else None
        down = self.switch.add_port(i, switch_mac(i), s.gbps, s.prop_ns * PS_PER_NS)
        host.port.deliver = lambda frame, i=i: self.switch.receive(frame, i)
        down.deliver = host.receive
        return host

    def _drop(self, where: str, frame, ts_ps: int | None = None) -> None:
        self.truth.drops.append(self._record(where, frame, ts_ps))
        self.truth.count(f"dropped_{where}")

    def _corrupt(self, frame, ts_ps: int) -> None:
        self.truth.corrupted.append(self._record("mirror", frame, ts_ps))
        self.truth.count("corrupted_mirror")

    def _record(self, where: str, frame, ts_ps: int | None) -> Drop:
        ts = BASE_TS_NS + (self.sim.now if ts_ps is None else ts_ps) // 1000
        if not isinstance(frame, RocePacket):   # PFC or LLDP
            return Drop(where, ts, "", "", 0, None, None)
        ip = self.addr.ips
        return Drop(where, ts, _ip(ip[frame.src]), _ip(ip[frame.dst]), frame.dest_qp, frame.psn,
                    frame.opcode)

    # ---- building ----------------------------------------------------------------------------
    def _qpn(self) -> int:
        while True:
            qpn = int(self.rng.integers(0x100, 0x40000))
            if qpn not in self._qpns:
                self._qpns.add(qpn)
                return qpn

    def connect(self, a: int, b: int, workload: Workload, settings: QpSettings | None = None,
                peer_settings: QpSettings | None = None) -> tuple[QueuePair, QueuePair]:
        """An RC QP pair: the requester on host `a` runs `workload` against host `b`."""
        settings = settings or QpSettings()
        peer_settings = peer_settings or settings
        qa, qb = self._qpn(), self._qpn()
        psn_a, psn_b = (int(x) for x in self.rng.integers(*self.s.first_psn_range, 2))
        sport = 49152 + int(self.rng.integers(0, 16384))   # per-QP entropy, as NICs hash it
        mtu = min(self.hosts[a].mtu, self.hosts[b].mtu)     # path MTU as the CM negotiates it
        qp_a = QueuePair(self.hosts[a], qa, b, qb, sport, psn_a, psn_b, settings, mtu)
        qp_b = QueuePair(self.hosts[b], qb, a, qa, sport ^ 0x155, psn_b, psn_a, peer_settings, mtu)
        self.hosts[a].qps[qa], self.hosts[b].qps[qb] = qp_a, qp_b
        qp_a.peer_qp, qp_b.peer_qp = qp_b, qp_a
        app = Application(qp_a, workload, start=not self.s.rdma_cm)
        if self.s.rdma_cm:   # at time 0 of the run, when the mirror is attached
            self.sim.at(0, self.hosts[a].cm.connect, qp_a, app.start)
        self.apps.append(app)
        ip = self.addr.ips
        self.truth.qps.append({"requester": _ip(ip[a]), "responder": _ip(ip[b]),
                               "requester_qpn": qa, "responder_qpn": qb, "first_psn": psn_a,
                               "messages": len(workload.messages), "pmtu": mtu,
                               "requester_roce": 1 if self.hosts[a].v1 else 2,
                               "responder_roce": 1 if self.hosts[b].v1 else 2})
        return qp_a, qp_b

    def slow_receiver(self, host: int, drain_gbps: float, xoff_bytes: int, xon_bytes: int,
                      prio: int = 3, lapse_ns: int | None = None) -> ReceivePipeline:
        lapse = None if lapse_ns is None else lapse_ns * PS_PER_NS
        rx = ReceivePipeline(self.hosts[host], drain_gbps, xoff_bytes, xon_bytes, prio, lapse)
        self.hosts[host].rx = rx
        return rx

    def advertise_dcbx(self) -> None:
        """Each switch port sends one LLDPDU at time 0 with the PFC configuration TLV naming the
        switch's PFC priorities (802.1Qaz D.2.10). LLDP repeats every 30 s (msgTxInterval);
        every capture here is shorter."""
        enable = sum(1 << p for p in self.s.switch.pfc_prios)
        for i, port in self.switch.ports.items():
            lldp = LldpFrame(switch_mac(i), SWITCH_CHASSIS_MAC, f"swp{i + 1}", enable)
            self.sim.at(0, port.send_control, lldp)
            self.truth.count("lldp_sent")

    def pause_cycles(self, host: int, prio: int, first_ns: int, period_ns: int, hold_ns: int,
                     count: int) -> None:
        """The switch port toward `host` pauses `prio` `count` times: XOFF every `period_ns`
        from `first_ns` (refreshed while held), XON `hold_ns` later. The lossless traffic that
        fills that priority's buffer is not modelled; `prio` must be in the switch's pfc_prios."""
        pauser = self.switch.pausers[(host, prio)]
        for k in range(count):
            at = (first_ns + k * period_ns) * PS_PER_NS
            self.sim.at(at, pauser.xoff)
            self.sim.at(at + hold_ns * PS_PER_NS, pauser.xon)

    def reroute(self, qp: QueuePair, first_path_ns: int, changes) -> None:
        """ECMP path changes of `qp`'s requester: its first UDP source port hashes onto a path
        `first_path_ns` longer than the switch alone; for each (seq, path_ns) of `changes`, from
        that PSN's first transmission on the QP uses a new port (drawn from the ephemeral range,
        unused) whose path is `path_ns` long. Each change is recorded in truth.path_changes."""
        delay = self.switch.path_delay_ps
        delay[qp.sport] = first_path_ns * PS_PER_NS
        in_use = {q.sport for h in self.hosts for q in h.qps.values()} | set(delay)
        for seq, path_ns in changes:
            sport = next(p for p in (49152 + int(x) for x in self.rng.integers(0, 16384, 64))
                         if p not in in_use)
            in_use.add(sport)
            delay[sport] = path_ns * PS_PER_NS
            qp.requester.reroutes[seq] = sport

        def record(seq: int, old: int, new: int) -> None:
            self.truth.count("path_changes")
            self.truth.path_changes.append({
                "qpn": qp.qpn, "psn": wire_psn(qp.sq_psn, seq), "ts_ns": BASE_TS_NS + self.sim.now // 1000,
                "old_sport": old, "new_sport": new, "old_path_ns": delay[old] // PS_PER_NS,
                "new_path_ns": delay[new] // PS_PER_NS})
        qp.requester.on_reroute = record

    def every(self, interval_ns: int, count: int, fn) -> None:
        """Call fn() `count` times, every `interval_ns` (an application's periodic work)."""
        for k in range(1, count + 1):
            self.sim.at(k * interval_ns * PS_PER_NS, fn)

    def pause_lag(self, host: int, lag_ns: int, bound_ns: int) -> PauseWatch:
        """`host`'s NIC obeys each PFC frame only `lag_ns` after it arrived (it keeps sending on
        the paused priority meanwhile): each frame it sends while a compliant NIC would be paused,
        more than `bound_ns` after the pause arrived, goes to truth.pfc_violations."""
        self.hosts[host].port.pause_lag_ps = lag_ns * PS_PER_NS
        return self.watch_pauses(host, bound_ns)

    def watch_pauses(self, host: int, bound_ns: int | None = None) -> PauseWatch:
        """Keep the truth of the pauses `host`'s link receives: the periods a compliant NIC is
        paused, the frames sent in them (bound_ns: as pause_lag), the flows held (truth.victims)."""
        port = self.hosts[host].port
        watch = PauseWatch(self, port, None if bound_ns is None else bound_ns * PS_PER_NS)
        port.watch = watch
        port.taps.append(watch.sent)
        self._finish.append(watch.finish)
        return watch

    def mirror_links(self, hosts) -> None:
        """SPAN both directions of each host's link, as seen at the switch."""
        for i in hosts:
            up, down = self.link_addressing(i)
            self.mirror.attach(self.hosts[i].port, at_far_end=True, addr=up)
            self.mirror.attach(self.switch.ports[i], at_far_end=False, addr=down)

    def link_addressing(self, i: int) -> tuple[Addressing | None, Addressing | None]:
        """How frames look on host i's link, toward the switch and from it (None: the network's,
        a bridged fabric). Routed: every frame on the link carries host i's MAC and its switch
        port's, whichever host the IP header names; leaving the switch, one TTL less."""
        if not self.s.routed:
            return None, None
        macs = tuple(host_mac(i) if j == i else switch_mac(i) for j in range(self.s.hosts))
        up = Addressing(macs, self.addr.ips, self.addr.vlan, self.addr.ttl)
        return up, Addressing(macs, self.addr.ips, self.addr.vlan, self.addr.ttl - 1)

    def run(self):
        self.sim.run()
        for finish in self._finish:
            finish(self)
        return self.mirror.frames(BASE_TS_NS)


def _ip(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def wire_psn(first: int, seq: int) -> int:
    return (first + seq) & ib.PSN_MASK
