"""`roceview analyze` decodes only the declared columns it reads (consts.PROJECTIONS["analysis"]).

Two things must hold for that to be safe:
* the analysis and the diagnoser never look for a declared column the projection leaves out
  (they would silently see it as absent): checked by recording every lookup;
* the results are the same as with every column decoded: every table, the summary and the
  findings, on every sample, every real capture and the tshark zoo, in small chunks too.
"""
from __future__ import annotations

import pandas as pd
import pytest

from roceview.analysis import Analyzer
from roceview.kernels import consts
from roceview.packets.decode import LAYOUT, LAYOUTS
from roceview.diagnose import FactCollector, find
from roceview.packets.read import iter_batches
import roceview.packets.read as packets

from conftest import REAL, SAMPLES, capture_files

CORPUS = capture_files(SAMPLES) + capture_files(REAL)
TABLES = ("flows", "pfc", "events", "timeline", "findings")


def _analyze(path, projection, chunk=1 << 16):
    analyzer, facts = Analyzer(), FactCollector()
    for batch in iter_batches([str(path)], chunk_packets=chunk, warn=lambda m: None, prefetch=False,
                              projection=projection):
        analyzer.feed(batch)
        facts.feed(batch)
    result = analyzer.finish(files=[str(path)])
    result.facts = facts.finish()
    result.set_findings(find(result, None))
    return result


def _assert_same_results(path, chunk):
    full, projected = _analyze(path, None, chunk), _analyze(path, "analysis", chunk)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(projected, name), getattr(full, name), obj=f"{path.name}: {name}")
    assert projected.summary == full.summary


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_projected_decode_gives_the_same_analysis(path):
    _assert_same_results(path, 1 << 16)


@pytest.mark.parametrize("path", [p for p in CORPUS if p.stat().st_size > 20_000][:4], ids=lambda p: p.name)
def test_projected_decode_gives_the_same_analysis_in_small_chunks(path):
    _assert_same_results(path, 997)


def test_projected_decode_on_the_zoo(tmp_path):
    """Every encapsulation, link type, PFC/PAUSE/LLDP and extended header tshark is compared on."""
    from helpers.zoo import build_zoo, zoo_ts
    from roceview.capture.writer import pcapng_bytes

    frames, ifaces, _ = build_zoo()
    path = tmp_path / "zoo.pcapng"
    path.write_bytes(pcapng_bytes(frames, [zoo_ts(i) for i in range(len(frames))],
                                  interfaces=[(1, 9), (197, 9), (113, 6), (276, 9)], if_ids=ifaces))
    _assert_same_results(path, 64)


class _Recording(dict):
    """A batch's column dict that notes every name looked up and not there."""

    def __init__(self, data, missing: set):
        super().__init__(data)
        self.missing = missing

    def _note(self, key):
        if not super().__contains__(key):
            self.missing.add(key)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)


def test_the_analysis_reads_no_declared_column_outside_its_projection(monkeypatch):
    missing: set = set()
    decode = packets.decode_chunk

    def recording(*args, **kwargs):
        batch = decode(*args, **kwargs)
        batch.cols, batch.valid = _Recording(batch.cols, missing), _Recording(batch.valid, missing)
        return batch

    monkeypatch.setattr(packets, "decode_chunk", recording)
    for path in CORPUS:
        _analyze(path, "analysis")
    assert CORPUS
    left_out = set(LAYOUT) - set(LAYOUTS["analysis"].columns)
    assert left_out, "the projection should leave columns out"
    looked_for = {name.lstrip("_") for name in missing} & left_out
    assert not looked_for, f"the analysis reads {sorted(looked_for)}: add them to consts.PROJECTIONS['analysis']"


def test_the_projection_names_declared_columns():
    for name in consts.PROJECTIONS["analysis"]:
        assert name in LAYOUT, name
    assert set(consts.KERNEL_COLUMNS) <= set(consts.PROJECTIONS["analysis"])
