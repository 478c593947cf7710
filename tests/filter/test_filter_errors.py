"""Malformed display filters: every one is one line on stderr naming the column, exit 2, never
a traceback (review of issue 17: 60 were tried by hand; `src_ip == lid:99999` raised
OverflowError and 200 nested parentheses RecursionError)."""
from __future__ import annotations

import io

import pytest

from conftest import SAMPLES
from roceview.cli import Environment, main

CLEAN = SAMPLES / "clean.pcap"

BAD = [
    "", "   ", "ip.src ==", "== 10.0.0.1", "ip.src = 10.0.0.1", "(ip.src == 10.0.0.1", "ip.src == 10.0.0.1)",
    "((()))", "ip.src == 10.0.0.1 and", "and udp", "udp or or ip", "!", "not", "ip.src in", "ip.src in {",
    "ip.src in {}", "ip.src in {10.0.0.1,", "udp.port in {1..}", "udp.port in {1..2..3}", "udp.port == 0xZZ",
    "udp.port == 4791 4792", "infiniband.bth.dstqp == 1", "ip.src contains 10", "frame[0:2] == 00:01",
    "udp.port & 1", "eth.src == 00:11:22:33:44", "ip.src == 300.1.1.1", "ip.src == 10.0.0.0/40",
    "ipv6.src == fe80::/200", "ipv6.src == 10.0.0.1", "ip.src == ::1", "infiniband == 1", "udp.port == -",
    "ip.src == 'x'", '"ip.src" == 1.1.1.1', "udp.port == 4791 #", "@", "src_ip == lid:99999", "src_ip == lid:08",
    "opcode_name == NOPE", "frame.cap_len < frame.len", "infiniband.bth.se == -1", "frame.number == 1_0",
    "(" * 200 + "udp" + ")" * 200, "!" * 2000 + "udp", "!(" * 100 + "udp" + ")" * 100,
    "(" * 10_000 + "udp" + ")" * 10_000, "!" * 100_000 + "udp", "not " * 10_000 + "udp",
    'opcode_name == "a\nb"', "udp\x00", 'proto == "\r\n"', 'opcode_name == "x\u2028y"',
    "ip.src == 1.1.1.1\x1b[2J", 'opcode_name == "\x85"', "\tudp.port ==\v",
    'src_ip == "lid:1\u0663"', 'src_ip == "lid:\uff11"',        # a LID is ASCII digits, not any Unicode digit
]


@pytest.mark.parametrize("text", BAD, ids=range(len(BAD)))
def test_a_malformed_filter_is_one_line_with_its_column_and_exit_2(text):
    out, err = io.StringIO(), io.StringIO()
    assert main(["dissect", str(CLEAN), "-Y", text], Environment(stdout=out, stderr=err)) == 2
    message = err.getvalue()
    assert message.startswith("roceview: error: filter: ") and message.count("\n") == 1, message
    assert message[:-1].isprintable() and len(message) < 300, repr(message[:300])   # escaped, short
    assert " at column " in message and out.getvalue() == ""


def test_nesting_up_to_the_limit_still_works():
    def frames(text):
        out = io.StringIO()
        assert main(["dissect", str(CLEAN), "-Y", text, "-T", "fields", "-e", "frame.number"],
                    Environment(stdout=out, stderr=io.StringIO())) == 0
        return out.getvalue().split()

    udp = frames("udp")
    assert frames("(" * 64 + "udp" + ")" * 64) == udp
    assert frames("!" * 64 + "udp") == udp
    assert frames(" && ".join(["!(!udp)"] * 300)) == udp          # depth counts nesting, not length


@pytest.mark.parametrize("text", ['opcode_name == "a\nb"', "udp\x00", 'opcode_name == "x\u2028y"', "udp\x1b[2J"])
def test_a_control_character_in_a_filter_is_escaped_in_the_one_line(text):
    from roceview.filter import FilterError, compile_filter

    with pytest.raises(FilterError) as caught:
        compile_filter(text)
    message = str(caught.value)
    assert message.isprintable() and len(message.splitlines()) == 1, repr(message)
    assert "\\n" in message or "\\x00" in message or "\\u2028" in message or "\\x1b" in message, message
