"""The README's example report is what `roceview analyze` prints today
(it had drifted: the network_loss advice was rewritten after the example was pasted)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_readme_example_report_is_the_current_output():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^`roceview analyze (\S+)`.*?\n```\n(.*?)```", readme, re.S | re.M)
    assert m, "README example not found"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-m", "roceview", "analyze", m.group(1)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out == m.group(2)


def test_ci_runs_the_readme_test_command_verbatim():
    """.ci/run must run exactly the README's test command (the set-up line after 'Install and
    run the tests'), so a green CI means the README's command works on a clean clone."""
    root = REPO
    readme = (root / "README.md").read_text()
    section = readme[readme.index("Install and run the tests"):]
    command = next(line.strip() for line in section.splitlines() if line.startswith("    "))
    ci = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines()]
    assert command in ci, f"README test command {command!r} not in .ci/run"
