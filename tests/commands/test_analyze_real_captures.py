"""`roceview analyze` on the real capture corpus (checked against tshark) and on one traffic
pattern written in every encapsulation roceview reads (RoCEv2/IPv4, RoCEv1, RoCEv2 over
802.1Q + IPv6 in pcapng; gzip and snaplen-truncated copies), plus native InfiniBand (ERF).

Real corpus (``../shared/captures/real``, see its MANIFEST.md; every test skips cleanly
when the directory is absent):
  * every file: ``roceview analyze FILE --csv DIR --json FILE`` through
    ``roceview.cli.main`` exits 0, writes all five CSV files and a JSON document holding the
    same flows, and prints no traceback (stderr is empty or only ``roceview: warning:``
    lines);
  * every file, against tshark 4.0 (``@pytest.mark.tshark``): the flows of qps.csv are
    exactly the (source, destination, BTH DestQP) groups of the frames tshark decodes as
    InfiniBand, and per flow ``packets``, ``bytes``, ``acks``, ``naks_*``, ``cnp_packets``,
    ``ecn_not_ect``, ``ecn_ce``, ``first_ts`` and ``last_ts`` equal what tshark shows.

How tshark is driven and where it cannot see what roceview sees (documented exceptions)
  1. ``-d udp.port==4791,infiniband`` is not enough for RoCEv2 packets whose UDP *source* port
     is a well-known service: tshark tries the lower port's dissector first, so the 37
     packets with source port 69 in ``oferby-proxy_rocev2_rxe_rc-send-srcport69.pcap`` are
     TFTP to it. A first tshark pass lists the protocol tshark chose right after ``udp`` for
     packets to port 4791 it did not decode as InfiniBand, and the counting pass runs with
     ``--disable-protocol`` for each (for that file: ``tftp``). RoCEv1 (EtherType 0x8915)
     and native IB in ERF are decoded by tshark without options.
  2. Endpoints: RoCEv2 frames are keyed by ``ip.src``/``ip.dst`` (or ``ipv6.*``); RoCEv1 and
     IB frames with a GRH by ``infiniband.grh.sgid``/``dgid``, where an IPv4-mapped GID
     ``::ffff:a.b.c.d`` is the endpoint ``a.b.c.d`` (so the two RoCE versions of one QP in
     the mixed file are one flow); native IB frames without a GRH by their LIDs, written
     ``lid:0xNNNN`` as roceview does. The IP header tshark shows *inside* an IPoIB payload
     (``rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap``) is payload, never the endpoint, and
     its ECN bits are not the packet's: for IB the ECN is the GRH traffic class' low two bits,
     and a frame without a GRH has none.
  3. Timestamps of ERF records in a classic pcap: tshark reads the ERF header (2^-32 s),
     roceview the pcap record header (µs); they must agree within 1 µs. Elsewhere exactly.
  4. tshark 4.0 names the CNP (BTH opcode 0x81) "Unknown (129)" but decodes its BTH, so
     CNPs are counted from ``infiniband.bth.opcode == 129``.
  5. Frames neither tool decodes as RoCE (the 11 frames of
     ``magnate3_rocev2_uc-write-imm_cut-243B.pcap`` cut before their BTH) are in no flow.
  With these, tshark and roceview agree on every frame of the corpus: there is no RoCE
  frame that only roceview decodes.

The encapsulation variants: one RC conversation with every analyzed event (PSN wrap, READ
with a multi-packet response that loses its MIDDLE and is re-read, a drop seen after the
loss point with NAK and go-back-N, RNR NAK, CE mark and CNP, a multi-packet SEND with a pad,
an unrecovered gap, a PFC frame) is written with the project's scapy layers
(``dissectors.scapy_layers``, correct ICRCs, checked via ``icrc_ok``). Within one
encapsulation the plain, gzip and snaplen-truncated files must give byte-identical qps.csv;
across encapsulations qps.csv must be identical except for the endpoint text of the IPv6
variant and the wire sizes (``bytes``, ``retransmitted_bytes``), which must differ by exactly
the header overhead per packet. The expected baseline rows are written out in full.
"""
from __future__ import annotations

import csv
import functools
import gzip
import io
import ipaddress
import json
import subprocess
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from roceview.capture.writer import write_pcap, write_pcapng
from roceview.cli import Environment, main

REAL = Path(__file__).resolve().parents[3] / "shared" / "captures" / "real"
REAL_FILES = sorted(p for pattern in ("*.pcap", "*.pcapng", "*.pcap.gz", "*.pcapng.gz")
                    for p in REAL.glob(pattern)) if REAL.is_dir() else []
CSV_NAMES = ("qps.csv", "pfc.csv", "findings.csv", "events.csv", "timeline.csv", "ops.csv", "connections.csv",
             "priorities.csv", "cc.csv", "paused_flows.csv")
NATIVE_IB = "magnate3_native-ib_ibdump-erf_rc-send.pcap"

real_file = pytest.mark.parametrize(
    "path", REAL_FILES or [pytest.param(None, marks=pytest.mark.skip(reason=f"no captures in {REAL}"))],
    ids=[p.name for p in REAL_FILES] or ["none"])


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *argv], Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    # --csv names the files it wrote on stderr (issue 16); the tests here check stderr for the rest
    return code, out.getvalue(), "".join(line for line in err.getvalue().splitlines(True)
                                         if not line.startswith("roceview: wrote "))


@functools.lru_cache(maxsize=None)
def _analyzed(path: Path, workdir: Path) -> tuple[int, str, str, Path, Path]:
    out_dir, json_path = workdir / f"{path.name}.csv", workdir / f"{path.name}.json"
    code, out, err = run([str(path), "--csv", str(out_dir), "--json", str(json_path)])
    return code, out, err, out_dir, json_path


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("real")
    return lambda path: _analyzed(path, workdir)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------- every real capture

@real_file
def test_analyze_exits_0_writes_every_file_and_no_traceback(path, analyzed):
    code, out, err, out_dir, json_path = analyzed(path)
    assert code == 0, err
    assert "Traceback" not in out + err
    assert all(line.startswith("roceview: warning: ") for line in err.splitlines()), err
    assert "Queue pairs" in out
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(CSV_NAMES)  # no temp dir left
    doc = json.loads(json_path.read_text())
    assert set(doc) == {"summary", "flows", "pfc", "findings", "events", "timeline", "ops", "op_stats", "read_depth",
                        "connections", "priorities", "cc", "paused_flows", "pfc_timeline"}
    qps = read_csv(out_dir / "qps.csv")
    assert doc["summary"]["flows"] == len(qps) == len(doc["flows"])
    assert [f["flow"] for f in doc["flows"]] == [r["flow"] for r in qps]
    assert doc["summary"]["roce_packets"] == sum(int(r["packets"]) for r in qps)
    for row, rec in zip(qps, doc["flows"]):
        assert (rec["dest_qp"], rec["first_ts"], rec["packets"], rec["gap_psns"]) == \
            (row["dest_qp"], row["first_ts"], int(row["packets"]), int(row["gap_psns"]))
        assert row["flow"] == f"{row['src_ip']}>{row['dst_ip']}:{row['dest_qp']}"
    assert len(read_csv(out_dir / "events.csv")) == len(doc["events"])
    assert len(read_csv(out_dir / "pfc.csv")) == len(doc["pfc"])


def _endpoint(gid: str, lid: str, ip4: str, ip6: str) -> str:
    if gid:
        addr = ipaddress.IPv6Address(gid)
        return str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)
    if lid:
        return f"lid:0x{int(lid):04x}"
    return ip4 or str(ipaddress.IPv6Address(ip6))


TSHARK_FIELDS = ("frame.len", "ip.len", "eth.type", "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
                 "infiniband.grh.sgid", "infiniband.grh.dgid", "infiniband.lrh.slid",
                 "infiniband.lrh.dlid", "infiniband.bth.destqp", "infiniband.bth.opcode",
                 "infiniband.aeth.syndrome", "ip.dsfield.ecn", "ipv6.tclass", "infiniband.grh.tclass",
                 "frame.number", "infiniband.bth")
RD_ACKNOWLEDGE = 0x51


def _dc_ack_syndrome(path: Path, frame_number: int, bth_hex: str) -> int:
    """Exception 9 of test_decode_equals_tshark: tshark 4.0 reads a ConnectX DC ACKNOWLEDGE without
    its RDETH, so its AETH syndrome is the RDETH's reserved byte. The real one follows the
    20 bytes tshark calls the BTH, the RDETH and the DETH: read it from the frame's bytes."""
    from scapy.utils import RawPcapReader

    for number, (frame, _) in enumerate(RawPcapReader(str(path)), start=1):
        if number == frame_number:
            bth = bytes(frame).find(bytes.fromhex(bth_hex.replace(":", "")))
            return frame[bth + len(bth_hex.replace(":", "")) // 2 + 4 + 8]
    raise AssertionError(f"frame {frame_number} not in {path}")


def _tshark(tshark: str, path: Path, *args: str) -> str:
    proc = subprocess.run([tshark, "-n", "-r", str(path), "-d", "udp.port==4791,infiniband", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def tshark_flows(tshark: str, path: Path) -> tuple[dict, set[str]]:
    """Per (src, dst, dest QP) counters of the frames tshark decodes as InfiniBand."""
    probe = _tshark(tshark, path, "-Y", "udp.dstport == 4791 && !infiniband", "-T", "fields",
                    "-e", "frame.protocols")
    disabled = set()
    for protocols in probe.split():
        layers = protocols.split(":")
        after = layers[layers.index("udp") + 1:] if "udp" in layers else []
        if after:
            disabled.add(after[0])
    args = [a for p in sorted(disabled) for a in ("--disable-protocol", p)]
    text = _tshark(tshark, path, *args, "-Y", "infiniband.bth", "-T", "fields", "-E", "occurrence=f",
                   *[a for f in TSHARK_FIELDS for a in ("-e", f)])
    flows: dict = defaultdict(Counter)
    for line in text.splitlines():
        v = dict(zip(TSHARK_FIELDS, line.split("\t")))
        native_ib = bool(v["infiniband.lrh.slid"])
        key = (_endpoint(v["infiniband.grh.sgid"], v["infiniband.lrh.slid"], v["ip.src"], v["ipv6.src"]),
               _endpoint(v["infiniband.grh.dgid"], v["infiniband.lrh.dlid"], v["ip.dst"], v["ipv6.dst"]),
               int(v["infiniband.bth.destqp"], 16))
        c = flows[key]
        c["packets"] += 1
        wire = int(v["frame.len"])
        if v["ip.len"] and v["eth.type"] == "0x0800":    # a frame cut silently (orig_len = caplen):
            wire = max(wire, 14 + int(v["ip.len"]))      # its size comes from the IP length
        c["bytes"] += wire
        opcode = int(v["infiniband.bth.opcode"])
        if opcode & 0x1F == 0x11 and opcode != 0x81 and v["infiniband.aeth.syndrome"]:
            syndrome = int(v["infiniband.aeth.syndrome"], 0)
            if opcode == RD_ACKNOWLEDGE:
                syndrome = _dc_ack_syndrome(path, int(v["frame.number"]), v["infiniband.bth"])
            kind, code = (syndrome >> 5) & 3, syndrome & 0x1F
            c[{0: "acks", 1: "naks_rnr"}.get(kind, "naks_seq" if kind == 3 and code == 0 else "naks_other")] += 1
        c["cnp_packets"] += opcode == 0x81
        if native_ib or v["infiniband.grh.sgid"]:  # IB / RoCEv1: the GRH traffic class, if any
            ecn = int(v["infiniband.grh.tclass"], 0) & 3 if v["infiniband.grh.tclass"] else None
        elif v["ip.dsfield.ecn"]:
            ecn = int(v["ip.dsfield.ecn"], 0)
        else:
            ecn = int(v["ipv6.tclass"], 0) & 3
        c["ecn_not_ect"] += ecn == 0
        c["ecn_ce"] += ecn == 3
        sec, frac = v["frame.time_epoch"].split(".")
        ns = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
        c["first_ts"] = min(c["first_ts"] or ns, ns)
        c["last_ts"] = max(c["last_ts"], ns)
        c["erf"] = c["erf"] or native_ib
    return flows, disabled


COMPARED = ("packets", "bytes", "acks", "naks_seq", "naks_rnr", "naks_other", "cnp_packets",
            "ecn_not_ect", "ecn_ce")


@pytest.mark.tshark
@real_file
def test_flows_and_per_flow_counts_equal_tshark(path, analyzed, tshark):
    code, _, err, out_dir, _ = analyzed(path)
    assert code == 0, err
    expected, disabled = tshark_flows(tshark, path)
    if path.name.startswith("oferby-proxy"):
        assert disabled == {"tftp"}  # exception 1: without it tshark misses 37 RoCE frames
    qps = read_csv(out_dir / "qps.csv")
    got = {(r["src_ip"], r["dst_ip"], int(r["dest_qp"], 16)): r for r in qps}
    assert len(got) == len(qps)
    assert sorted(got) == sorted(expected)
    for key, row in got.items():
        t = expected[key]
        assert {c: int(row[c]) for c in COMPARED} == {c: t[c] for c in COMPARED}, key
        for col in ("first_ts", "last_ts"):
            ns = int(Decimal(row[col]) * 10**9)
            if t["erf"]:
                assert abs(ns - t[col]) < 1000, (key, col)  # exception 3
            else:
                assert ns == t[col], (key, col)


CM_FIELDS = ("ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "infiniband.grh.sgid", "infiniband.grh.dgid",
             "infiniband.lrh.slid", "infiniband.lrh.dlid", "infiniband.cm.req.localqpn",
             "infiniband.cm.rep.localqpn")


@pytest.mark.tshark
@real_file
def test_peer_qp_agrees_with_the_rdma_cm_handshake_tshark_decodes(path, analyzed, tshark):
    """Where tshark shows exactly one CM REQ X->Y (local QPN qa) and one REP Y->X (local QPN
    qb) between two endpoints, flow X->Y:qb has peer_qp qa and flow Y->X:qa has peer_qp qb."""
    code, _, err, out_dir, _ = analyzed(path)
    assert code == 0, err
    text = _tshark(tshark, path, "-Y", "infiniband.cm.req.localqpn || infiniband.cm.rep.localqpn",
                   "-T", "fields", "-E", "occurrence=f", *[a for f in CM_FIELDS for a in ("-e", f)])
    req, rep = defaultdict(list), defaultdict(list)
    for line in text.splitlines():
        v = dict(zip(CM_FIELDS, line.split("\t")))
        src = _endpoint(v["infiniband.grh.sgid"], v["infiniband.lrh.slid"], v["ip.src"], v["ipv6.src"])
        dst = _endpoint(v["infiniband.grh.dgid"], v["infiniband.lrh.dlid"], v["ip.dst"], v["ipv6.dst"])
        if v["infiniband.cm.req.localqpn"]:
            req[(src, dst)].append(int(v["infiniband.cm.req.localqpn"], 16))
        else:
            rep[(dst, src)].append(int(v["infiniband.cm.rep.localqpn"], 16))
    peers = {(r["src_ip"], r["dst_ip"], int(r["dest_qp"], 16)): r["peer_qp"]
             for r in read_csv(out_dir / "qps.csv")}
    checked = 0
    for (x, y), qas in req.items():
        if len(qas) != 1 or len(rep.get((x, y), [])) != 1:
            continue
        qa, qb = qas[0], rep[(x, y)][0]
        for key, peer in (((x, y, qb), qa), ((y, x, qa), qb)):
            if key in peers:
                assert peers[key] == f"0x{peer:06x}", key
                checked += 1
    if "rdma-cm" in path.name or path.name.startswith(("sanderw71", "magnate3_native-ib")):
        assert checked == 2  # these files carry one handshake and the QP's traffic both ways


# ---------------------------------------------------------------- native InfiniBand (ERF)

NATIVE_IB_QPS = """\
flow,src_ip,dst_ip,dest_qp,peer_qp,transport,first_ts,last_ts,packets,bytes,data_packets,payload_bytes,acks,naks_seq,naks_rnr,naks_other,gap_events,gap_psns,unrecovered_psns,retransmitted_packets,retransmitted_bytes,ecn_not_ect,ecn_ce,cnp_packets,rtt_p50_us,rtt_p99_us,goodput_gbps,connection,cnps_received,cnps_judged,cnps_ignored,cnps_excess,cnp_reaction_us_p50,rate_cut_pct_p50,recovery_us_p50,ce_without_cnp
fe80::8c0:eb03:ea:512e>ff12:401b:ffff::ffff:ffff:0xffffff,fe80::8c0:eb03:ea:512e,ff12:401b:ffff::ffff:ffff,0xffffff,,UD,1692610779.697061308,1692610779.697061308,1,134,1,60,0,0,0,0,0,0,0,0,0,1,0,0,,,,,0,0,0,0,,,,0
fe80::8c0:eb03:ea:512a>ff12:401b:ffff::ffff:ffff:0xffffff,fe80::8c0:eb03:ea:512a,ff12:401b:ffff::ffff:ffff,0xffffff,,UD,1692610779.963582337,1692610779.963582337,1,134,1,60,0,0,0,0,0,0,0,0,0,1,0,0,,,,,0,0,0,0,,,,0
lid:0x0012>lid:0x000c:0x000001,lid:0x0012,lid:0x000c,0x000001,,UD,1692610780.432637294,1692610780.437764333,3,870,3,768,0,0,0,0,0,0,0,0,0,0,0,0,,,0.001198,,0,0,0,0,,,,0
lid:0x000c>lid:0x0012:0x000001,lid:0x000c,lid:0x0012,0x000001,,UD,1692610780.434947312,1692610780.438082336,2,580,2,512,0,0,0,0,0,0,0,0,0,0,0,0,,,0.001307,,0,0,0,0,,,,0
lid:0x0012>lid:0x000c:0x000029,lid:0x0012,lid:0x000c,0x000029,0x000029,RC,1692610780.435762318,1692610780.437493331,60,2680,30,960,30,0,0,0,0,0,0,0,0,0,0,0,4.000,6.000,0.004437,lid:0x0012>lid:0x000c#0x30ab0075,0,0,0,0,,,,0
lid:0x000c>lid:0x0012:0x000029,lid:0x000c,lid:0x0012,0x000029,0x000029,RC,1692610780.435767318,1692610780.437491331,60,2920,40,960,20,0,0,0,0,0,0,0,0,0,0,0,2.000,19.000,0.004455,lid:0x0012>lid:0x000c#0x30ab0075,0,0,0,0,,,,0
"""


def test_native_ib_erf_flows_are_keyed_by_gids_and_lids(analyzed):
    """ibdump ERF: IPoIB multicast with a GRH (keyed by GIDs), CM over QP1 and one RC QP pair
    without a GRH (keyed by LIDs). Checked by hand with tshark: the CM REQ/REP carry local
    QPN 0x29 on both sides (peer_qp); LID 0x12 sends 20 SEND_ONLY of 16 B and 10 READ
    RESPONSE_ONLY of 64 B (data 30, payload 960) and 30 ACKs; LID 0xc sends 20 SEND_ONLY,
    10 READ requests of 64 B, 10 WRITE_ONLY of 64 B (data 40, payload 960) and 20 ACKs;
    every request has AckReq and is answered by the next frame of the other side, which
    gives the nearest-rank RTT percentiles (µs timestamps of the pcap records)."""
    path = REAL / NATIVE_IB
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    code, _, err, out_dir, _ = analyzed(path)
    assert code == 0, err
    assert (out_dir / "qps.csv").read_text() == NATIVE_IB_QPS


# ---------------------------------------------------------------- one conversation, every encapsulation

US = 1000
T0 = 1_700_000_000_000_000_000
A4, B4 = "10.0.0.1", "10.0.0.2"
A6, B6 = "fd00::1", "fd00::2"
QA, QB = 0xC1, 0xD2  # A's QP (dest QP of B->A), B's QP (dest QP of A->B)
P0 = (1 << 24) - 3  # PSNs wrap after the second packet
SYN_ACK, SYN_RNR, SYN_NAK_SEQ = 0x1F, 0x20 | 14, 0x60


def r(n: int) -> int:
    return (P0 + n) % (1 << 24)


def _a(t, op, n, payload=0, **kw):  # A -> B request
    return dict(ts=T0 + t * US, dir="AB", opcode=op, psn=r(n), payload=payload, **kw)


def _b(t, op, n, payload=0, **kw):  # B -> A response
    return dict(ts=T0 + t * US, dir="BA", opcode=op, psn=r(n), payload=payload, **kw)


def conversation() -> list[dict]:
    return [
        _a(0, 0x0A, 0, 1024, ackreq=True),            # WRITE_ONLY r0
        _a(1, 0x0A, 1, 1024, ackreq=True),            # WRITE_ONLY r1 (PSN wraps to 0)
        _b(3, 0x11, 1, syndrome=SYN_ACK),             # coalesced ACK r1
        _a(4, 0x0C, 2, dmalen=3072, ackreq=True),     # READ r2, 3 PSNs at PMTU 1024: r2..r4
        _b(6, 0x0D, 2, 1024),                         # READ RESPONSE FIRST r2
        # READ RESPONSE MIDDLE r3 lost before the capture point
        _b(8, 0x0F, 4, 1024),                         # LAST r4: response-space gap of 1
        _a(9, 0x04, 5, 1001, ecn=3),                  # SEND_ONLY r5, CE-marked, 3 pad bytes
        dict(ts=T0 + 10 * US, dir="BA", opcode=0x81, psn=0, payload=0, ecn=1),  # CNP to A's QP
        # SEND_ONLY r6 lost before the capture point
        _a(11, 0x04, 7, 1024, ackreq=True),           # r7: request-space gap of 1
        _b(12, 0x11, 6, syndrome=SYN_NAK_SEQ),        # NAK PSN sequence error, expects r6
        _a(13, 0x0C, 3, dmalen=2048),                 # READ re-issued from r3: retransmitted
        _b(14, 0x0D, 3, 1024),                        # FIRST r3: retransmitted, recovers r3
        _b(15, 0x0F, 4, 1024),                        # LAST r4: retransmitted
        _a(16, 0x04, 6, 1024),                        # go-back-N: r6 (recovers the gap), r7
        _a(17, 0x04, 7, 1024, ackreq=True),
        _b(19, 0x11, 7, syndrome=SYN_ACK),
        _a(20, 0x04, 8, 1024, ackreq=True),           # SEND r8 ...
        _b(22, 0x11, 8, syndrome=SYN_RNR),            # ... refused: RNR NAK
        _a(25, 0x04, 8, 1024, ackreq=True),           # ... sent again: retransmitted
        _b(27, 0x11, 8, syndrome=SYN_ACK),
        _a(28, 0x00, 9, 1024),                        # SEND FIRST / MIDDLE / LAST r9..r11
        _a(29, 0x01, 10, 1024),
        _a(30, 0x02, 11, 200, ackreq=True),
        _b(31, 0x11, 11, syndrome=SYN_ACK),
        dict(ts=T0 + 32 * US, dir="pfc"),             # PFC: priority 3 for 1000 quanta
        _a(33, 0x0A, 13, 512),                        # WRITE r13: r12 never seen (unrecovered)
    ]


def _roce_stack(row: dict):
    from scapy.packet import Raw

    from dissectors import opcodes
    from dissectors.scapy_layers import AETH, BTH, CNP, RETH

    op = row["opcode"]
    payload = bytes(row["payload"])
    pad = -len(payload) % 4
    qp = QB if row["dir"] == "AB" else QA
    pkt = BTH(opcode=op, pad=pad, destqp=qp, psn=row["psn"], ackreq=int(row.get("ackreq", False)),
              becn=int(op == 0x81))
    for name in opcodes.OPCODES[op][2]:
        if name == "RETH":
            pkt = pkt / RETH(va=0x10000, rkey=0x1234, dmalen=row.get("dmalen", row["payload"]))
        elif name == "AETH":
            pkt = pkt / AETH(syndrome=row.get("syndrome", SYN_ACK), msn=1)
        elif name == "CNP":
            pkt = pkt / CNP()
    return pkt / Raw(payload + bytes(pad)) if payload else pkt


MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


def frame(row: dict, kind: str) -> bytes:
    """One wire frame: kind is 'v2' (IPv4/UDP), 'v1' (EtherType 0x8915, IPv4-mapped GIDs) or
    'v6vlan' (802.1Q VID 100 PCP 3 / IPv6 / UDP)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Dot1Q, Ether

    from dissectors.scapy_layers import GRH, PFC, with_icrc

    if row["dir"] == "pfc":
        raw = bytes(Ether(src="02:00:00:00:00:0c", dst="01:80:c2:00:00:01")
                    / PFC(class_enable=0x08, quanta3=1000))
        return raw + bytes(max(0, 60 - len(raw)))
    src, dst = (MAC_A, MAC_B) if row["dir"] == "AB" else (MAC_B, MAC_A)
    ip_src, ip_dst = (A4, B4) if row["dir"] == "AB" else (B4, A4)
    ecn = row.get("ecn", 2)
    stack = _roce_stack(row)
    if kind == "v2":
        pkt = Ether(src=src, dst=dst) / IP(src=ip_src, dst=ip_dst, tos=(26 << 2) | ecn, flags="DF", ttl=64,
                                           id=1) / UDP(sport=49152, dport=4791, chksum=0) / stack
    elif kind == "v1":
        pkt = Ether(src=src, dst=dst, type=0x8915) / GRH(
            dscp=26, ecn=ecn, hoplmt=64, sgid=f"::ffff:{ip_src}", dgid=f"::ffff:{ip_dst}") / stack
    else:
        six = {A4: A6, B4: B6}
        pkt = Ether(src=src, dst=dst) / Dot1Q(vlan=100, prio=3) / IPv6(
            src=six[ip_src], dst=six[ip_dst], tc=(26 << 2) | ecn, hlim=64) / UDP(
            sport=49152, dport=4791, chksum=0) / stack
    return bytes(with_icrc(pkt))


# wire bytes per RoCE packet more than RoCEv2/IPv4: GRH 40 - (IPv4 20 + UDP 8); 802.1Q 4 + IPv6 40 - IPv4 20
OVERHEAD = {"v2": 0, "v1": 12, "v6vlan": 24}
SNAPLEN = 100  # cuts the 1 KB frames after their BTH and extended headers


def write_variants(tmp_path: Path, kind: str) -> list[Path]:
    """plain, gzip and snaplen-truncated captures of the conversation (pcap; pcapng for v6vlan)."""
    rows = conversation()
    frames = [frame(r, kind) for r in rows]
    ts = [r["ts"] for r in rows]
    cut = [f[:SNAPLEN] for f in frames]
    plain, gz, trunc = (tmp_path / f"{kind}{s}" for s in (".pcap", ".pcap.gz", "-cut.pcap"))
    if kind == "v6vlan":
        plain, gz, trunc = (tmp_path / f"{kind}{s}" for s in (".pcapng", ".pcapng.gz", "-cut.pcapng"))
        write_pcapng(plain, frames, ts)
        write_pcapng(trunc, cut, ts, wire_lengths=[len(f) for f in frames])
    else:
        write_pcap(plain, np.frombuffer(b"".join(frames), np.uint8), [len(f) for f in frames], ts)
        write_pcap(trunc, np.frombuffer(b"".join(cut), np.uint8), [len(f) for f in cut], ts,
                   wire_lengths=[len(f) for f in frames])
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    return [plain, gz, trunc]


# Worked out by hand from conversation() (A->B is the requester, B->A the responder):
# Wire size of a RoCEv2/IPv4 frame: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 58, + RETH 16,
#   + AETH 4, + CNP 16, + payload and pad.
# A->B 14 packets, all data; payload 2x1024 + 1001 + 7x1024 + 200 + 512 = 10929, of which the
#   retransmissions (READ r3, SEND r6, r7, r8) carry 3072; bytes 14x58 + 5x16 + 10929 + 3 pad
#   = 11824, retransmitted 74 + 3x1082 = 3320; gap at r7 (r6) recovered, gap at r13
#   (r12) never: gap_events 2, gap_psns 2, unrecovered 1; CE 1 (r5).
#   RTT samples (AckReq, not retransmitted before the covering response): r0 -> ACK r1 3 us,
#   r1 -> ACK r1 2 us, READ r2 -> FIRST r2 2 us, r8 -> RNR NAK r8 2 us, r11 -> ACK r11 1 us
#   (r7 was retransmitted before ACK r7: Karn) -> p50 2, p99 3.
#   goodput (10929 - 3072) * 8 bit / 33 us = 1.904727 Gb/s. DCQCN: B's one CNP to it (its QP
#   0xc1) is received (cnps_received 1), not judged (no rate samples around it), and answers r5's
#   CE (ce_without_cnp 0).
# B->A 11 packets: 4 ACKs, 1 NAK seq, 1 RNR NAK, 1 CNP (ECN 01), 4 READ responses of 1024 B
#   (data 4, payload 4096, 2 of them retransmitted); bytes 6x62 + 74 + 4x1086 = 4790,
#   retransmitted 2x1086 = 2172; READ LAST r4 skips the lost MIDDLE r3
#   (gap 1), recovered by the re-read; goodput 2048 * 8 / 28 us = 0.585143 Gb/s.
EXPECTED_QPS_V2 = [
    "flow,src_ip,dst_ip,dest_qp,peer_qp,transport,first_ts,last_ts,packets,bytes,data_packets,payload_bytes,"
    "acks,naks_seq,naks_rnr,naks_other,gap_events,gap_psns,unrecovered_psns,retransmitted_packets,"
    "retransmitted_bytes,ecn_not_ect,ecn_ce,cnp_packets,rtt_p50_us,rtt_p99_us,goodput_gbps,connection,"
    "cnps_received,cnps_judged,cnps_ignored,cnps_excess,cnp_reaction_us_p50,rate_cut_pct_p50,recovery_us_p50,"
    "ce_without_cnp",
    "10.0.0.1>10.0.0.2:0x0000d2,10.0.0.1,10.0.0.2,0x0000d2,0x0000c1,RC,1700000000.000000000,"
    "1700000000.000033000,14,11824,14,10929,0,0,0,0,2,2,1,4,3320,0,1,0,2.000,3.000,1.904727,,1,0,0,0,,,,0",
    "10.0.0.2>10.0.0.1:0x0000c1,10.0.0.2,10.0.0.1,0x0000c1,0x0000d2,RC,1700000000.000003000,"
    "1700000000.000031000,11,4790,4,4096,4,1,1,0,1,1,0,2,2172,0,0,1,,,0.585143,,0,0,0,0,,,,0",
]


def qps_for(path: Path, out: Path) -> str:
    code, _, err = run([str(path), "--csv", str(out)])
    assert (code, err) == (0, "")
    return (out / "qps.csv").read_text()


def test_frames_built_for_the_variants_have_valid_icrcs(tmp_path):
    import roceview

    for kind in OVERHEAD:
        packets = roceview.read_packets(str(write_variants(tmp_path, kind)[0]))
        roce = packets[packets["proto"].astype(str).isin(["roce_v1", "roce_v2"])]
        assert len(roce) == len(conversation()) - 1
        assert roce["icrc_ok"].astype(bool).all(), kind
        assert set(roce["proto"].astype(str)) == {"roce_v1" if kind == "v1" else "roce_v2"}
        if kind == "v6vlan":
            assert set(roce["vlan_id"].tolist()) == {100} and set(roce["pcp"].tolist()) == {3}


def test_rocev2_ipv4_conversation_gives_the_hand_computed_qps_csv(tmp_path):
    plain = write_variants(tmp_path, "v2")[0]
    assert qps_for(plain, tmp_path / "out").splitlines() == EXPECTED_QPS_V2


@pytest.mark.parametrize("kind", ["v2", "v1", "v6vlan"])
def test_plain_gzip_and_truncated_copies_give_identical_qps_csv(tmp_path, kind):
    texts = [qps_for(p, tmp_path / f"o{i}") for i, p in enumerate(write_variants(tmp_path, kind))]
    assert texts[1] == texts[0]  # gzip
    assert texts[2] == texts[0]  # snaplen-truncated


def _normalised(text: str, kind: str) -> list[dict]:
    """qps.csv rows with the IPv6 endpoints written as the IPv4 ones and the wire sizes reduced
    by the encapsulation's exact per-packet overhead."""
    if kind == "v6vlan":
        text = text.replace(A6, A4).replace(B6, B4)
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        row["bytes"] = str(int(row["bytes"]) - OVERHEAD[kind] * int(row["packets"]))
        row["retransmitted_bytes"] = str(int(row["retransmitted_bytes"])
                                         - OVERHEAD[kind] * int(row["retransmitted_packets"]))
    return rows


@pytest.mark.parametrize("kind", ["v1", "v6vlan"])
def test_rocev1_and_vlan_ipv6_pcapng_give_the_same_qps_csv_as_rocev2_ipv4(tmp_path, kind):
    base = qps_for(write_variants(tmp_path, "v2")[0], tmp_path / "o_v2")
    other = qps_for(write_variants(tmp_path, kind)[0], tmp_path / f"o_{kind}")
    assert base.splitlines() == EXPECTED_QPS_V2
    if kind == "v6vlan":
        assert f"{A6}>{B6}:0x0000d2,{A6},{B6},0x0000d2,0x0000c1,RC," in other
    assert _normalised(other, kind) == _normalised(base, "v2")


@pytest.mark.parametrize("kind", ["v1", "v6vlan"])
def test_events_are_the_same_in_every_encapsulation(tmp_path, kind):
    """events.csv (gaps, retransmissions, NAKs, CNP, CE, PFC) does not depend on the encapsulation."""
    texts = {}
    for k in ("v2", kind):
        d = tmp_path / k
        d.mkdir()
        code, _, err = run([str(write_variants(d, k)[0]), "--csv", str(d / "out")])
        assert (code, err) == (0, "")
        texts[k] = (d / "out" / "events.csv").read_text().replace(A6, A4).replace(B6, B4)
    assert texts[kind] == texts["v2"]
    kinds = [line.split(",")[2] for line in texts["v2"].splitlines()[1:]]
    assert Counter(kinds) == Counter({"retransmit": 6, "gap": 3, "nak_seq": 1, "nak_rnr": 1, "cnp": 1,
                                      "ecn_ce": 1, "pfc_pause": 1})
