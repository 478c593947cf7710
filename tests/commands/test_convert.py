"""`roceview convert`: the packets table as Parquet, written atomically."""
import io
from pathlib import Path

import pandas as pd
import pytest

import roceview
from roceview.cli import Environment, main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "captures" / "incast.pcap"


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, Environment(stdout=out, stderr=err))
    return code, out.getvalue(), err.getvalue()


def test_parquet_holds_the_packets_table(tmp_path):
    pytest.importorskip("pyarrow")
    code, _, err = run(["convert", str(SAMPLE), "-o", str(tmp_path / "p.parquet")])
    assert code == 0 and err.startswith("wrote ")
    back = pd.read_parquet(tmp_path / "p.parquet")
    table = roceview.read_packets(str(SAMPLE))
    assert list(back.columns) == list(table.columns)
    assert len(back) == len(table)
    for col in ("frame", "psn", "dest_qp", "ecn", "opcode", "pfc_enable"):
        assert back[col].astype("Int64").equals(table[col].astype("Int64")), col
    assert back["src_ip"].astype(str).tolist() == table["src_ip"].astype(str).tolist()


def test_unwritable_output_is_one_line_and_exit_2(tmp_path):
    pytest.importorskip("pyarrow")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run(["convert", str(SAMPLE), "-o", str(blocker / "p.parquet")])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == [blocker]


def test_dash_writes_parquet_to_standard_output_and_no_file(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    import os
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "roceview", "convert", str(SAMPLE), "-o", "-"],
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(pd.read_parquet(io.BytesIO(proc.stdout))) == len(roceview.read_packets(str(SAMPLE)))
    assert list(tmp_path.iterdir()) == []
