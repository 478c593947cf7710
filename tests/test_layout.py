"""The house's rules, read from the source (house.py): stages import only downward
(dissectors < shared utilities < kernels < capture < packets/generate < filter < analysis <
diagnose < render/engines < api < live/tui < commands < cli), no module uses another stage's
private name, no import cycle (the commands cli loads by name included), and the core knows
nothing of the screen (toolong, harlequin: textual and rich only in tui/, render/ and
commands/). Each rule is also shown failing on a violation planted in a copy of the tree."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import house

SCREEN_STAGES = ("roceview.tui", "roceview.render", "roceview.commands")    # where rich and textual may be


def downward_violations(root: Path = house.REPO) -> list[str]:
    out = []
    for i in house.graph(root):
        if i.imported.split(".")[0] in house.SCREEN:
            continue
        (low, mine), (level, theirs) = house.stage(i.importer), house.stage(i.imported)
        if mine != theirs and level >= low:
            out.append(f"{i.importer}:{i.line} imports {i.imported}")
    return out


def core_files(root: Path = house.REPO) -> list[Path]:
    """Every roceview module but the screens' (tui/, render/, commands/)."""
    return [p for p in sorted((root / "roceview").rglob("*.py"))
            if house.package(house.module_name(p, root)) not in SCREEN_STAGES]


def unstaged_modules(root: Path = house.REPO) -> list[str]:
    return [m for m in (house.module_name(p, root) for p in house.source_files(root)) if not house.package(m)]


def screen_imports(root: Path = house.REPO, files: list[Path] | None = None) -> list[str]:
    files = core_files(root) + sorted((root / "dissectors").glob("*.py")) if files is None else files
    names = {house.module_name(p, root) for p in files}
    return [f"{i.importer} imports {i.imported}" for i in house.graph(root)
            if i.importer in names and i.imported.split(".")[0] in house.SCREEN]


def private_uses(root: Path = house.REPO) -> list[str]:
    return [f"{module}:{line} uses {what}" for module, line, what in house.private_uses(root)]


def import_cycles(root: Path = house.REPO) -> list[list[str]]:
    return house.cycles(house.graph(root))


def test_every_module_belongs_to_a_stage():
    assert unstaged_modules() == []


def test_stages_import_only_downward():
    assert downward_violations() == []


def test_no_module_uses_a_private_name_of_another_stage():
    assert private_uses() == []


def test_no_import_cycle_including_the_commands_cli_loads_by_name():
    assert import_cycles() == []


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(house.REPO)))
def test_the_core_imports_neither_rich_nor_textual(path):
    assert screen_imports(files=[path]) == []


@pytest.mark.parametrize("path", sorted((house.REPO / "dissectors").glob("*.py")), ids=lambda p: p.name)
def test_dissectors_import_nothing_from_roceview_rich_or_textual(path):
    name = house.module_name(path)
    assert [i.imported for i in house.graph() if i.importer == name
            and i.imported.split(".")[0] in ("roceview", *house.SCREEN)] == []


PLANTED = {
    "module of no stage": ("roceview/newthing.py", "x = 1\n", unstaged_modules, "roceview.newthing"),
    "downward by name": ("roceview/capture/planted.py",
                         "import importlib\nimportlib.import_module('roceview.analysis.analyzer')\n",
                         downward_violations, "roceview.capture.planted:2 imports roceview.analysis.analyzer"),
    "private module": ("roceview/render/planted.py", "from roceview.kernels import _fields_kernel\n", private_uses,
                       "roceview.kernels._fields_kernel"),
    "screen in live": ("roceview/live/planted.py", "import textual\n", screen_imports,
                       "roceview.live.planted imports textual"),
    "downward": ("roceview/kernels/planted.py", "from roceview.analysis.analyzer import Analyzer\n",
                 downward_violations, "roceview.kernels.planted:1 imports roceview.analysis.analyzer"),
    "private name imported": ("roceview/diagnose/planted.py", "from roceview.packets.read import _stderr_warn\n",
                              private_uses, "from roceview.packets.read import _stderr_warn"),
    "private name of a module": ("roceview/render/planted.py", "from roceview.packets import read\nread._stderr_warn\n",
                                 private_uses, "roceview.packets.read._stderr_warn"),
    "private attribute": ("roceview/engines/planted.py", "def f(analyzer):\n    return analyzer._held\n",
                          private_uses, "analyzer._held"),
    "cycle through cli": ("roceview/commands/planted.py", "from roceview.cli import main\n",
                          import_cycles, "roceview.commands.planted"),
    "screen in the core": ("roceview/analysis/planted.py", "import rich\n", screen_imports,
                           "roceview.analysis.planted imports rich"),
}


@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_each_rule_finds_a_violation_planted_in_a_copy_of_the_tree(rule, tmp_path):
    for top in ("roceview", "dissectors"):
        shutil.copytree(house.REPO / top, tmp_path / top, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.c", "*.h"))
    path, text, check, expected = PLANTED[rule]
    assert expected not in str(check(tmp_path))          # the copy keeps the rules
    (tmp_path / path).write_text(text)
    assert expected in str(check(tmp_path))
