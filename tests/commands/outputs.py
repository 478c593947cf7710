"""What every command prints and writes, as SHA-256 digests, for the unchanged-output test.

`python tests/commands/outputs.py --write` records the digests of today's code in
`outputs.json`; the test (test_outputs_unchanged.py) runs the same commands and compares. A
change that is meant to alter an output re-records them and says so in its commit.

Each capture goes through `analyze` (report, --csv, --json), `dissect`, `dissect -V` and, for
the samples, `analyze --engine dask --csv` on one shared LocalCluster. The commands run in this
process through `roceview.cli.main`, with the working folder at the repository's root so the
paths printed are the same on every checkout.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REAL = REPO.parent / "shared" / "captures" / "real"
STORE = Path(__file__).with_name("outputs.json")
# Ten generated captures beside the samples: other seeds, the other mirror side, pcapng, scale.
GENERATED = [
    ("clean", "--seed", "7"), ("network-loss", "--mirror", "receiver", "--seed", "3"),
    ("incast", "--seed", "5"), ("pfc-storm", "--seed", "2"), ("rnr", "--scale", "2"),
    ("mixed-roce-versions", "--seed", "1"), ("psn-wrap", "--seed", "4"),
    ("pmtu-4096-cm", "--seed", "6"), ("capture-bad-icrc", "--seed", "8"),
    ("tail-timeout", "--mirror", "receiver"),
]


SCRUBBED: list[str] = []


def _digest(data: bytes) -> str:
    for folder in SCRUBBED:   # temporary folders' names differ run to run
        data = data.replace(folder.encode(), b"<tmp>")
    return hashlib.sha256(data).hexdigest()


def run(argv: list[str]) -> tuple[int, bytes]:
    """roceview's exit code and stdout for argv, run in this process."""
    from roceview.cli import main

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
        out.flush()
    return int(code), raw.getvalue() + err.getvalue().encode()


def _files_digest(folder: Path) -> dict[str, str]:
    return {p.name: _digest(p.read_bytes()) for p in sorted(folder.iterdir())}


def generated(folder: Path) -> list[str]:
    """The GENERATED captures written into folder, as paths relative to it."""
    names = []
    for i, (scenario, *options) in enumerate(GENERATED):
        name = f"gen{i}-{scenario}.{'pcapng' if i % 3 == 2 else 'pcap'}"
        code, _ = run(["generate", scenario, "-o", str(folder / name), *options])
        assert code == 0, (scenario, options)
        names.append(name)
    return names


def capture_outputs(path: str, scheduler: str | None = None) -> dict[str, object]:
    """Digests of each command's output for one capture (path as printed)."""
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        SCRUBBED.append(tmp)
        tmp = Path(tmp)
        code, text = run(["analyze", path, "--wide", "--csv", str(tmp / "csv"), "--json", str(tmp / "a.json")])
        result["analyze"] = [code, _digest(text)]
        result["analyze --csv"] = _files_digest(tmp / "csv")
        result["analyze --json"] = _digest((tmp / "a.json").read_bytes())
        for name, extra in (("dissect", []), ("dissect -V", ["-V"])):
            code, text = run(["dissect", path, *extra])
            result[name] = [code, _digest(text)]
        if scheduler:
            code, _ = run(["analyze", path, "--engine", "dask", "--scheduler", scheduler,
                           "--csv", str(tmp / "dask")])
            result["analyze --engine dask --csv"] = [code, _files_digest(tmp / "dask")]
    return result


def inputs(gen_folder: Path) -> list[tuple[str, str, bool]]:
    """(key, path to pass, use dask) for every capture: samples, real ones, generated."""
    found = [(f"captures/{p.name}", f"captures/{p.name}", True) for p in sorted((REPO / "captures").glob("*.pcap"))]
    if REAL.is_dir():
        # relative to the repository (the working folder): the report and JSON print the path,
        # and ../shared sits beside every checkout while its absolute place differs machine to machine
        found += [(f"real/{p.name}", os.path.relpath(p, REPO), False)
                  for p in sorted(REAL.iterdir()) if p.name != "MANIFEST.md"]
    found += [(f"generated/{name}", str(gen_folder / name), False) for name in generated(gen_folder)]
    return found


@contextlib.contextmanager
def fixed_terminal():
    """The working folder at the repository and an 80-column terminal, for stable text."""
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(REPO)
    os.environ.update(COLUMNS="80", LINES="24", TZ="UTC")
    try:
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)


def all_outputs() -> dict[str, dict]:
    from distributed import LocalCluster

    with fixed_terminal(), tempfile.TemporaryDirectory() as gen, \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        SCRUBBED.append(gen)
        return {key: capture_outputs(path, cluster.scheduler_address if dask else None)
                for key, path, dask in inputs(Path(gen))}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    STORE.write_text(json.dumps(all_outputs(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {STORE}")
