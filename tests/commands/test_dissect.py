"""`roceview dissect`: one line per packet, the -V tree from the declarations, -c."""
import io
from pathlib import Path

from roceview.cli import Environment, main

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT.parent / "shared" / "captures" / "real"
SAMPLE = ROOT / "captures" / "rnr.pcap"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Environment(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_one_line_per_packet_with_opcode_qp_psn_and_flags():
    code, out, err = run(["dissect", "-c", "5", str(SAMPLE)])
    lines = out.splitlines()
    assert code == 0 and err == "" and len(lines) == 5
    assert lines[0].split()[0] == "1" and "RoCEv2" in lines[0] and "QP=0x" in lines[0] and "PSN=" in lines[0]


def test_rnr_naks_are_named_on_their_line():
    _, out, _ = run(["dissect", str(SAMPLE)])
    rnr = [line for line in out.splitlines() if "RNR_NAK" in line]
    assert len(rnr) == 10 and all("timer=4" in line for line in rnr)


def test_detail_tree_lists_every_declared_bth_field():
    from dissectors import ib

    code, out, _ = run(["dissect", "-V", "-c", "1", str(SAMPLE)])
    assert code == 0
    for header in ("Ethernet II", "Internet Protocol version 4", "User Datagram Protocol", "Base Transport Header"):
        assert header in out
    for f in ib.BTH.fields:
        assert f"{f.name} = " in out, f.name
    assert "ICRC = 0x" in out and "[ok]" in out


def test_cnp_is_named_cnp_in_the_tree_and_the_line():
    path = REAL / "scapy-roce-uts_cnp-and-rocev1_from-hexdump.pcap"
    if not path.exists():
        import pytest
        pytest.skip("../shared/captures/real is absent")
    _, out, _ = run(["dissect", "-V", "-c", "1", str(path)])
    assert "opcode = 129 CNP" in out and "CNP QP=0x000118" in out and "BECN" in out
