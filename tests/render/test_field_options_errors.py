"""`dissect -T fields -E OPTION`: a bad option is one line on stderr and exit 2, a control
character in it (a newline, ESC) shown escaped, never sent to the terminal."""
from __future__ import annotations

import io

import pytest

from conftest import SAMPLES
from roceview.cli import Environment, main


@pytest.mark.parametrize("option", ["quote=x\ny", "occurrence=\x1b[2J", "nope\n=1", "header", "colour=\u2028"])
def test_a_bad_field_option_is_one_printable_line_and_exit_2(option):
    out, err = io.StringIO(), io.StringIO()
    argv = ["dissect", str(SAMPLES / "clean.pcap"), "-T", "fields", "-e", "frame.number", "-E", option]
    assert main(argv, Environment(stdout=out, stderr=err)) == 2
    message = err.getvalue()
    assert message.startswith("roceview: error: -E ") and message.endswith("\n"), repr(message)
    assert message[:-1].isprintable() and out.getvalue() == "", repr(message)
