"""`analyze --engine dask` with the diagnoser's `trust` / `dscp_to_priority` settings: the
partitions' sent_while_paused / paused_flows and the driver's priorities.csv take a frame's
priority from the same map as the local engine, byte for byte."""
import numpy as np
import pytest

pytest.importorskip("dask")

import roceview  # noqa: E402
from roceview.diagnose.config import load_config  # noqa: E402
from roceview.generate import generate  # noqa: E402

# its fixtures too: a LocalCluster of 2 worker processes, the partitioned path required
from test_dask_equals_local import CSVS, cluster, csv_bytes, cut, partitioned  # noqa: E402, F401


def pcp_zero(cap):
    """The capture with every VLAN-tagged frame's PCP cleared (its DSCP kept)."""
    cap.frames = cap.frames.copy()
    starts = np.cumsum(cap.lengths) - cap.lengths
    tagged = starts[(cap.frames[starts + 12] == 0x81) & (cap.frames[starts + 13] == 0x00)]
    cap.frames[tagged + 14] &= 0x1F
    return cap


@pytest.mark.parametrize("scenarios", [("pfc-violator",), ("pfc-violator", "hol-victim")])
def test_a_dscp_trusting_map_gives_the_local_engines_csvs(cluster, tmp_path, partitioned, scenarios):  # noqa: F811
    """pfc-violator's RoCE frames retagged PCP 0 (DSCP 26), trusted by DSCP: the NIC's frames
    inside the switch's priority-3 pauses are found on the workers, and priorities.csv puts DSCP
    26 on priority 3; a map (46 -> 6) given as well. Each scenario cut into three files: one
    (files following each other: each analysed as it comes) or two (overlapping in time:
    every partition once all are read)."""
    d = tmp_path / "files"
    d.mkdir()
    for stem, scenario in zip("ab", scenarios):
        cap = pcp_zero(generate(scenario, seed=1))
        cut(cap, [len(cap) // 3, 2 * len(cap) // 3], d, stem)
    config = load_config(trust="dscp", dscp_to_priority={"46": 6})
    local_result = roceview.analyze(d, config=config)
    local = csv_bytes(local_result, tmp_path / "local")
    dask = csv_bytes(roceview.analyze(d, config=config, engine="dask", scheduler=cluster.scheduler_address),
                     tmp_path / "dask")
    for name in CSVS:
        assert dask[name] == local[name], name
    assert local["events.csv"].count(b",sent_while_paused,") > 20
    rows = local_result.priorities
    assert set(rows.loc[(rows["roce_packets"] > 0) & (rows["dscp"] == 26), "priority"]) == {"3"}
