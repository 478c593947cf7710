"""Review of issue 16 item 1, outputs: an output naming one of the inputs replaced the capture
(`analyze x.pcap --json x.pcap` left x.pcap holding the JSON, exit 0), and two outputs naming
one file kept only the last (`generate -o x --truth x`); both are refused before anything is
read. `live -w` wrote straight into the path: an existing file was emptied even when the
capture then failed to start, and a Ctrl-C before the capture began left a file behind."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import run


REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "captures" / "clean.pcap"


@pytest.mark.parametrize("argv", [["analyze", "{x}", "--json", "{link}"], ["analyze", "{x}", "--json", "{x}"],
                                  ["live", "--no-tui", "-r", "{x}", "-w", "{x}"],
                                  ["live", "--no-tui", "-r", "{x}", "--json", "{link}"]])
def test_an_output_that_is_an_input_is_refused_and_the_capture_kept(tmp_path, argv):
    x = tmp_path / "x.pcap"
    shutil.copy(CAPTURE, x)
    (tmp_path / "link").symlink_to("x.pcap")
    code, _, err = run(*[a.format(x=x, link=tmp_path / "link") for a in argv])
    assert code == 2 and "is also an input" in err and err.count("\n") == 1, err
    assert x.read_bytes() == CAPTURE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "x.pcap"]


def test_two_outputs_naming_one_file_are_refused(tmp_path):
    out = tmp_path / "g.pcap"
    code, _, err = run("generate", "incast", "-o", out, "--truth", tmp_path / "." / "g.pcap")
    assert code == 2 and "name the same file" in err, err
    assert list(tmp_path.iterdir()) == []


def test_outputs_may_name_a_device_twice(tmp_path):
    os.mknod(tmp_path / "null", 0o666 | 0o020000, os.makedev(1, 3))   # a stand-in /dev/null
    code, _, err = run("generate", "incast", "-o", tmp_path / "null", "--truth", tmp_path / "null")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]
    assert (tmp_path / "null").is_char_device()


def test_a_replaced_file_keeps_its_owner_and_mode(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can give a file to another user")
    out = tmp_path / "r.json"
    out.write_text("old")
    os.chown(out, 4321, 4322)
    os.chmod(out, 0o640)
    code, _, err = run("analyze", CAPTURE, "--json", out)
    assert code == 0, err
    st = out.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (4321, 4322, 0o640)
    assert out.read_text().startswith("{")


@pytest.mark.parametrize("argv", [["analyze", CAPTURE, "--json", ""], ["analyze", CAPTURE, "--csv", ""],
                                  ["convert", CAPTURE, "-o", ""], ["generate", "incast", "-o", "x.pcap", "--truth", ""]])
def test_an_empty_output_name_is_refused(argv, tmp_path, monkeypatch):
    """--json '' was silently ignored (exit 0, no JSON); convert -o '' said 'cannot write : Is a directory'."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*argv)
    assert code == 2 and "needs a file name" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []
