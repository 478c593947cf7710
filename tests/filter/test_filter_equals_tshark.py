"""`roceview dissect -Y FILTER` selects the same frames as `tshark -Y FILTER` (Wireshark 4.0);
`dissect -T fields -e ALIAS` prints what `tshark -T fields` prints; `dissect -x` dumps as tshark.

Every real capture (../shared/captures/real) and every sample (captures/) is concatenated into
one pcapng with `mergecap -a` (each file keeps its own interface and link type), so each filter
costs one tshark run and one in-process `roceview dissect -Y ... -T fields -e frame.number`
for all the files; the tshark runs go two at a time. A mismatch is reported as file:frame.

Documented exceptions (checked, never skipped: the frames that differ must be exactly the
ones the exception names, in the files it names)
  A. `frame.len` on frames whose record length is not the frame's: roceview's wire_len of a
     frame cut silently (`magnate3_rocev2_uc-write-imm_cut-243B.pcap`, orig_len = caplen) comes
     from its IP total length (docs/columns.md: sizes never come from the captured bytes),
     where tshark's frame.len is the record's orig_len (tests/packets/test_decode_equals_tshark.py, 12).
  B. RD ACKNOWLEDGE (ConnectX DC transport, opcode 0x51): tshark 4.0 decodes it without its
     RDETH and DETH, so its `infiniband.aeth.*` fields are the RDETH's bytes and it shows no
     `infiniband.rdeth.*` / `infiniband.deth.*` there (test_decode_equals_tshark.py, 9).
  C. IPoIB: tshark decodes the IPv4/IPv6 packets native IB carries as payload
     (`rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap`) and shows their `ip.*` / `ipv6.*`; the
     packets table stops at the InfiniBand headers (payload is not decoded), so `ip.*` / `ipv6.*`
     are absent on those frames.
  D. ConnectX DC transport (RD opcodes): tshark takes an RD packet whose queue pair numbers are
     0 or 1 for a MAD and shows `infiniband.mad.*` of its payload; roceview reads MADs only from
     a UD SEND_ONLY to QP0/QP1 (IBTA 13.5.1).
  E. A CM REQ's path flow label, packet rate and the reserved bits between them: tshark 4.0 reads
     all three at the flow label's first byte (checked byte by byte against IBTA 12.6.5 in
     tests/commands/test_dissect_cm_equals_tshark.py).
"""
from __future__ import annotations

import io
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from conftest import REAL, SAMPLES, capture_files
from helpers.tshark import PAYLOAD_HEURISTICS, known_protocols as _known_protocols
from helpers.zoo import ROCE_PORT

pytestmark = pytest.mark.tshark

REPO = Path(__file__).resolve().parents[2]
GRH_V4 = "::ffff:192.168.242.56"

FILTERS = [
    "frame.number <= 20",
    # a negative literal: tshark makes it signed, no unsigned field equals or orders against it
    "frame.number > -1", "frame.number != -1", "udp.port > -1", "infiniband.bth.psn >= -5", "frame.number in {-1..5}",
    "frame.number in {1, 5, 10..15, 9000..9010}",
    "frame.len > 1000",
    "frame.len <= 100 && infiniband",
    "eth.src == 08:c0:eb:da:e2:ca",
    "eth.dst == 08:c0:eb:dd:fb:66 || eth.dst == 01:80:c2:00:00:01",
    "eth.addr == 0e:c0:de:00:00:10",
    "eth.addr != 08:c0:eb:da:e2:ca",                 # != on frames without Ethernet (native IB)
    "!(eth.addr == 08:c0:eb:da:e2:ca)",
    "vlan.id == 100",
    "vlan.priority == 3",
    "vlan.priority in {0..2} and infiniband",
    "ip.src == 172.17.242.56",
    "ip.dst == 172.17.242.0/24",
    "ip.addr == 192.168.0.0/16",
    "ip.src != 10.0.0.1",                            # != on frames without IPv4: tshark 4.0 matches none
    "ip.src not in {10.0.0.1, 10.0.0.2}",            # ... while "not in" matches them
    "ip.addr eq 10.0.0.2 and ip.src ne 10.0.0.2",
    "ipv6.src == fe80::/10",
    "ipv6.dst == ff02::fb || ipv6.addr == ff02::1:3",
    "ipv6.addr != fe80::/10",
    "ip.dsfield.dscp == 26",
    "ip.dsfield.dscp > 0 && ip.dsfield.ecn in {1, 2}",
    "ip.dsfield.ecn == 3",
    "ipv6.tclass.dscp == 0 && ipv6.tclass.ecn == 0",
    "udp.srcport == 69 || udp.srcport == 5353",
    "udp.dstport == 4791",
    "udp.port in {1024..5000} && !infiniband",
    "infiniband",
    "!infiniband && udp",
    "infiniband.bth.opcode == 0x81",
    "infiniband.bth.opcode in {4, 10, 0x11}",
    "infiniband.bth.destqp == 0x000001",
    "infiniband.bth.destqp > 0x100 and infiniband.bth.destqp lt 0x2000",
    "infiniband.bth.psn >= 1000 and infiniband.bth.psn < 2000",
    "infiniband.bth.a == 1",
    "infiniband.bth.se == 1 || infiniband.bth.m == 1",
    "infiniband.bth.padcnt > 0",
    "infiniband.bth.p_key != 65535",
    "infiniband.reth.va",
    "infiniband.reth.r_key != 0 && infiniband.reth.dmalen >= 4096",
    "infiniband.aeth.syndrome < 32",
    "infiniband.aeth.msn > 10",
    "infiniband.deth.q_key == 0x80010000",
    "infiniband.deth.srcqp == 1",
    f"infiniband.grh.sgid == {GRH_V4}",
    "infiniband.grh.dgid",
    "macc.cbfc.enbv == 0x08",
    " || ".join(f"macc.cbfc.pause_time.c{p} == 0" for p in range(8)),
    " && ".join(f"macc.cbfc.pause_time.c{p} == 0" for p in (0, 1, 2, 4, 5, 6, 7)),
    "macc.pause_time == 0xffff",
    "((ip.src == 10.0.0.1 or ip.dst == 10.0.0.2) and not (udp.dstport == 4791 and "
    "infiniband.bth.opcode == 17)) || (vlan.id && !ip)",
    "!(infiniband.bth.opcode == 17 || infiniband.bth.a == 1) && infiniband.bth.opcode not in {0..5, 0x64}",
    "not (eth.src == 0e:c0:de:00:00:10 or (frame.len > 200 and (udp.port == 4791 or ipv6)))",
    "ip.addr === 10.0.0.1 || ip.addr !== 10.0.0.2",
    # precedence: `and` binds tighter than `or`, `not` tighter than both (a left-to-right reading differs)
    "frame.number == 1 or frame.number == 2 and frame.number == 3",
    "not frame.number == 1 and frame.number <= 3 || frame.number == 1 && frame.number == 2",
    "infiniband.bth.se == 2",                        # a non-zero boolean literal is TRUE
    "eth.src == 0ec0.de00.0010 || eth.dst == 08c0ebddfb66 || eth.addr == 08-c0-eb-da-e2-ca",
    "infiniband.aeth && !infiniband.reth || infiniband.lrh && infiniband.grh",
    "infiniband.bth && !infiniband.deth && !infiniband.rdeth",
]

# filter -> {file name: reason}; the frames that differ must lie in those files
IPOIB = "rdma-softroce-demo_native-ib-erf_cm-ipoib.pcap"
DC = ("magnate3_rocev2_dc-transport_a.pcap", "magnate3_rocev2_dc-transport_b.pcap")
CM_REQS = tuple(f"magnate3_rocev2_mlx5_{n}_rdma-cm.pcap" for n in ("nvmeof-discover", "nvmeof-discover2", "rdma-read",
                                                                  "rdma-write", "send")) + (
    "magnate3_native-ib_ibdump-erf_rc-send.pcap", IPOIB,
    "sanderw71-softroce_rocev2_custom-responder-psn-bug_stall_mixed-lan.pcapng",
    "sanderw71-softroce_rocev2_custom-responder-rping-failure_mixed-lan.pcapng")
EXCEPTIONS = {
    "frame.len > 1000": {"magnate3_rocev2_uc-write-imm_cut-243B.pcap": "A"},
    "infiniband.aeth.syndrome < 32": dict.fromkeys(DC, "B"),
    "infiniband.aeth.msn > 10": dict.fromkeys(DC, "B"),
    "ip.src != 10.0.0.1": {IPOIB: "C"},
    "ipv6.src == fe80::/10": {IPOIB: "C"},
    "ipv6.tclass.dscp == 0 && ipv6.tclass.ecn == 0": {IPOIB: "C"},
    "ip.addr === 10.0.0.1 || ip.addr !== 10.0.0.2": {IPOIB: "C"},
    "infiniband.bth && !infiniband.deth && !infiniband.rdeth": dict.fromkeys(DC, "B"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tshark):
    files = capture_files(REAL) + capture_files(SAMPLES)
    mergecap = shutil.which("mergecap")
    if not files or mergecap is None:
        pytest.skip("no captures, or no mergecap")
    merged = tmp_path_factory.mktemp("filters") / "all.pcapng"
    subprocess.run([mergecap, "-a", "-F", "pcapng", "-w", str(merged)] + [str(f) for f in files], check=True)
    return merged, files, _file_starts(files), _tshark_options(tshark, merged)


def _file_starts(files: list[Path]) -> np.ndarray:
    """First frame number of each file in the merged capture."""
    from roceview.capture.readers import read_records

    counts = [sum(c.n for c in read_records(str(f), 1 << 16, lambda m: None)) for f in files]
    return np.cumsum([1] + counts)


def _tshark_options(tshark: str, path: Path) -> list[str]:
    """Payload heuristics off and, as in test_decode_equals_tshark, every protocol tshark prefers to
    InfiniBand on UDP port 4791 (TFTP for source port 69) disabled."""
    extra = [a for name in PAYLOAD_HEURISTICS if name in _known_protocols(tshark)
             for a in ("--disable-protocol", name)]
    for _ in range(8):
        out = _tshark(tshark, path, f"udp.dstport == {ROCE_PORT} && !infiniband && !(ip.flags.mf == 1) && "
                                    "!(ip.frag_offset > 0)", extra, "frame.protocols")
        chosen = {layers.split(":")[layers.split(":").index("udp") + 1] for layers in out
                  if "udp" in layers.split(":")[:-1]}
        if not chosen:
            return extra
        extra += [a for name in sorted(chosen) for a in ("--disable-protocol", name)]
    return extra


def _tshark(tshark: str, path: Path, display: str, extra: list[str], field: str = "frame.number") -> list[str]:
    proc = subprocess.run([tshark, "-r", str(path), "-n", "-Y", display, "-T", "fields", "-e", field] + extra,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"tshark rejects {display!r}: {proc.stderr}"
    return proc.stdout.split()


def roceview_frames(path: Path, display: str) -> list[int]:
    """`roceview dissect -Y display -T fields -e frame.number`, run in-process."""
    from roceview.cli import Environment, main

    out, err = io.StringIO(), io.StringIO()
    code = main(["dissect", str(path), "-Y", display, "-T", "fields", "-e", "frame.number"],
                Environment(stdout=out, stderr=err))
    assert code == 0, err.getvalue()
    return [int(x) for x in out.getvalue().split()]


def _where(frames, files, starts) -> list[str]:
    k = np.searchsorted(starts, frames, side="right") - 1
    return [f"{files[i].name}:{f - starts[i] + 1}" for f, i in zip(frames, k)]


def test_at_least_forty_filters_cover_every_alias():
    from roceview.filter import compile_filter

    used = {f.name for text in FILTERS for f in compile_filter(text).field_defs}
    wanted = {"frame.number", "frame.len", "eth.src", "eth.dst", "eth.addr", "vlan.id", "vlan.priority", "ip.src",
              "ip.dst", "ip.addr", "ipv6.src", "ipv6.dst", "ipv6.addr", "ip.dsfield.dscp", "ip.dsfield.ecn",
              "ipv6.tclass.dscp", "ipv6.tclass.ecn", "udp.srcport", "udp.dstport", "udp.port", "infiniband",
              "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a",
              "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.p_key",
              "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.aeth.syndrome",
              "infiniband.aeth.msn", "infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.grh.sgid",
              "infiniband.grh.dgid", "macc.cbfc.enbv", "macc.pause_time", "infiniband.aeth", "infiniband.reth",
              "infiniband.lrh", "infiniband.grh", "infiniband.bth", "infiniband.deth", "infiniband.rdeth"} | {
        f"macc.cbfc.pause_time.c{p}" for p in range(8)}
    assert len(FILTERS) >= 40
    assert wanted <= used, sorted(wanted - used)


def test_dissect_filters_select_the_frames_tshark_selects(corpus, tshark):
    merged, files, starts, extra = corpus
    with ThreadPoolExecutor(2) as pool:          # tshark runs while roceview runs here
        theirs = [pool.submit(_tshark, tshark, merged, text, extra) for text in FILTERS]
        ours = [roceview_frames(merged, text) for text in FILTERS]
    problems = []
    for text, got, want in zip(FILTERS, ours, theirs):
        want = [int(x) for x in want.result()]
        differ = sorted(set(got) ^ set(want))
        allowed = EXCEPTIONS.get(text, {})
        outside = [w for w in _where(differ, files, starts) if w.split(":")[0] not in allowed]
        stale = any(f.name in allowed for f in files) and not differ
        if outside or stale:
            problems.append(f"{text!r}: {len(got)} vs tshark {len(want)}; differ at {outside[:8] or 'nothing'}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- -T fields, -x

# `-T fields` differences that are the exceptions above (letter) or tshark 4.0's own silences
# (tests/packets/test_decode_equals_tshark.py numbers them): (field prefix, file) -> reason
FIELD_EXCEPTIONS = {
    ("frame.len", "magnate3_rocev2_uc-write-imm_cut-243B.pcap"): "A",
    **{(f"infiniband.{h}.", dc): "B: tshark decodes RD ACKNOWLEDGE without RDETH and DETH"
       for h in ("rdeth", "deth", "aeth") for dc in DC},
    ("ip.", IPOIB): "C", ("ipv6.", IPOIB): "C", ("udp.", IPOIB): "C",
    **{("infiniband.mad.", dc): "D" for dc in DC},
    **{(f"infiniband.cm.req.{path}_{field}", name): "E" for path in ("prim", "alt")
       for field in ("flowlabel", "reserved0", "pktrate") for name in CM_REQS},
}


def _alias_fields() -> list[str]:
    from roceview.filter.field_names import FIELDS_BY_KIND_NONE, WIRESHARK_NAMES

    return [name for name in WIRESHARK_NAMES if name not in FIELDS_BY_KIND_NONE]


def test_fields_output_equals_tshark(corpus, tshark):
    merged, files, starts, extra = corpus
    fields = _alias_fields()
    cmd = [tshark, "-r", str(merged), "-n", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    proc = subprocess.run(cmd + [a for f in fields for a in ("-e", f)] + extra, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    theirs = [line.split("\t") for line in proc.stdout.splitlines()]
    out = io.StringIO()
    from roceview.cli import Environment, main

    assert main(["dissect", str(merged), "-T", "fields"] + [a for f in fields for a in ("-e", f)],
                Environment(stdout=out, stderr=io.StringIO())) == 0
    ours = [line.split("\t") for line in out.getvalue().splitlines()]
    assert len(ours) == len(theirs)
    assert {len(row) for row in ours} == {len(row) for row in theirs} == {len(fields)}   # zip hides none
    problems = {}
    for frame, (a, b) in enumerate(zip(ours, theirs), start=1):
        for field, x, y in zip(fields, a, b):
            if x != y:
                where = _where([frame], files, starts)[0]
                name = where.split(":")[0]
                if not any(field.startswith(p) and name == f for p, f in FIELD_EXCEPTIONS):
                    problems.setdefault((field, name), f"{where} {field}: roceview {x!r}, tshark {y!r}")
    assert not problems, "\n".join(problems.values())


def test_hex_dump_equals_tshark(tshark):
    path = REAL / "magnate3_rocev2_mlx5_rdma-read_rdma-cm.pcap"
    if not path.exists():
        pytest.skip("real capture absent")
    proc = subprocess.run([tshark, "-r", str(path), "-x"], capture_output=True, text=True, timeout=120)
    out = io.StringIO()
    from roceview.cli import Environment, main

    assert main(["dissect", str(path), "-x"], Environment(stdout=out, stderr=io.StringIO())) == 0
    # roceview prints each packet's line first (as tshark -P -x); tshark -x alone prints none
    dumps = [block for block in out.getvalue().split("\n\n") if block.startswith("0000")]
    assert "\n\n".join(dumps) + "\n\n" == proc.stdout
