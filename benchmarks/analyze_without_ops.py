"""`roceview ARGS` with the operations' step skipped (OpTracker.feed a no-op): the B side of
the A/B timing of what ops.csv, op_stats and read_depth cost a whole `analyze` process.

    farm-bench -n 11 --vs "python benchmarks/analyze_without_ops.py analyze FILE" -- python -m roceview analyze FILE
"""
from __future__ import annotations

import sys

from roceview.analysis import ops
from roceview.cli import entry

ops.OpTracker.feed = lambda *a, **k: None

if __name__ == "__main__":
    sys.argv[0] = "roceview"
    entry()
