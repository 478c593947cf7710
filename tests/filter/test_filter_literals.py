"""Display-filter literals as tshark 4.0 reads them: booleans,
integers, MAC spellings, LIDs, names of coded columns, and a field where a value belongs.
The frame numbers were checked with `tshark -r captures/clean.pcap -Y ...`."""
from __future__ import annotations

import io

import pytest

from conftest import SAMPLES
from roceview.packets.batch import Batch
from roceview.cli import Environment, main
from roceview.filter import FilterError, compile_filter

CLEAN = SAMPLES / "clean.pcap"
SE_FRAMES = [7, 8, 12, 20, 30, 46, 51, 60, 70, 74, 79, 82, 114, 120, 127, 135]   # tshark: infiniband.bth.se == 1


@pytest.fixture(scope="module")
def clean() -> Batch:
    from roceview.packets.read import iter_batches

    return Batch.concat(list(iter_batches([str(CLEAN)], prefetch=False)))


def frames(text: str, b: Batch) -> list[int]:
    return b.cols["frame"][compile_filter(text).mask(b)].tolist()


@pytest.mark.parametrize("text, want", [
    ("infiniband.bth.se == 2", "se"),            # tshark: any non-zero literal of a boolean is TRUE
    ("infiniband.bth.se >= 2", "se"),
    ("infiniband.bth.se in {2}", "se"),
    ("infiniband.bth.se < 2", "not se"),
    ("infiniband.bth.se != 0x10", "not se"),
])
def test_a_non_zero_boolean_literal_is_true(clean, text, want):
    se = frames("infiniband.bth.se == 1", clean)
    assert se == SE_FRAMES
    assert frames(text, clean) == (se if want == "se" else frames("infiniband.bth.se == 0", clean))


@pytest.mark.parametrize("mac", ["0e:c0:de:00:00:11", "0e-c0-de-00-00-11", "0ec0.de00.0011", "0EC0.DE00.0011",
                                 "0ec0de.000011", "0ec0-de00-0011", "0e.c0.de.00.00.11", "0ec0de000011"])
def test_every_mac_spelling_tshark_takes(clean, mac):
    assert len(frames(f"eth.src == {mac}", clean)) == 35


@pytest.mark.parametrize("text, message", [
    ("frame.number == 1_0", '"1_0" is not a number (frame.number is an integer field) at column 17'),
    ("frame.number == 0o12", '"0o12" is not a number (frame.number is an integer field) at column 17'),
    ("frame.number == 09", '"09" is not a number (frame.number is an integer field) at column 17'),
    ("infiniband.bth.se == -1",
     '"-1" is not a number (infiniband.bth.se is a boolean field (1/0, true/false)) at column 22'),
    ("eth.src == 0ec0:de00:0011", '"0ec0:de00:0011" is not a MAC address (eth.src) at column 12'),
    ("eth.src == 0e-c0.de-00-00-11", '"0e-c0.de-00-00-11" is not a MAC address (eth.src) at column 12'),
    ("eth.src == 0ec0de0000", '"0ec0de0000" is not a MAC address (eth.src) at column 12'),
    ("src_ip == lid:99999", '"lid:99999": a LID is at most 0xffff (src_ip) at column 11'),
    ("src_ip == lid:08", '"lid:08" is not an IPv4/IPv6 address or network (src_ip) at column 11'),
    ('opcode_name == "RC_SEND_ONY"', '"RC_SEND_ONY" is not a value of opcode_name at column 16 '
                                     "(did you mean RC_SEND_ONLY?)"),
    ("proto in {roce_v2, rocev1}", '"rocev1" is not a value of proto at column 20 (did you mean roce_v1?)'),
    ("frame.cap_len < frame.len", "frame.cap_len is compared with the field frame.len: only values are "
                                  "supported (field-to-field comparisons are not) at column 17"),
    ("proto == opcode", "proto is compared with the field opcode: only values are supported "
                        "(field-to-field comparisons are not) at column 10"),
])
def test_a_bad_literal_is_one_line(text, message):
    with pytest.raises(FilterError) as err:
        compile_filter(text)
    assert str(err.value) == "filter: " + message


def test_the_cli_turns_a_lid_too_large_into_exit_2_not_a_traceback():
    err = io.StringIO()
    assert main(["dissect", str(CLEAN), "-Y", "src_ip == lid:70000"], Environment(stdout=io.StringIO(), stderr=err)) == 2
    assert err.getvalue() == 'roceview: error: filter: "lid:70000": a LID is at most 0xffff (src_ip) at column 11\n'


def test_literals_that_stay_valid(clean):
    assert frames("frame.number == 010", clean) == [8]               # a leading 0 is octal
    assert frames("frame.number in {0b11, 0x4, 0}", clean) == [3, 4]
    assert frames("src_ip == lid:65535 || proto == roce_v2", clean) == frames("udp.dstport == 4791", clean)
    assert frames('opcode_name > "RC_SEND"', clean) == frames('opcode_name >= "RC_SEND_"', clean)  # no name check


def test_a_flag_with_a_count_compares_the_count_not_a_boolean():
    """flags.py: a flag may carry a value (roceview.gap: how many PSNs are missing); only
    boolean fields read a non-zero literal as TRUE."""
    import numpy as np

    from roceview.filter import field_names as F
    from roceview.filter.parse import Value
    from roceview.filter.values import compare_test, member_test
    from roceview.packets.flags import Flag, FlagField

    gap = F._flag(FlagField("gap", Flag.GAP, "PSNs missing", value_column="gap_psns"))
    counts = np.array([9, 1, 0, 12], np.uint32)
    assert compare_test(gap, "==", Value("9", False, 1))(counts).tolist() == [True, False, False, False]
    assert compare_test(gap, ">", Value("8", False, 1))(counts).tolist() == [True, False, False, True]
    assert member_test(gap, ((Value("12", False, 1), None),))(counts).tolist() == [False, False, False, True]
    assert compare_test(gap, "==", Value("true", False, 1))(counts).tolist() == [False, True, False, False]


@pytest.mark.parametrize("text", ['ip.src == " 10.0.0.1 "', 'ip.src == "10.0.0.1\\n"', 'frame.number == "5 "',
                                  'eth.src == "0e:c0:de:00:00:11 "'])
def test_spaces_around_a_quoted_value_are_refused_as_tshark_refuses_them(text):
    from roceview.filter import FilterError, compile_filter

    with pytest.raises(FilterError):
        compile_filter(text)
