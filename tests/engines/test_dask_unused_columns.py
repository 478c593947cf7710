"""The columns a Dask read leaves out of its parts (dask_partition.UNUSED) are read by neither
the Analyzer nor the FactCollector: every output of the local engine is the same with them
taken from each batch the two are fed (as on the
workers: `frame` made again). A column they read, put in UNUSED, fails here."""
import pytest

import roceview
from roceview.analysis import Analyzer
from roceview.packets.batch import Batch
from roceview.capture.writer import write_pcap
from roceview.engines.dask.partition import UNUSED
from roceview.diagnose import FactCollector
from roceview.generate import generate
from roceview.render.export import CSV_FILES, write_csv_dir

# "frame" is made again on the worker from each row's frame index (dask_partition_run.chunks)
LEFT_OUT = tuple(name for name in UNUSED if name != "frame")
SCENARIOS = ("capture-bad-icrc", "double-mirror", "mixed-roce-versions", "pfc-storm", "pmtu-4096-cm",
             "network-loss", "incast")


def _without(batch: Batch, names) -> Batch:
    return Batch(batch.n, {k: v for k, v in batch.cols.items() if k not in names},
                 {k: v for k, v in batch.valid.items() if k not in names})


def _outputs(path, directory) -> tuple:
    result = roceview.analyze(path)
    write_csv_dir(result, directory)
    return tuple((directory / name).read_bytes() for name, _ in CSV_FILES), repr(result.facts)


def _unchanged(path, tmp_path, monkeypatch, names) -> bool:
    whole = _outputs(path, tmp_path / "whole")
    feed, collect = Analyzer.feed, FactCollector.feed
    last: dict = {}

    def stripped(batch: Batch) -> Batch:
        """One stripped batch for both: the Analyzer hands its flow ids to that very batch's facts."""
        if last.get("batch") is not batch:
            last["batch"], last["stripped"] = batch, _without(batch, names)
        return last["stripped"]
    monkeypatch.setattr(Analyzer, "feed", lambda self, batch, *a, **k: feed(self, stripped(batch), *a, **k))
    monkeypatch.setattr(FactCollector, "feed", lambda self, batch, *a, **k: collect(self, stripped(batch), *a, **k))
    ids = Analyzer.flow_ids
    monkeypatch.setattr(Analyzer, "flow_ids", lambda self, batch: ids(self, stripped(batch)))
    without = _outputs(path, tmp_path / "without")
    monkeypatch.undo()
    return whole == without


def _capture(tmp_path, scenario):
    cap = generate(scenario)
    path = tmp_path / f"{scenario}.pcap"
    write_pcap(path, cap.frames, cap.lengths, cap.ts_ns)
    return path


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_unused_columns_change_no_output(tmp_path, monkeypatch, scenario):
    assert _unchanged(_capture(tmp_path, scenario), tmp_path, monkeypatch, LEFT_OUT)


def test_unused_columns_change_no_output_of_a_real_capture(real_capture, tmp_path, monkeypatch):
    assert _unchanged(real_capture, tmp_path, monkeypatch, LEFT_OUT)


def test_the_check_sees_a_column_the_analysis_reads(tmp_path, monkeypatch):
    path = _capture(tmp_path, "capture-bad-icrc")
    assert not _unchanged(path, tmp_path, monkeypatch, LEFT_OUT + ("icrc_ok",))
    assert not _unchanged(path, tmp_path, monkeypatch, ("psn",))
