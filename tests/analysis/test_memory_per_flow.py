"""Memory per flow (issue 18: `analyze` and `live` over 100 k queue pairs within 1 GiB): the
structures that held kilobytes per flow, checked for their shape, never for RSS or time
(benchmarks/bench_live.py qps measures the bytes per flow).

The per-flow memory work streams the CSV files a block at a time and keeps the
timeline's merged sums as its one part: what that must not change. A file stopped between two
of its pieces (a failed write, Ctrl-C) leaves the files it replaces as they were and no
temporary file; a view that asks for snapshots while feeding (the TUI) gets the same final
result as one that never asks."""
from __future__ import annotations

from pathlib import Path
import numpy as np
import pytest
from roceview.analysis.sends import PAGE, WINDOW, FirstSends
import os
import subprocess
import sys
from roceview.errors import WriteError
from roceview.render import export


REPO = Path(__file__).resolve().parents[2]
_NONE = np.iinfo(np.int64).min


class DenseSends:
    """The dense ring FirstSends replaced (WINDOW slots per flow): the reference of its answers."""

    def __init__(self, n_flows: int):
        self.ts = np.zeros((n_flows, WINDOW), np.int64)
        self.u = np.full((n_flows, WINDOW), _NONE, np.int64)
        self.idx = np.zeros((n_flows, WINDOW), np.int64)

    def record(self, flow, u, ts, idx) -> None:
        slot = u & (WINDOW - 1)
        self.ts[flow, slot], self.u[flow, slot], self.idx[flow, slot] = ts, u, idx

    def original(self, flow, u, high):
        slot = u & (WINDOW - 1)
        ok = (u > high - WINDOW) & (self.u[flow, slot] == u)
        return np.where(ok, self.ts[flow, slot], -1), np.where(ok, self.idx[flow, slot], -1)


@pytest.mark.parametrize("seed", range(3))
def test_paged_first_sends_answer_as_the_dense_ring(seed):
    rng = np.random.default_rng(seed)
    n_flows = 40
    paged, dense = FirstSends(), DenseSends(n_flows)
    paged.grow(n_flows)
    next_u = rng.integers(-5, 3 * WINDOW, n_flows)           # some flows start far into their PSNs
    row = 0
    for _ in range(30):                                       # chunks
        flow = rng.integers(0, n_flows, 200)
        steps = rng.choice([1, 1, 1, 2, 40, 300], len(flow))  # in order, a gap, beyond the window
        u = np.empty(len(flow), np.int64)
        for i, f in enumerate(flow.tolist()):                 # increasing PSNs per flow
            next_u[f] += steps[i]
            u[i] = next_u[f]
        ts, idx = np.arange(row, row + len(flow)) * 1000, np.arange(row, row + len(flow))
        row += len(flow)
        paged.record(flow, u, ts, idx)
        dense.record(flow, u, ts, idx)
        sent = rng.integers(0, row, 300) % len(flow)            # sends of this chunk, and any PSNs
        ask = np.r_[flow[sent], rng.integers(0, n_flows, 300)]
        high = next_u[ask]
        asked = np.r_[u[sent], high[300:] - rng.integers(0, WINDOW + 50, 300)]
        empty = np.zeros(0, np.int64)
        got = paged.original(ask, asked, high, empty, empty, empty, empty)
        want = dense.original(ask, asked, high)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert (got[0] >= 0).any()                            # the test asks about sends it has


def test_a_flow_that_sent_a_few_psns_holds_a_page_not_a_whole_ring():
    """100 k queue pairs of ~10 data packets each: dense rings were 24 B x 256 = 6 kB per flow."""
    n_flows = 1000
    sends = FirstSends()
    sends.grow(n_flows)
    flow = np.repeat(np.arange(n_flows), 10)
    u = np.tile(np.arange(10), n_flows) + 1_000_000
    sends.record(flow, u, u * 7, u)
    held = sum(a.nbytes for a in (sends.ts, sends.u, sends.idx, sends.page))
    assert sends.n_pages <= 2 * n_flows
    assert held / n_flows <= 1.25 * 2 * 24 * PAGE + 64 < 24 * WINDOW / 5   # dense: 6144 B a flow


def test_a_flow_cycling_its_ring_keeps_at_most_one_ring_of_pages():
    sends = FirstSends()
    sends.grow(1)
    for k in range(10):
        u = np.arange(k * 100, (k + 1) * 100)
        sends.record(np.zeros(len(u), np.int64), u, u, u)
    assert sends.n_pages == WINDOW // PAGE


def test_csv_files_are_written_a_block_at_a_time(tmp_path, monkeypatch):
    """write_files takes an iterable of bytes and writes it as it comes; the CSV writer gives
    one (a 100 k-queue-pair timeline.csv is 140 MB: it was held whole, then joined)."""
    from roceview.capture.writer import write_files
    from roceview.render import export

    monkeypatch.setattr(export, "C_BLOCK_ROWS", 1000)
    n = 4500
    table = _timeline_table(n)
    pieces = list(export.table_csv_chunks(table))
    assert len(pieces) == 1 + 5                             # the header, then 5 blocks of rows
    assert b"".join(pieces) == export.table_csv_bytes(table)
    assert b"".join(pieces).count(b"\n") == n + 1
    seen = []

    def made():
        for piece in pieces:
            seen.append(len(piece))
            yield piece

    write_files([(tmp_path / "t.csv", made)])
    assert (tmp_path / "t.csv").read_bytes() == b"".join(pieces) and len(seen) == len(pieces)


def _timeline_table(n: int):
    from roceview.analysis.tables import TIMELINE_COLUMNS, Table

    return Table(TIMELINE_COLUMNS, {"bucket_start": np.arange(n, dtype=np.int64) * 1_000_000,
                                     "flow": [f"10.0.0.{i % 7}>10.0.0.9:0x{i:06x}" for i in range(n)],
                                     "bytes": np.arange(n, dtype=np.int64), "gbps": np.arange(n) / 7.0,
                                     "ecn_ce": np.zeros(n, np.int64), "cnp_packets": np.ones(n, np.int64),
                                     "retransmitted_packets": np.arange(n, dtype=np.int64) % 3})


def _sample_result(name: str = "incast.pcap"):
    from roceview.api import analyze

    return analyze(str(REPO / "captures" / name))


def test_diagnoser_reads_flow_rows_from_the_columns_as_the_dicts_they_replace():
    from roceview.diagnose.config import DEFAULTS
    from roceview.diagnose.context import Context, FlowRow, _rows

    result = _sample_result()
    ctx = Context(result, DEFAULTS, result.facts)
    rows = _rows(result.flows_table)
    assert ctx.flow_names == [r["flow"] for r in rows] and len(ctx.flow) == len(rows) > 1
    assert list(ctx.flow) == ctx.flow_names and "no such flow" not in ctx.flow
    for r in rows:
        got = ctx.flow[r["flow"]]
        assert isinstance(got, FlowRow)                   # no dict per flow
        assert repr(dict(got)) == repr(r) and got.get("nothing") is None      # repr: NaN == NaN
        assert all(type(got[k]) is type(v) for k, v in r.items())   # Python int/float/str, as tolist
    assert repr({n: dict(f) for n, f in ctx.flow.items()}) == repr({r["flow"]: r for r in rows})
    with pytest.raises(KeyError):
        ctx.flow["no such flow"]


def test_host_macs_are_gathered_once_and_per_flow_facts_keep_no_dict():
    from roceview.diagnose.config import DEFAULTS
    from roceview.diagnose.context import Context

    result = _sample_result()
    ctx = Context(result, DEFAULTS, result.facts)
    assert ctx.host_macs() is ctx.host_macs() and ctx.host_macs()
    ff = next(iter(ctx.flow_facts.values()))
    assert not hasattr(ff, "__dict__") and not hasattr(result.facts.classes[0], "__dict__")


def test_the_timeline_table_holds_its_sums_once_and_feeding_after_it_changes_nothing():
    """table() keeps the merged sums as its one part (the live TUI asks for tables while
    feeding): later tables, and when the rows outgrow the budget, are as without the call."""
    from roceview.analysis.timeline import Timeline

    rng = np.random.default_rng(1)
    ts = np.sort(rng.integers(0, 200_000, 600))
    flow = rng.integers(0, 5, len(ts))
    values = {"bytes": rng.integers(1, 1000, len(ts)).astype(float), "ecn_ce": None,
              "cnp_packets": None, "retransmitted_packets": None}
    asked, plain = Timeline(1000, max_rows=300), Timeline(1000, max_rows=300)
    names = [f"f{i}" for i in range(5)]
    for lo in range(0, len(ts), 100):
        sl = slice(lo, lo + 100)
        for t in (asked, plain):
            t.feed(ts[sl], flow[sl], {k: v if v is None else v[sl] for k, v in values.items()}, 5, True)
        table = asked.table(names)
        assert len(asked.parts) == 1 and np.shares_memory(table.data["bytes"], asked.parts[0][2])
    a, b = asked.table(names), plain.table(names)
    assert asked.bucket_ns == plain.bucket_ns > 1000                # bounded at the same feeds
    for c in a.columns:
        assert np.array_equal(np.asarray(a.data[c]), np.asarray(b.data[c])) if c != "flow" \
            else list(a.data[c]) == list(b.data[c])


def test_the_json_document_is_written_a_block_at_a_time(tmp_path, monkeypatch):
    """100 k queue pairs' --json document is 470 MB: built whole and joined, it peaked at 2.2 GB."""
    import io
    import json

    from roceview.render import cells, export, json_export

    result = _sample_result()
    whole = json_export.document_json(result)
    monkeypatch.setattr(json_export, "BLOCK_BYTES", 4096)      # a few rows a piece
    monkeypatch.setattr(cells, "BLOCK_BYTES", 4096)
    pieces = list(json_export.document_json_chunks(result))
    assert len(pieces) >= 2 + 3 * len(json_export.TABLES)
    assert b"".join(pieces) == whole and json.loads(whole)["summary"] == result.summary
    export.write_json(result, tmp_path / "r.json")
    out = io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="ascii")          # its .buffer gets the bytes
    export.write_json(result, "-", stdout)
    assert (tmp_path / "r.json").read_bytes() == out.getvalue() == whole + b"\n"
    text = io.StringIO()                                       # a text stream without a buffer
    export.write_json(result, "-", text)
    assert text.getvalue().encode() == whole + b"\n"
    table = _timeline_table(2000)
    rows = list(json_export.table_json_chunks(table))
    assert len(rows) == 1 + 8 + 1 and b"".join(rows) == json_export.table_json(table)   # 256 rows a block
    assert json.loads(b"".join(rows)) == json.loads(json.dumps(table.records()))


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
