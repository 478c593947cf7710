"""The operations' modules share their helpers openly: the run-start grouping of a sorted key
column is one function (roceview.arrays.run_starts, also the diagnoser's), and no ops module
reaches into another's private names (a private name is free to change under its module)."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from roceview import arrays
from roceview.diagnose import flow_arrays

ANALYSIS = Path(__file__).resolve().parents[2] / "roceview" / "analysis"


def test_run_starts_is_one_shared_helper():
    sid = np.array([3, 3, 5, 5, 5, 2, 7], np.int64)
    assert arrays.run_starts(sid).tolist() == [0, 2, 5, 6]
    assert arrays.run_starts(sid, np.array([0, 1, 1, 1, 1, 1, 1])).tolist() == [0, 1, 2, 5, 6]
    assert arrays.run_starts(sid[:0]).tolist() == []
    starts, stops = arrays.runs(sid)
    assert starts.tolist() == [0, 2, 5, 6] and stops.tolist() == [2, 5, 6, 7]
    assert flow_arrays.run_starts is arrays.run_starts       # the diagnoser's name, the same function


def private_imports(path: Path) -> list[str]:
    """Names starting with '_' that `path` imports from another roceview module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("roceview"):
            out += [f"{path.name}:{node.lineno} {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in ("ob", "oc", "om"):
            out.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return out


def test_ops_modules_use_no_private_name_of_another():
    assert [hit for p in sorted(ANALYSIS.glob("ops*.py")) for hit in private_imports(p)] == []
