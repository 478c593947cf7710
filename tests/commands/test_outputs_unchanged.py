"""Every command's output is what outputs.json recorded: the samples, the real captures and ten
generated ones through analyze (report, --csv, --json), dissect, dissect -V and, for the samples,
--engine dask. A moved module or a refactor must leave every byte as it was; a change meant to
alter an output re-records the digests (`python tests/commands/outputs.py --write`)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

import outputs

RECORDED = json.loads(outputs.STORE.read_text())


@pytest.fixture(scope="module")
def setting():
    """The fixed terminal, the generated captures and one LocalCluster for the whole module."""
    from distributed import LocalCluster

    with outputs.fixed_terminal(), tempfile.TemporaryDirectory() as gen, \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        outputs.SCRUBBED.append(gen)
        paths = {key: (path, dask) for key, path, dask in outputs.inputs(Path(gen))}
        yield paths, cluster.scheduler_address


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_every_output_is_byte_identical_to_the_recorded_one(key, setting):
    paths, scheduler = setting
    if key not in paths:
        pytest.skip(f"{key}: {outputs.REAL} is absent")
    path, dask = paths[key]
    assert outputs.capture_outputs(path, scheduler if dask else None) == RECORDED[key]


def test_the_recorded_outputs_cover_samples_real_captures_and_generated_ones():
    kinds = {key.split("/")[0] for key in RECORDED}
    assert kinds == {"captures", "real", "generated"}
    assert sum(key.startswith("generated/") for key in RECORDED) == 10
    assert all("analyze --engine dask --csv" in v for k, v in RECORDED.items() if k.startswith("captures/"))
