"""DisplayFilter.select when no row of a batch matches (review of issue 17): `analyze --filter`
of a filter that matches nothing in a batch (`infiniband.lrh` on a RoCEv2 capture) raised
"cannot reshape array of size 0 into shape (0,newaxis)" from the (n, 16) address columns."""
from __future__ import annotations

import io

import numpy as np

from conftest import SAMPLES
from roceview.packets.batch import Batch
from roceview.cli import Environment, main
from roceview.filter import compile_filter

CLEAN = SAMPLES / "clean.pcap"


def test_selecting_no_row_gives_an_empty_batch_of_the_same_shapes():
    from roceview.packets.read import iter_batches

    b = Batch.concat(list(iter_batches([str(CLEAN)], prefetch=False)))
    empty = compile_filter("frame.number > 1000000").select(b)
    assert empty.n == 0 and empty.cols.keys() == b.cols.keys()
    for k, v in b.cols.items():
        assert empty.cols[k].shape == (0,) + v.shape[1:] and empty.cols[k].dtype == v.dtype, k
    assert np.array_equal(empty.cols["_src_addr"], b.select(np.zeros(b.n, bool)).cols["_src_addr"])


def test_analyze_filter_matching_nothing_is_an_empty_report_not_a_traceback():
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", str(CLEAN), "--filter", "infiniband.lrh"], Environment(stdout=out, stderr=err)) == 0, \
        err.getvalue()
    assert "0 packets" in out.getvalue()
