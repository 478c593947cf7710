"""`dissect -T fields -e FIELD` prints the value the display filter compares: on every sample
capture, each value printed for a packet, fed back as `FIELD == value`, selects that packet.
For the analysis flags this means `roceview.gap` prints how many PSNs are missing (what
`roceview.gap > 8` compares), `roceview.rtt_ack` the RTT in ns, and a flag without a value 1.
Up to PER_FIELD distinct values of each field are tried per capture (random.Random(seed))."""
from __future__ import annotations

import io
import random
from collections import defaultdict

import numpy as np
import pytest

from conftest import SAMPLES
from roceview.cli import Environment, main
from roceview.filter import compile_filter
from roceview.filter import field_names as F
from roceview.packets.batch import Batch
from roceview.render.field_text import FieldWriter

PER_FIELD = 12
DROPS = SAMPLES / "capture-drop.pcap"           # gaps of 2, 3 and 5 PSNs, RTT samples
FLAG_FIELDS = sorted(name for name, f in F.all_fields().items() if f.kind == F.FLAG)
# frame.time_delta_displayed is since the previous packet that PASSED the filter (tshark): fed back
# alone, a value printed with every packet shown is not the one the filter sees
VALUE_FIELDS = sorted(name for name, f in F.all_fields().items()
                      if f.kind != F.NONE and name != "frame.time_delta_displayed")
QUOTED = (F.STR, F.ABSTIME)


def _analyzed(path) -> Batch:
    """The capture's packets with the analysis flags, the finding kinds and the operation fields,
    as `dissect` reads them."""
    import roceview
    from roceview.analysis.annotate import analyzed_pairs
    from roceview.analysis.op_marks import operation_index
    from roceview.diagnose.evidence_frames import add_finding_kinds, kinds_by_frame
    from roceview.packets.read import iter_batches

    from roceview.packets.times import Clock

    pairs = ((None, b) for b in iter_batches([str(path)], prefetch=False))
    batch = Batch.concat([b for _, b in analyzed_pairs(pairs)])
    add_finding_kinds(batch, *kinds_by_frame(roceview.analyze(str(path))))
    operation_index([str(path)]).annotate(batch)
    clock = Clock()                 # the relative times, as dissect adds them
    clock.stamp(batch)
    clock.display(batch)
    return batch


def _printed(batch: Batch, names: list[str]) -> dict[str, dict[str, list[int]]]:
    """field -> printed value -> row numbers, one value per occurrence (-E occurrence=a)."""
    out: dict[str, dict[str, list[int]]] = {name: defaultdict(list) for name in names}
    writer = FieldWriter(names, ["separator=\t", "aggregator=|"])
    for row, line in enumerate(writer.lines(batch)):
        for name, cell in zip(names, line.split("\t")):
            for value in filter(None, cell.split("|")):
                out[name][value].append(row)
    return out


def test_every_field_prints_a_value_its_filter_selects(sample_capture):
    batch = _analyzed(sample_capture)
    pick = random.Random(sample_capture.name)
    wrong = []
    for name, by_value in _printed(batch, VALUE_FIELDS).items():
        values = sorted(by_value)
        for value in pick.sample(values, min(PER_FIELD, len(values))):
            text = f'{name} == "{value}"' if F.all_fields()[name].kind in QUOTED else f"{name} == {value}"
            keep = compile_filter(text).mask(batch)
            missed = [r for r in by_value[value] if not keep[r]]
            if missed:
                wrong.append(f"{text}: frames {batch.cols['frame'][missed[:5]].tolist()} not selected")
    assert not wrong, "\n".join(wrong[:20])


def test_every_flag_field_prints_a_value_its_filter_selects(sample_capture):
    batch = _analyzed(sample_capture)
    for name, by_value in _printed(batch, FLAG_FIELDS).items():
        for value, rows in by_value.items():
            keep = compile_filter(f"{name} == {value}").mask(batch)
            assert keep[rows].all(), f"{sample_capture.name}: {name} prints {value} on frames the filter skips"
        present = np.flatnonzero(compile_filter(name).mask(batch))
        assert sorted(r for rows in by_value.values() for r in rows) == present.tolist(), name


def test_gap_prints_the_missing_psns_and_rtt_ack_the_rtt():
    out = io.StringIO()
    assert main(["dissect", str(DROPS), "-Y", "roceview.gap", "-T", "fields", "-e", "roceview.gap"],
                Environment(stdout=out, stderr=io.StringIO())) == 0
    assert sorted(set(out.getvalue().split())) == ["2", "3", "5"]      # PSNs missing, not "1"
    batch = _analyzed(DROPS)
    printed = _printed(batch, ["roceview.gap", "roceview.rtt_ack"])
    for name, column in [("roceview.gap", "missing_psns"), ("roceview.rtt_ack", "rtt_ns")]:
        assert printed[name], name
        for value, rows in printed[name].items():
            assert batch.cols[column][rows].tolist() == [int(value)] * len(rows), name


@pytest.mark.parametrize("value_column, flag", [("missing_psns", "roceview.gap"), ("rtt_ns", "roceview.rtt_ack")])
def test_a_flag_without_its_value_column_prints_1(value_column, flag):
    """A batch decoded without the value column: the filter compares 1, so 1 is printed."""
    batch = _analyzed(DROPS)
    cols = {k: v for k, v in batch.cols.items() if k != value_column}
    bare = Batch(batch.n, cols, {k: v for k, v in batch.valid.items() if k != value_column})
    printed = _printed(bare, [flag])[flag]
    assert set(printed) == {"1"}
    assert compile_filter(f"{flag} == 1").mask(bare)[printed["1"]].all()
