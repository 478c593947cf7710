"""Run the command line in this process (roceview.cli.main) with captured stdout and stderr."""
from __future__ import annotations

import io

from roceview.cli import Environment, main


def run(*argv) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `roceview ARGV...` (each argument str()'d)."""
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def run_err(*argv) -> tuple[int, str]:
    """Exit status and stderr of `roceview ARGV...` (stdout dropped)."""
    code, _, err = run(*argv)
    return code, err
