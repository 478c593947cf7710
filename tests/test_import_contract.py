"""The core knows nothing of the screen (STYLE: toolong/harlequin): dissectors/ imports nothing
from roceview, rich or textual; the pipeline modules import neither rich nor textual."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ["roceview/capture", "roceview/analysis", "roceview/diagnose", "roceview/generate", "roceview/batch.py",
        "roceview/decode.py", "roceview/packets.py", "roceview/table.py", "roceview/api.py", "roceview/errors.py"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _files(entry: str):
    p = ROOT / entry
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


@pytest.mark.parametrize("path", sorted((ROOT / "dissectors").glob("*.py")), ids=lambda p: p.name)
def test_dissectors_import_nothing_from_roceview_rich_or_textual(path):
    assert not _imports(path) & {"roceview", "rich", "textual"}


@pytest.mark.parametrize("path", [f for e in CORE for f in _files(e)], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pipeline_imports_neither_rich_nor_textual(path):
    assert not _imports(path) & {"rich", "textual"}


def test_ci_runs_the_readme_test_command_verbatim():
    """.ci/run must run exactly the README's test command (the set-up line after 'Install and
    run the tests'), so a green CI means the README's command works on a clean clone."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("Install and run the tests"):]
    command = next(line.strip() for line in section.splitlines() if line.startswith("    "))
    ci = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines()]
    assert command in ci, f"README test command {command!r} not in .ci/run"
