"""A display filter's memory does not grow with the number of set items or `||` clauses: a
generated filter of hundreds of values (a list of QPs, frames) is evaluated in place. Before,
both stacked one bool array per item (np.logical_or.reduce of a list): 1,000 values over a
million packets held 1 GB and took 3-7 s; now one np.isin (sets) or an in-place OR (chains)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from roceview.packets.batch import Batch
from roceview.filter import compile_filter

N = 100_000
VALUES = range(0, 7 * 300, 7)


def _batch() -> Batch:
    qp = (np.arange(N, dtype=np.uint32) * 2654435761 % (1 << 24)).astype(np.uint32)
    return Batch(N, {"dest_qp": qp, "udp_sport": (qp & 0xFFFF).astype(np.uint16), "udp_dport": np.full(N, 4791, np.uint16)},
                 {"dest_qp": qp % 5 != 0})


@pytest.mark.parametrize("text", [
    "infiniband.bth.destqp in {%s}" % ", ".join(map(str, VALUES)),
    " || ".join(f"infiniband.bth.destqp == {v}" for v in VALUES),
    "udp.port in {%s}" % ", ".join(map(str, VALUES)),                       # two occurrences
    "!(%s)" % " && ".join(f"infiniband.bth.destqp != {v}" for v in VALUES),
], ids=["set", "or-chain", "set-two-occurrences", "not-and-chain"])
def test_memory_does_not_grow_with_the_items(text):
    b = _batch()
    f = compile_filter(text)
    tracemalloc.start()
    try:
        got = f.mask(b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * N, f"peak {peak} bytes for {N} rows"                   # a few bool / index arrays, not 300 of them
    qp, valid = b.cols["dest_qp"], b.valid["dest_qp"]
    if text.startswith("udp"):
        want = np.isin(b.cols["udp_sport"], list(VALUES)) | np.isin(b.cols["udp_dport"], list(VALUES))
    elif text.startswith("!"):                  # != is false where the field is absent
        want = ~valid | np.isin(qp, list(VALUES))
    else:
        want = valid & np.isin(qp, list(VALUES))
    assert np.array_equal(got, want)
    assert 0 < got.sum() < N
