"""The compiled flow index and grouping (capture/_flowindex.c) agree with the numpy ones.

analysis/flows.py `new_registry()` uses the C index when the kernels are built; the numpy
FlowRegistry stays the fallback. Both must give the same flow ids (order of first appearance),
the same registry columns, and `find` must register nothing. chunk.py's grouping uses the C
counting sort: it must be numpy's stable argsort.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from roceview.analysis.flows import CompiledFlowRegistry, FlowRegistry, address_words
from roceview.kernels import backend as kernels
from roceview.packets.read import iter_batches

from conftest import REAL, SAMPLES, capture_files


@pytest.fixture(scope="module")
def c_kernels():
    if kernels.flow_ids is None:
        if os.environ.get("ROCEVIEW_REQUIRE_CKERNEL") == "1":
            pytest.fail("the C kernel is not built but ROCEVIEW_REQUIRE_CKERNEL=1", pytrace=False)
        pytest.skip("the C kernel is not built")
    return kernels


def _both_lookup(chunks):
    regs = FlowRegistry(), CompiledFlowRegistry(kernels.flow_ids)
    for src, dst, qp in chunks:
        (a, na), (b, nb) = (r.lookup(src, dst, qp) for r in regs)
        assert na == nb
        assert np.array_equal(a, b)
    numpy_reg, c_reg = regs
    assert numpy_reg.n == c_reg.n
    for name in ("src", "dst", "qp"):
        assert np.array_equal(getattr(numpy_reg, name), getattr(c_reg, name)), name
    assert numpy_reg.endpoint_names() == c_reg.endpoint_names()
    return regs


@pytest.mark.parametrize("path", capture_files(SAMPLES) + capture_files(REAL), ids=lambda p: p.name)
def test_same_flow_ids_on_every_capture(path, c_kernels):
    chunks = [(address_words(b, None, "src"), address_words(b, None, "dst"), b.cols["dest_qp"].astype(np.uint32))
              for b in iter_batches(str(path), chunk_packets=500, prefetch=False, warn=lambda m: None)]
    _both_lookup(chunks)


def test_same_flow_ids_through_growth_and_bursts(c_kernels):
    """50 k flows (the slot table and the registry columns double many times), keys that differ
    in one word only, bursts of one flow, IPv4-mapped and full 128-bit addresses."""
    rng = np.random.default_rng(7)
    n_flows = 50_000
    src = rng.integers(0, 2**63, size=(n_flows, 2), dtype=np.uint64)
    src[: n_flows // 2, 0] = 0                                        # IPv4-mapped: high word 0
    dst = src.copy()
    dst[:, 1] ^= np.uint64(1)                                         # one bit from the source
    qp = rng.integers(0, 1 << 24, size=n_flows, dtype=np.uint32)
    qp[::7] = qp[0]                                                   # same QP, other addresses
    rows = np.concatenate([rng.integers(0, n_flows, size=150_000), np.repeat(rng.integers(0, n_flows, 50), 40)])
    chunks = [(src[r], dst[r], qp[r]) for r in np.array_split(rows, 9)]
    numpy_reg, c_reg = _both_lookup(chunks)
    assert c_reg.n == len(np.unique(rows)) > 40_000


def test_find_registers_nothing(c_kernels):
    reg = CompiledFlowRegistry(kernels.flow_ids)
    words = np.arange(40, dtype=np.uint64).reshape(10, 2, 2)
    src, dst, qp = words[:, 0], words[:, 1], np.arange(10, dtype=np.uint32)
    assert (reg.find(src, dst, qp) == -1).all() and reg.n == 0
    ids, before = reg.lookup(src[:6], dst[:6], qp[:6])
    assert before == 0 and ids.tolist() == list(range(6))
    assert reg.find(src, dst, qp).tolist() == [0, 1, 2, 3, 4, 5, -1, -1, -1, -1] and reg.n == 6


def test_stable_order_is_numpys_stable_argsort(c_kernels):
    rng = np.random.default_rng(3)
    for n_keys, n in ((1, 10), (384, 65_536), (70_000, 65_536), (5, 0)):
        key = rng.integers(0, n_keys, size=n).astype(np.int64)
        counts = np.bincount(key, minlength=n_keys)
        assert np.array_equal(kernels.stable_order(key, counts), np.argsort(key, kind="stable"))


def test_stable_order_refuses_keys_it_could_write_out_of_bounds_with(c_kernels):
    key = np.array([0, 3, 1], dtype=np.int64)
    with pytest.raises(ValueError):
        kernels.stable_order(key, np.array([1, 1, 0], dtype=np.int64))          # key 3: no count
    with pytest.raises(ValueError):
        kernels.stable_order(np.array([0, -1], dtype=np.int64), np.array([2], dtype=np.int64))
    with pytest.raises(ValueError):
        kernels.stable_order(np.array([0, 0, 1], dtype=np.int64), np.array([1, 2], dtype=np.int64))   # 2 rows of 0
    with pytest.raises(ValueError):
        kernels.stable_order(np.array([0], dtype=np.int64), np.array([5, -4], dtype=np.int64))


def test_find_after_the_table_grew_and_empty_chunks(c_kernels):
    rng = np.random.default_rng(5)
    src = rng.integers(0, 2**63, size=(5000, 2), dtype=np.uint64)
    dst, qp = src[::-1].copy(), np.arange(5000, dtype=np.uint32)
    regs = FlowRegistry(), CompiledFlowRegistry(kernels.flow_ids)
    for reg in regs:
        assert reg.lookup(src[:0], dst[:0], qp[:0])[0].tolist() == []
        reg.lookup(src[:3000], dst[:3000], qp[:3000])
    probe = np.r_[0:10, 2990:3010]
    found = [reg.find(src[probe], dst[probe], qp[probe]) for reg in regs]
    assert np.array_equal(*found) and (found[0] >= 0).sum() == 20 and all(reg.n == 3000 for reg in regs)


def test_both_registries_take_qp_as_uint32(c_kernels):
    words = np.arange(12, dtype=np.uint64).reshape(3, 2, 2)
    src, dst = np.repeat(words[:1, 0], 3, axis=0), np.repeat(words[:1, 1], 3, axis=0)
    qp = np.array([5, 2**32 + 5, -1], np.int64)
    got = [(reg.lookup(src, dst, qp)[0].tolist(), reg.qp.tolist())
           for reg in (FlowRegistry(), CompiledFlowRegistry(kernels.flow_ids))]
    assert got[0] == got[1] == ([0, 0, 1], [5, 2**32 - 1])


def test_the_flow_ids_kernel_refuses_what_would_take_it_out_of_its_arrays(c_kernels):
    def call(**change):
        args = dict(src=np.zeros((4, 2), np.uint64), dst=np.zeros((4, 2), np.uint64), qp=np.arange(4, dtype=np.uint32),
                    insert=True, slots=np.full(16, -1, np.int64), fsrc=np.zeros((8, 2), np.uint64),
                    fdst=np.zeros((8, 2), np.uint64), fqp=np.zeros(8, np.uint32), n_flows=np.zeros(1, np.int64),
                    out=np.empty(4, np.int64))
        args.update(change)
        return kernels.flow_ids(*args.values())

    assert call() == 4
    for bad in (dict(src=np.zeros(8, np.uint64)), dict(fsrc=np.zeros(16, np.uint64)),
                dict(n_flows=np.array([-2], np.int64)), dict(n_flows=np.zeros(0, np.int64)),
                dict(slots=np.zeros(0, np.int64)), dict(slots=np.full(6, -1, np.int64)),
                dict(out=np.empty(3, np.int64)), dict(fqp=np.frombuffer(bytes(32), np.uint32))):
        with pytest.raises(ValueError):
            call(**bad)
