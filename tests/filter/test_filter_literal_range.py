"""Integer literals of any size: one FilterError line, never Python's int-string limit
("Exceeds the limit (4300 digits)") nor a message as long as the literal, and the range
decision tshark 4.0 makes: a literal above the Wireshark field's type (FT_UINT16 for
udp.port, FT_UINT24 for infiniband.bth.psn, ...) is refused ("too big for this field"), one
above 64 bits "causes an integer overflow", a boolean accepts any 64-bit value as TRUE.
The decisions were read from `tshark -r captures/clean.pcap -Y ...` (4.0.17) and are
checked against tshark where it is installed."""
from __future__ import annotations

import io
import subprocess

import pytest

from conftest import SAMPLES
from roceview.cli import Environment, main
from roceview.filter import FilterError, compile_filter

CLEAN = SAMPLES / "clean.pcap"
HUGE = "1" * 5000                      # past Python's 4,300-digit int(str) limit
GIANT = "9" * 100_000

REFUSED = [
    f"frame.number == {HUGE}", f"infiniband.bth.se == {HUGE}", f"udp.port in {{1..{HUGE}}}",
    f"frame.number == -{HUGE}", f"psn == {HUGE}", f"roceview.gap > {HUGE}", f"udp.port in {{1, {HUGE}}}",
    f"frame.number == {GIANT}", "frame.number == 0x" + "f" * 5000, "frame.number == 0" + "7" * 5000,
    "frame.number == 0b" + "1" * 5000,
    "frame.number == 99999999999999999999", "frame.number == 4294967296", "frame.number == 0x100000000",
    "infiniband.bth.psn == 16777216", "infiniband.bth.psn in {1..16777216}", "udp.port == 65536",
    "infiniband.bth.padcnt == 256", "infiniband.bth.opcode == 256", "vlan.id == 65536",
    "infiniband.reth.va == 18446744073709551616", "infiniband.bth.se == 18446744073709551616",
    "frame.number == -4294967296", "frame.number == -2147483648", "udp.port == -65536",
    "infiniband.reth.va == -9223372036854775808", "psn == 18446744073709551616",
]
ACCEPTED = [
    "frame.number == 4294967295", "infiniband.bth.psn == 16777215", "udp.port == 65535", "vlan.id == 4096",
    "infiniband.reth.va == 18446744073709551615", "infiniband.bth.se == 4294967296",
    "infiniband.bth.se == 18446744073709551615", "frame.number == -2147483647", "udp.port == -65535",
    "infiniband.reth.va == -9223372036854775807", "frame.number == 017777777777",
]


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_an_out_of_range_literal_is_one_short_filter_error(text):
    with pytest.raises(FilterError) as caught:
        compile_filter(text)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 200, message[:300]
    assert " at column " in message


@pytest.mark.parametrize("text", ACCEPTED, ids=range(len(ACCEPTED)))
def test_a_literal_within_the_fields_range_compiles(text):
    compile_filter(text)


def test_a_boolean_reads_any_64_bit_literal_as_true():
    ones = _frames("infiniband.bth.se == 1")
    assert ones and _frames("infiniband.bth.se == 18446744073709551615") == ones


@pytest.mark.parametrize("command", [["dissect", str(CLEAN), "-Y"], ["analyze", str(CLEAN), "--filter"]])
def test_a_huge_literal_on_the_command_line_is_one_line_and_exit_2(command):
    out, err = io.StringIO(), io.StringIO()
    assert main(command + [f"frame.number == {HUGE}"], Environment(stdout=out, stderr=err)) == 2
    message = err.getvalue()
    assert message.startswith("roceview: error: filter: ") and message.count("\n") == 1, message[:300]
    assert len(message) < 200 and "Traceback" not in message and out.getvalue() == ""


def test_an_out_of_range_literal_says_the_fields_maximum():
    with pytest.raises(FilterError, match=r'"65536" too big for udp\.port, maximum 65535 at column 13'):
        compile_filter("udp.port == 65536")
    with pytest.raises(FilterError, match=r'"1111111111.*\(5000 characters\)" causes an integer overflow'):
        compile_filter(f"frame.number == {HUGE}")


@pytest.mark.tshark
@pytest.mark.parametrize("text", [t for t in REFUSED + ACCEPTED if len(t) < 200])
def test_tshark_refuses_the_same_literals(tshark, text):
    run = subprocess.run([tshark, "-r", str(CLEAN), "-Y", _as_tshark(text)], capture_output=True, text=True,
                         timeout=120)
    try:
        compile_filter(text)
        ours = True
    except FilterError:
        ours = False
    assert (run.returncode == 0) == ours, run.stderr


def _as_tshark(text: str) -> str:
    """The roceview-only column names in REFUSED as the Wireshark field they are."""
    text = text.replace("roceview.gap", "infiniband.bth.psn")
    return text.replace("psn ==", "infiniband.bth.psn ==") if text.startswith("psn") else text


def _frames(text: str) -> list[int]:
    out = io.StringIO()
    assert main(["dissect", str(CLEAN), "-Y", text, "-T", "fields", "-e", "frame.number"],
                Environment(stdout=out, stderr=io.StringIO())) == 0
    return out.getvalue().split()
