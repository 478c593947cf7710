"""The house's import graph, read from the source (ast), for the layout rules in
test_layout.py. Every import counts, at module level or inside a function, and so do the
commands `cli` loads by name (importlib.import_module)."""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The stages, lowest first. A module may import the modules of its own stage (package) and of
# any stage below it; the shared utilities at the bottom serve every stage.
LAYERS = [
    ["dissectors"],
    ["roceview.errors", "roceview.units", "roceview.arrays", "roceview.interrupt"],
    ["roceview.kernels"],
    ["roceview.capture"],
    ["roceview.packets", "roceview.generate"],
    ["roceview.filter"],
    ["roceview.analysis"],
    ["roceview.diagnose"],
    ["roceview.render", "roceview.engines"],
    ["roceview.api"],
    ["roceview.live", "roceview.tui"],
    ["roceview.commands"],
    ["roceview.cli"],
    ["roceview.__main__", "roceview"],
]
SCREEN = ("rich", "textual")
# Private names of other libraries that roceview reads on purpose (not another stage's)
THIRD_PARTY_PRIVATE = {"_data": "the values of a pandas masked array (render/lines.py: no copy)"}


@dataclass(frozen=True)
class Import:
    importer: str      # module name
    imported: str      # module name (a package's __init__ is the package's name)
    names: tuple       # the names taken from it (from-imports), else ()
    line: int


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(root: Path = REPO) -> list[Path]:
    return sorted(p for top in ("roceview", "dissectors") for p in (root / top).rglob("*.py"))


def _resolve(importer: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, modules: set[str], root: Path = REPO) -> list[Import]:
    """Every roceview/dissectors import in the file; `from pkg import sub` counts as an import
    of pkg.sub where sub is a module."""
    importer = module_name(path, root)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [Import(importer, a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(importer, node, path.name == "__init__.py")
            for a in node.names:
                sub = f"{source}.{a.name}"
                if sub in modules:
                    found.append(Import(importer, sub, (), node.lineno))
                else:
                    found.append(Import(importer, source, (a.name,), node.lineno))
        found += [Import(importer, m, (), node.lineno) for m in _loaded_by_name(node, modules)]
    return [i for i in found if i.imported.split(".")[0] in ("roceview", "dissectors", *SCREEN)]


def _loaded_by_name(node: ast.AST, modules: set[str]) -> list[str]:
    """Modules a call loads by name, an edge no import statement shows: import_module("x"),
    __import__("x"), import_module(f"roceview.commands.{name}") (every module under that
    prefix: cli loads its commands so), and "module:attribute" strings (the TUI's screens)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w.]+:\w+", node.value):
        name = node.value.split(":")[0]
        return [name] if name in modules else []
    if not (isinstance(node, ast.Call) and node.args and ast.unparse(node.func).split(".")[-1] in
            ("import_module", "__import__")):
        return []
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = arg.values[0].value
        return sorted(m for m in modules if m.startswith(prefix) and m != prefix.rstrip("."))
    return []


def graph(root: Path = REPO) -> list[Import]:
    """Every import of the tree at root; the repository's own is read once per test session
    (the per-file tests ask for it a hundred times), a copy of the tree each time."""
    if root == REPO:
        return list(_repo_graph())
    return _graph(root)


def _graph(root: Path) -> list[Import]:
    files = source_files(root)
    modules = {module_name(p, root) for p in files}
    return [i for p in files for i in imports_of(p, modules, root)]


@functools.cache
def _repo_graph() -> tuple[Import, ...]:
    return tuple(_graph(REPO))


# stages that are one module, not a folder: a module below them is no part of them
SINGLE = {"roceview", "roceview.__main__"}


def stage(module: str) -> tuple[int, str]:
    """(layer, stage) of a module: the longest stage name it starts with; (-1, "") for none."""
    best = (-1, "")
    for level, stages in enumerate(LAYERS):
        for name in stages:
            inside = module == name or (module.startswith(name + ".") and name not in SINGLE)
            if inside and len(name) > len(best[1]):
                best = (level, name)
    return best


def package(module: str) -> str:
    """The stage a module belongs to; engines.dask and the like count as their top stage."""
    return stage(module)[1]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    succ: dict[str, set[str]] = {}
    for e in edges:
        if e.imported.split(".")[0] in SCREEN or e.importer == e.imported:
            continue
        succ.setdefault(e.importer, set()).add(e.imported)
    index, low, onstack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        onstack.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return out


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def private_definitions(root: Path = REPO) -> dict[str, set[str]]:
    """Per stage, the private names its modules define: functions, classes, module globals,
    methods and the attributes a method assigns (self._x = ...)."""
    out: dict[str, set[str]] = {}
    for path in source_files(root):
        names = out.setdefault(package(module_name(path, root)), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {k: {n for n in v if n.startswith("_") and not _dunder(n)} for k, v in out.items()}


def private_uses(root: Path = REPO) -> list[tuple[str, int, str]]:
    """(module, line, what) for each use of another stage's private name: imported by name
    (`from roceview.api import _config`), read off one of its modules (`packets._merged`), or
    read off an object (`timeline._parts`, `super()._new_classes`) where only other stages
    define that name."""
    files = source_files(root)
    modules = {module_name(p, root) for p in files}
    defined = private_definitions(root)
    others = {stage: set().union(*(v for k, v in defined.items() if k != stage)) for stage in defined}
    found = []
    for path in files:
        me = module_name(path, root)
        mine = package(me)
        tree = ast.parse(path.read_text())
        aliases, foreign = {}, set()
        for i in imports_of(path, modules, root):
            ours = i.imported.split(".")[0] in ("roceview", "dissectors")
            private = i.names[0] if i.names else i.imported.split(".")[-1]
            if ours and private.startswith("_") and not _dunder(private) and package(i.imported) != mine:
                found.append((me, i.line, f"from {i.imported} import {private}" if i.names else i.imported))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] not in ("roceview", "dissectors"):
                        foreign.add(a.asname or a.name.split(".")[0])
                    elif a.asname:
                        aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    if f"{node.module}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elsewhere = others[mine]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or _dunder(node.attr):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in aliases:
                if package(aliases[base.id]) != mine:
                    found.append((me, node.lineno, f"{aliases[base.id]}.{node.attr}"))
            elif isinstance(base, ast.Name) and base.id in foreign or node.attr in THIRD_PARTY_PRIVATE:
                continue
            elif node.attr in elsewhere and node.attr not in defined.get(mine, set()):
                found.append((me, node.lineno, f"{ast.unparse(base)}.{node.attr}"))
            elif isinstance(base, ast.Call) and ast.unparse(base.func) == "super" and node.attr in elsewhere:
                found.append((me, node.lineno, f"super().{node.attr}"))
    return found
