"""Review of issue 16 item 2: numeric options that are not finite (nan, inf, 1e400) or out of
range were accepted (--link-speed nan/inf ran with a NaN link) or ended in a traceback
(--bucket nan/inf: ValueError/OverflowError; live --duration inf: OverflowError in the stop
timer; generate --seed -1: numpy's ValueError). Each is one line and exit 2 now."""
from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_err as run

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "captures" / "clean.pcap"


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0"])
@pytest.mark.parametrize("argv", [["analyze", CAPTURE, "--link-speed"], ["analyze", CAPTURE, "--bucket"],
                                  ["live", "-r", CAPTURE, "--no-tui", "--link-speed"],
                                  ["live", "-r", CAPTURE, "--no-tui", "--duration"]])
def test_non_finite_numbers_are_one_line_exit_2(argv, value):
    code, err = run(*argv, value)
    assert code == 2 and err.count("\n") == 1 and err.startswith("roceview: error: "), err
    assert argv[-1] in err


@pytest.mark.parametrize("value", ["1e303", "31536000001"])
def test_a_bucket_longer_than_a_year_is_one_line_exit_2(value):
    """--bucket 1e303 is finite, but in nanoseconds it overflowed (OverflowError traceback)."""
    code, err = run("analyze", CAPTURE, "--bucket", value)
    assert code == 2 and err.count("\n") == 1 and "--bucket must be a number > 0 and at most" in err, err
    assert run("analyze", CAPTURE, "--bucket", "31536000000")[0] == 0


def test_a_negative_seed_is_one_line_exit_2(tmp_path):
    code, err = run("generate", "incast", "-o", tmp_path / "g.pcap", "--seed", "-1")
    assert (code, err) == (2, "roceview: error: --seed must be >= 0, got -1\n")
    assert list(tmp_path.iterdir()) == []
