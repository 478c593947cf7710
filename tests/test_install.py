"""A lean install. numba is the `numba` extra, pyshark is gone, and without
the C extension and numba one line says what to install."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _names(requirements) -> set[str]:
    return {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_numba_is_an_extra_and_pyshark_is_nowhere():
    project = _project()
    assert "numba" not in _names(project["dependencies"])
    assert _names(project["optional-dependencies"]["numba"]) == {"numba"}
    assert "numba" in _names(project["optional-dependencies"]["dev"])     # tests compare the kernels
    everything = _names(project["dependencies"]).union(*map(_names, project["optional-dependencies"].values()))
    assert "pyshark" not in everything


def test_no_test_or_module_imports_pyshark():
    sources = [*REPO.glob("tests/*.py"), *REPO.glob("roceview/**/*.py"), *REPO.glob("dissectors/*.py")]
    users = [p.name for p in sources if re.search(r"^\s*(import|from)\s+pyshark", p.read_text(), re.M)]
    assert users == []


def test_without_c_extension_and_numba_one_line_says_what_to_install():
    code = ("import sys\n"
            "sys.modules['numba'] = None\n"                     # as if numba were not installed
            "from roceview.cli import main\n"
            "sys.exit(main(['analyze', 'captures/rnr.pcap']))\n")
    env = {**os.environ, "ROCEVIEW_KERNEL": "numba"}            # as if the C build were missing
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pip install 'roceview[numba]'" in proc.stderr and proc.stdout == ""


def test_design_lists_the_tui_only_as_planned_until_it_exists():
    design = (REPO / "docs" / "DESIGN.md").read_text()
    rows = [line for line in design.splitlines() if line.startswith("| `roceview/tui/`")]
    if not (REPO / "roceview" / "tui").is_dir():
        assert all("planned" in row for row in rows), rows
