"""The per-flow memory work (issue 18) streams the CSV files a block at a time and keeps the
timeline's merged sums as its one part: what that must not change. A file stopped between two
of its pieces (a failed write, Ctrl-C) leaves the files it replaces as they were and no
temporary file; a view that asks for snapshots while feeding (the TUI) gets the same final
result as one that never asks."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roceview.errors import WriteError
from roceview.render import export

REPO = Path(__file__).resolve().parents[1]
NAMES = [name for name, _ in export.CSV_FILES]


class _Result:
    """Stands in for an AnalysisResult: each table attribute is its own name."""

    def __init__(self):
        for _, attr in export.CSV_FILES:
            setattr(self, attr, attr)


def _old_files(folder: Path) -> None:
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_bytes(b"old " + name.encode())


def _untouched(folder: Path) -> bool:
    return sorted(p.name for p in folder.iterdir()) == sorted(NAMES) and \
        all((folder / name).read_bytes() == b"old " + name.encode() for name in NAMES)


def test_a_write_failing_between_the_pieces_of_a_file_keeps_the_old_files(tmp_path, monkeypatch):
    """qps.csv and pfc.csv are complete temporary files, findings.csv is half written when the
    disk fills: no file is replaced and no temporary file is left."""
    out = tmp_path / "csv"
    _old_files(out)

    def pieces(table):
        yield b"header\n"
        yield b"x" * 100_000
        if table == "findings_table":
            raise OSError(28, "No space left on device")
        yield b"last\n"

    monkeypatch.setattr(export, "table_csv_chunks", pieces)
    with pytest.raises(WriteError, match="No space left"):
        export.write_csv_dir(_Result(), out)
    assert _untouched(out)


INTERRUPTED = r"""
import os, signal, sys
from roceview import interrupt
from roceview.render import export

interrupt.install()
given = [0]

def pieces(table):
    for _ in range(4):
        given[0] += 1
        if given[0] == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGINT)    # Ctrl-C between two pieces of one file
        yield b"y" * 200_000

class Result: pass
result = Result()
for _, attr in export.CSV_FILES:
    setattr(result, attr, attr)
export.table_csv_chunks = pieces
export.write_csv_dir(result, sys.argv[1])
print("not interrupted")
"""


@pytest.mark.parametrize("nth", [2, 7, 19])
def test_ctrl_c_between_the_pieces_of_a_file_exits_130_and_leaves_the_old_files(tmp_path, nth):
    out = tmp_path / "csv"
    _old_files(out)
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED, str(out), str(nth)], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "")
    assert _untouched(out)


def _outputs(capture: Path, snapshot_every: int) -> tuple:
    """The CSV and JSON bytes of `capture` fed in small chunks with a small timeline budget,
    asking for a snapshot every `snapshot_every` chunks (0: never), as the TUI does."""
    from roceview.analysis import Analyzer
    from roceview.packets.read import iter_batches
    from roceview.render.json_export import document_json

    an = Analyzer(bucket_ms=0.01)
    an.timeline.max_rows = 120                # merged into longer buckets several times
    for i, batch in enumerate(iter_batches([str(capture)], chunk_packets=100, warn=lambda m: None)):
        an.feed(batch)
        if snapshot_every and i % snapshot_every == 0:
            an.snapshot([str(capture)])
    result = an.finish(files=[str(capture)])
    return (an.timeline.bucket_ns, *(export.table_csv_bytes(getattr(result, attr)) for _, attr in export.CSV_FILES),
            document_json(result))


def test_snapshots_while_feeding_change_no_result(tmp_path):
    """Analyzer.snapshot() keeps the timeline's merged sums as its one part (Timeline.table);
    the first sends answering the timeouts are read across the same chunks either way."""
    capture = tmp_path / "t.pcap"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "tail-timeout", "--scale", "3", "-o",
                    str(capture)], cwd=REPO, check=True, capture_output=True, timeout=300)
    plain = _outputs(capture, 0)
    assert plain[0] > 10_000 and b"timeout_retransmit" in plain[4]     # bounded; timeouts found
    assert _outputs(capture, 1) == plain
    assert _outputs(capture, 3) == plain


def test_more_flows_than_the_timeline_budget_end_in_one_bucket_not_a_loop(monkeypatch):
    """Doubling the bucket merges rows of one flow only: once every row is in one bucket, more
    flows than max_rows // 2 keep a row each. The bound doubled forever then (1 M queue pairs
    under the default 2 M rows; counted here, so the old code fails rather than hangs)."""
    import numpy as np

    from roceview.analysis.timeline import Timeline

    merges = []
    original = Timeline._merged

    def counted(self, factor=1):
        merges.append(factor)
        assert len(merges) < 200, "the bound keeps doubling the bucket"
        return original(self, factor)

    monkeypatch.setattr(Timeline, "_merged", counted)
    timeline, n = Timeline(1000, max_rows=10), 20
    values = {"bytes": np.full(n, 100.0), "ecn_ce": None, "cnp_packets": None, "retransmitted_packets": None}
    for start in (0, 5_000):                    # 20 flows in one 1 us bucket, then in the next
        timeline.feed(np.arange(start, start + n, dtype=np.int64), np.arange(n, dtype=np.int64), values, n, True)
    table = timeline.table([f"f{i}" for i in range(n)])
    assert len(table) == n and set(np.asarray(table.data["bytes"]).tolist()) == {200}
    assert len(set(np.asarray(table.data["bucket_start"]).tolist())) == 1
