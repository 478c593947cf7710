"""The files one run writes (--csv DIR's five files and a --json file) are one transaction: every
temporary file and every device is written before the first file is replaced, so a target that
refuses its bytes (a symlink to /dev/full, a full disk) leaves the set on disk as the last run
wrote it, never half old and half new."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.cli import run

REPO = Path(__file__).resolve().parents[2]
CAPTURE = str(REPO / "captures" / "clean.pcap")
CSV_NAMES = ("qps.csv", "pfc.csv", "findings.csv", "events.csv", "timeline.csv", "ops.csv", "connections.csv",
             "priorities.csv", "cc.csv", "paused_flows.csv")
full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


def _old_set(folder: Path) -> dict[str, bytes]:
    folder.mkdir(exist_ok=True)
    for name in CSV_NAMES:
        (folder / name).write_bytes(b"old run\n")
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if not p.is_symlink()}


@full
@pytest.mark.parametrize("refusing", CSV_NAMES)
def test_one_csv_file_refusing_its_bytes_replaces_none(refusing, tmp_path):
    folder = tmp_path / "csv"
    before = _old_set(folder)
    (folder / refusing).unlink()
    (folder / refusing).symlink_to("/dev/full")
    code, out, err = run("analyze", CAPTURE, "--csv", str(folder))
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err, err
    assert _contents(folder) == {k: v for k, v in before.items() if k != refusing}
    assert sorted(p.name for p in folder.iterdir()) == sorted(CSV_NAMES)     # no .part file left


@full
def test_a_json_file_refusing_its_bytes_replaces_no_csv_file(tmp_path):
    folder = tmp_path / "csv"
    before = _old_set(folder)
    (tmp_path / "out.json").symlink_to("/dev/full")
    code, _, err = run("analyze", CAPTURE, "--csv", str(folder), "--json", str(tmp_path / "out.json"))
    assert code == 2 and err.count("\n") == 1, err
    assert _contents(folder) == before


def test_a_json_file_that_cannot_be_created_replaces_no_csv_file(tmp_path):
    folder = tmp_path / "csv"
    before = _old_set(folder)
    code, _, err = run("analyze", CAPTURE, "--csv", str(folder), "--json", str(tmp_path / "no" / "such" / "out.json"))
    assert code == 2 and err.count("\n") == 1, err
    assert _contents(folder) == before


def test_csv_and_json_written_together_when_both_can_be(tmp_path):
    code, _, err = run("analyze", CAPTURE, "--csv", str(tmp_path / "csv"), "--json", str(tmp_path / "a.json"))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == sorted(CSV_NAMES)
    assert (tmp_path / "a.json").read_bytes().startswith(b"{")


@pytest.mark.parametrize("kind,reason", [("loop", "Too many levels of symbolic links"),
                                         ("dangling", "No such file or directory"),
                                         ("file", "it is not a folder")])
def test_a_csv_path_that_cannot_be_a_folder_says_why(kind, reason, tmp_path):
    target = tmp_path / "out"
    if kind == "loop":
        target.symlink_to(target)
    elif kind == "dangling":
        target.symlink_to(tmp_path / "gone")
    else:
        target.write_text("x")
    code, _, err = run("analyze", CAPTURE, "--csv", str(target))
    assert code == 2 and err == f"roceview: error: cannot write CSV files into {target}: {reason}\n"


def test_a_json_file_named_as_one_of_the_csv_files_is_refused_before_reading(tmp_path):
    code, _, err = run("analyze", CAPTURE, "--csv", str(tmp_path), "--json", str(tmp_path / "qps.csv"))
    assert code == 2 and err.count("\n") == 1 and "name the same file" in err, err
    assert list(tmp_path.iterdir()) == []
