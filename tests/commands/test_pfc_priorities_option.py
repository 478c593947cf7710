"""--pfc-priorities (and `pfc_priorities` in a config file) says which priorities have PFC,
instead of what the capture's LLDP DCBX frames say; bad values are one line and exit 2 on
every command that takes it."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import run, run_err
from roceview.api import analyze, load_settings

REPO = Path(__file__).resolve().parents[2]
MISMATCH = REPO / "captures" / "priority-mismatch.pcap"    # DCBX: PFC on 3; one sender on priority 0


def test_the_option_replaces_what_dcbx_says(tmp_path):
    assert "priority_mismatch" in run("analyze", MISMATCH)[1]
    code, out, _ = run("analyze", MISMATCH, "--pfc-priorities", "0,3")
    assert code == 0 and "priority_mismatch" not in out
    result = analyze(str(MISMATCH), config=load_settings(None, [3]), warn=lambda m: None)
    (pm,) = [f for f in result.findings.to_dict("records") if f["kind"] == "priority_mismatch"]
    assert "PFC on priority 3 (--pfc-priorities / pfc_priorities)" in pm["evidence"]
    assert "LLDP" not in pm["evidence"]


def test_the_config_setting_does_the_same(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[diagnose]\npfc_priorities = [0, 3]\n")
    assert "priority_mismatch" not in run("analyze", MISMATCH, "--config", config)[1]


def test_the_option_reaches_the_tui_and_live_too(capsys):
    for command in ("tui", "live"):
        code, out, _ = run(command, "--help")
        assert code == 0 and "--pfc-priorities" in out + capsys.readouterr().out


@pytest.mark.parametrize("value", ["9", "x", "3,", "-1", "none"])
@pytest.mark.parametrize("command", ["analyze", "tui"])
def test_a_bad_priority_list_is_one_line_and_exit_2(command, value):
    code, _, err = run(command, MISMATCH, "--pfc-priorities", value)   # usage errors: the Environment's stderr
    assert code == 2 and len(err.strip().splitlines()) == 1 and "priorities 0-7" in err, err


@pytest.mark.parametrize("value", ["[9]", '[3, "a"]', "[[3]]", "[1, true]", '"3"', "3"])
def test_a_bad_pfc_priorities_setting_is_one_line_and_exit_2(tmp_path, value):
    config = tmp_path / "c.toml"
    config.write_text(f"[diagnose]\npfc_priorities = {value}\n")
    code, err = run_err("analyze", MISMATCH, "--config", config)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pfc_priorities" in err, err
