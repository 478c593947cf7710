"""`roceview dissect -T json` writes what `tshark -T json` (Wireshark 4.0) writes, for every field
roceview writes: same layer, same subtree path, same name, same string, byte for byte (a field
tshark writes twice, as `ip.addr`, both times in order). And `-T json -e FIELD...` is tshark's
output byte for byte on captures without the exceptions below.

How: the first 200 packets of every real capture (../shared/captures/real), of every sample
(captures/) and of the decoder's zoo (tests/helpers/zoo.py: QinQ, IPv6, every extended header,
PFC, PAUSE, ERSPAN, VXLAN, GRE, SLL, native IB) are cut with editcap and merged with `mergecap
-a` into one pcapng, so tshark and roceview each read it once. tshark runs with its payload
heuristics and the UDP dissectors it prefers to InfiniBand on port 4791 disabled (as
tests/packets/test_decode_equals_tshark.py does: TFTP for source port 69). Per packet, roceview's
layers are matched in order with tshark's layers of the innermost frame (from the last `eth`
before `infiniband`: a mirrored frame's inner one, as roceview decodes it); tshark's layers
after `infiniband` are the payload (IPoIB, NVMe-oF) roceview does not decode.

Documented exceptions (checked, never skipped: only these fields of these frames may differ,
and with the whole corpus present each one must occur)
  cut:   a frame cut silently (`magnate3_rocev2_uc-write-imm_cut-243B.pcap`, orig_len = caplen):
         roceview's frame.len comes from its IP length (docs/columns.md), tshark's is orig_len.
  mirror: a decapsulated frame (ERSPAN/VXLAN/GRE): roceview's frame.len / cap_len are the
         inner frame's.
  rd:    opcodes 0x40-0x5F (ConnectX DC transport): tshark 4.0 shows no ICRC, decodes RD
         ACKNOWLEDGE (0x51) without its RDETH and DETH, so its AETH is the RDETH's bytes, and
         shows nothing after a RESYNC's (0x55) BTH (test_decode_equals_tshark.py, 9).
  cnp:   CNP (0x81): tshark 4.0 decodes nothing after the BTH, no ICRC (same test, 1).
  xrc:   XRC (0xA0-0xB7): tshark 4.0 has no XRCETH and decodes nothing after the BTH (5).
  sll:   Linux cooked captures: roceview's eth.src is the SLL header's address (tshark:
         sll.src.eth, no eth layer).
  8021ad: an 802.1ad S-tag: tshark names the layer `ieee8021ad` (and eth.type 0x88a8); roceview
         writes both tags as `vlan` and eth.type 0x8100 (as its display filter's eth.type).
  cmpath: a CM REQ's primary/alternate flow label, packet rate and the reserved bits between
         them: tshark 4.0 reads all three at the flow label's first byte (checked byte by byte in
         test_dissect_cm_equals_tshark.py, with IBTA 12.6.5's layout).

Fields tshark shows and roceview does not write are listed by OMITTED (each with its reason);
a new one fails the test, so the list is the coverage report (printed with -s).
"""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import REAL, SAMPLES, capture_files
from helpers.tshark import PAYLOAD_HEURISTICS, known_protocols
from helpers.zoo import ROCE_PORT, build_zoo, zoo_ts

pytestmark = pytest.mark.tshark

CAP = 200                    # packets per file: CI time
LAYERS = ("frame", "eth", "vlan", "ip", "ipv6", "udp", "infiniband", "macc")      # what roceview writes
CUT = "magnate3_rocev2_uc-write-imm_cut-243B.pcap"
CMPATH = r"infiniband\.cm\.req\.(prim|alt)_(flowlabel|reserved0|pktrate)"
OMITTED = {   # pattern on a field's name (the last key of its path) -> why roceview does not write it
    r"frame\.(encap_type|offset_shift|marked|ignored|protocols|interface_id|interface_name|interface_description"
    r"|section_number)": "capture-file bookkeeping, not a field of the packet",
    r".*_resolved|.*_host|ip(v6)?\.host|ipv6\.(src_|dst_)?slaac_mac": "name resolution and addresses derived from others",
    r"_ws\..*|.*\.(bogus_ip_length|ttl\.lncb|src_not_group|padding_bad|length\.bad|checksum\.zero)": "expert info",
    r"infiniband\.(lrh|grh|bth|rdeth|deth|reth|atomiceth|aeth|atomicacketh|mad|payload|vendor|smpdirected|rmpp"
    r"|smplid\.smpdata)": "a header's own bytes (roceview keeps its fields; their `_tree` is written)",
    r"(infiniband\.|.*\.)reserved\d*|infiniband\.bth\.reserved7": "reserved bits",
    r"ip\.(version|hdr_len|len|flags|flags\.(rb|df|mf)|frag_offset|proto|checksum|checksum\.status)"
    r"|ipv6\.(version|plen|nxt)|udp\.(length|checksum|checksum\.status)|eth\.(len|padding|trailer|fcs|fcs\.status)"
    r"|infiniband\.lrh\.(lver|lnh|pktlen)|infiniband\.grh\.(ipver|paylen|nxthdr)|infiniband\.variant\.crc"
    r"|infiniband\.rwh\.etype": "lengths, versions, next headers, checksums: read, not kept as columns",
    r"ip\.opt.*|ip\.options.*|ipv6\.(hopopts|opt).*": "IPv4 and IPv6 options are not decoded",
    r"udp\.(stream|time_relative|time_delta|payload)": "conversation tracking and payload",
    r"vlan\.dei": "the VLAN DEI bit is not a column",
    r"infiniband\.(mad|cm|sminfo|smpdirected|smplid|sa|rmpp|pathrecord)\..*": "management datagram bodies: roceview "
                                                                             "decodes the MAD header and CM",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tshark):
    """(merged capture, first frame of each part, part names, tshark's options)."""
    editcap, mergecap = shutil.which("editcap"), shutil.which("mergecap")
    if editcap is None or mergecap is None:
        pytest.skip("no editcap / mergecap")
    d = tmp_path_factory.mktemp("json")
    parts = []
    for f in capture_files(REAL) + capture_files(SAMPLES) + [_zoo(d)]:
        cut = d / f"{len(parts):02d}-{f.name}"
        subprocess.run([editcap, "-r", str(f), str(cut), f"1-{CAP}"], check=True, capture_output=True)
        parts.append(cut)
    merged = d / "all.pcapng"
    subprocess.run([mergecap, "-a", "-F", "pcapng", "-w", str(merged)] + [str(p) for p in parts], check=True)
    from roceview.capture.readers import read_records

    counts = [sum(c.n for c in read_records(str(p), 1 << 16, lambda m: None)) for p in parts]
    return merged, np.cumsum([1] + counts), [p.name[3:] for p in parts], _tshark_options(tshark, merged)


def _zoo(d: Path) -> Path:
    from roceview.capture.writer import pcapng_bytes

    frames, ifaces, _ = build_zoo()
    path = d / "zoo.pcapng"
    path.write_bytes(pcapng_bytes(frames, [zoo_ts(i) for i in range(len(frames))],
                                  interfaces=[(1, 9), (197, 9), (113, 6), (276, 9)], if_ids=ifaces))
    return path


def _tshark_options(tshark: str, path: Path) -> list[str]:
    extra = [a for name in PAYLOAD_HEURISTICS if name in known_protocols(tshark) for a in ("--disable-protocol", name)]
    for _ in range(8):
        out = subprocess.run([tshark, "-r", str(path), "-n", "-Y", f"udp.dstport == {ROCE_PORT} && !infiniband && "
                              "!(ip.flags.mf == 1) && !(ip.frag_offset > 0)", "-T", "fields", "-e", "frame.protocols"]
                             + extra, capture_output=True, text=True, timeout=300, check=True).stdout.split()
        chosen = {p.split(":")[p.split(":").index("udp") + 1] for p in out if "udp" in p.split(":")[:-1]}
        if not chosen:
            return extra
        extra += [a for name in sorted(chosen) for a in ("--disable-protocol", name)]
    return extra


def _pairs(text: str):
    return json.loads(text, object_pairs_hook=lambda p: p)


def _flat(pairs, path=()) -> dict[tuple, list[str]]:
    """(subtree keys..., field) -> its values in order, of one layer."""
    out: dict[tuple, list[str]] = {}
    for key, value in pairs:
        if isinstance(value, list) and (not value or isinstance(value[0], tuple)):
            for k, v in _flat(value, path + (key,)).items():
                out.setdefault(k, []).extend(v)
        else:
            out.setdefault(path + (key,), []).append(value)
    return out


def _layers(doc) -> list:
    return dict(dict(doc)["_source"])["layers"]


def _inner(layers: list) -> list:
    """tshark's frame layer and the innermost frame's layers up to infiniband (not its payload)."""
    names = [n for n, _ in layers]
    end = names.index("infiniband") + 1 if "infiniband" in names else len(names)
    eths = [i for i in range(end) if names[i] == "eth"]
    return layers[:1] + layers[eths[-1] if eths else 1:end]


def _exception(key: tuple, layer: str, opcode: int | None, names: list[str], part: str) -> str | None:
    """The documented reason this field of this frame may differ from tshark's, or None
    (`names`: all of tshark's layers of the frame)."""
    field = key[-1]
    if field == "frame.len" and part == CUT:
        return "cut"
    if field in ("frame.len", "frame.cap_len") and names.count("eth") > 1:
        return "mirror"
    if "sll" in names and layer == "eth":
        return "sll"
    if "ieee8021ad" in names and (layer == "vlan" or field == "eth.type"):
        return "8021ad"
    if re.fullmatch(CMPATH, field):
        return "cmpath"
    if opcode is None or layer != "infiniband" or key[0] in ("infiniband.bth_tree", "infiniband.lrh_tree",
                                                             "infiniband.grh_tree"):
        return None
    if 0x40 <= opcode <= 0x5F and (field == "infiniband.invariant.crc" or opcode == 0x55 or opcode == 0x51 and key[0] in (
            "infiniband.aeth_tree", "infiniband.rdeth_tree", "infiniband.deth_tree")):
        return "rd"
    if opcode == 0x81 and field == "infiniband.invariant.crc":
        return "cnp"
    return "xrc" if 0xA0 <= opcode <= 0xB7 else None


def _dissect(*argv) -> str:
    from roceview.cli import Environment, main

    out, err = io.StringIO(), io.StringIO()
    assert main(["dissect", *map(str, argv)], Environment(stdout=out, stderr=err)) == 0, err.getvalue()
    return out.getvalue()


def test_every_field_roceview_writes_is_tsharks(corpus, tshark, capsys):
    merged, starts, parts, extra = corpus
    proc = subprocess.run([tshark, "-r", str(merged), "-n", "-T", "json"] + extra, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    theirs, ours = _pairs(proc.stdout), _pairs(_dissect(merged, "-T", "json"))
    assert len(ours) == len(theirs) == starts[-1] - 1
    problems, used, written, shown, confirmed = [], Counter(), set(), set(), set()
    for number, (mine, doc) in enumerate(zip(ours, theirs), start=1):
        part = parts[np.searchsorted(starts, number, side="right") - 1]
        inner = _inner(_layers(doc))
        shown |= {(n, k) for n, body in inner if n in LAYERS for k in _flat(body)}
        bth = dict(dict(dict(_layers(mine)).get("infiniband", [])).get("infiniband.bth_tree", []))
        opcode = int(bth["infiniband.bth.opcode"]) if "infiniband.bth.opcode" in bth else None
        at = 0
        for layer, body in _layers(mine):
            match = next((j for j in range(at, len(inner)) if inner[j][0] == layer), None)
            want = {} if match is None else _flat(inner[match][1])
            at = at if match is None else match + 1
            for key, values in _flat(body).items():
                written.add((layer, key))
                if want.get(key) == values:
                    confirmed.add((layer, key))
                    continue
                reason = _exception(key, layer, opcode, [n for n, _ in _layers(doc)], part)
                if reason is None:
                    problems.append(f"{part} frame {number}: {layer} {'/'.join(key)}: roceview {values}, "
                                    f"tshark {want.get(key)}")
                used[reason] += 1
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:40])
    never = {k for k in written - confirmed if not re.fullmatch(CMPATH, k[1][-1])}     # cmpath: always the bug
    assert not never, f"fields tshark never agreed with: {sorted(never)}"
    if capture_files(REAL):
        assert set(used) == {"cut", "mirror", "rd", "cnp", "xrc", "sll", "8021ad", "cmpath"}, used
    _report_omitted(shown - written, written, capsys)


def _report_omitted(omitted: set, written: set, capsys) -> None:
    """Every tshark field roceview does not write has its reason in OMITTED; printed by reason."""
    by_reason: dict[str, list[str]] = {}
    unexplained = []
    for layer, key in sorted(omitted):
        reason = next((why for pattern, why in OMITTED.items() if re.fullmatch(pattern, key[-1])), None)
        if reason is None:
            unexplained.append(f"{layer}: {'/'.join(key)}")
        else:
            by_reason.setdefault(reason, []).append(key[-1])
    with capsys.disabled():
        print(f"\n-T json: roceview writes {len({k[-1] for _, k in written})} of tshark's fields "
              f"({len(written)} places); tshark's others, by reason:")
        for reason, names in by_reason.items():
            print(f"  {reason}: {len(set(names))} ({', '.join(sorted(set(names))[:6])}...)")
    assert not unexplained, "tshark fields roceview neither writes nor lists in OMITTED:\n" + "\n".join(unexplained)


CLEAN = ["network-loss.pcap", "pfc-pause-train.pcap", "rnr.pcap", "magnate3_rocev1_mlx5_rc-send.pcap",
         "magnate3_rocev2_mlx5_rdma-read_rdma-cm.pcap", "netdev-ml_ax88772-8023x-pause-xon-xoff_from-hexdump.pcap"]
E_FIELDS = ["frame.number", "frame.time", "frame.time_epoch", "frame.time_relative", "frame.time_delta",
            "frame.len", "frame.cap_len", "eth.dst", "eth.addr", "eth.type", "eth.ig", "vlan.id", "vlan.etype",
            "ip.src", "ip.addr", "ip.dsfield", "ip.dsfield.ecn", "ip.id", "udp.port", "infiniband.grh.sgid",
            "infiniband.grh.tclass", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
            "infiniband.bth.a", "infiniband.reth.va", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
            "infiniband.aeth.syndrome.error_code", "infiniband.aeth.msn", "infiniband.deth.q_key",
            "infiniband.invariant.crc", "infiniband.mad.attributeid", "infiniband.cm.req.localqpn",
            "macc.opcode", "macc.pause_time", "macc.cbfc.enbv", "macc.cbfc.enbv.c3", "macc.cbfc.pause_time.c3"]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kathmandu"], indirect=True)
def test_json_e_fields_are_tsharks_output_byte_for_byte(tshark, zone):
    """The whole output, _index and frame.time (local time, as TZ says) included; and under -Y,
    frame.time_delta_displayed (since the packet shown before)."""
    files = [f for f in capture_files(REAL) + capture_files(SAMPLES) if f.name in CLEAN]
    if not files:
        pytest.skip("none of the captures")
    fields = [a for f in E_FIELDS for a in ("-e", f)]
    loss = SAMPLES / "network-loss.pcap"                  # ACKs and NAKs among other packets
    runs = [(path, fields) for path in files] + [
        (loss, ["-Y", "infiniband.aeth", "-e", "frame.time_delta_displayed"] + fields)]
    for path, argv in runs:
        want = subprocess.run([tshark, "-r", str(path), "-n", "-c", str(CAP), "-T", "json"] + argv,
                              capture_output=True, text=True, timeout=300, check=True).stdout
        assert want.count('"_index"') > 0 and _dissect(path, "-c", CAP, "-T", "json", *argv) == want, \
            (path.name, argv[:2])
