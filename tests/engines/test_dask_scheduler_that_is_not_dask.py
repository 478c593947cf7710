"""`analyze --engine dask --scheduler ADDRESS` where ADDRESS is not a Dask scheduler: a banner,
an HTTP server, a service that accepts and never answers, one that closes, one whose greeting
stops half way or is garbage. Each is one line on stderr naming the address, exit 2, within
the connection timeout (a real local TCP service in a thread, a short timeout). A real
scheduler still connects, and its log shows no half-made connection."""
from __future__ import annotations

import gc
import logging
import math
import subprocess
import sys
import time

import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("dask.distributed")

from helpers.cli import run  # noqa: E402
from roceview.errors import BadInput  # noqa: E402
from roceview.engines.dask.client import connect  # noqa: E402
from conftest import REPO, SAMPLES  # noqa: E402
from fake_peers import (HANG, Peer, answers_identity_only, banner, closes, finished, garbage, garbage_greeting, http,  # noqa: E402
                        reads_then_closes, silent, stalls_in_greeting)

CAPTURE = SAMPLES / "clean.pcap"


PEERS = [banner, http, silent, closes, reads_then_closes, stalls_in_greeting, garbage_greeting, garbage]


@pytest.fixture
def short_timeout(monkeypatch):
    import roceview.engines.dask.client as engine

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "1s")


def one_error_line(err: str, address: str) -> None:
    assert err.count("\n") == 1 and err.startswith("roceview: error: "), err
    assert address in err and "Traceback" not in err, err


@pytest.mark.parametrize("behave", PEERS, ids=[p.__name__ for p in PEERS])
def test_a_service_that_is_not_dask_is_one_line_exit_2(behave, short_timeout, tmp_path):
    with Peer(behave) as peer:
        code, out, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", peer.address,
                                              "--csv", tmp_path / "out"))
    assert code == 2, err
    one_error_line(err, peer.address)
    assert out == "" and not (tmp_path / "out").exists()


def test_a_banner_without_a_scheme_or_through_tls_is_one_line_exit_2(short_timeout):
    """host:port means tcp://; tls:// without a TLS configuration cannot connect at all."""
    with Peer(banner) as peer:
        for address in (peer.address.removeprefix("tcp://"), peer.address.replace("tcp://", "tls://")):
            code, _, err = finished(lambda a=address: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", a))
            assert code == 2, err
            one_error_line(err, address)


def test_the_banner_is_shown_and_the_process_exits():
    """As a user runs it: its own process, the default timeout; what the service said is in the line."""
    with Peer(banner) as peer:
        done = subprocess.run([sys.executable, "-m", "roceview", "analyze", str(CAPTURE), "--engine", "dask",
                               "--scheduler", peer.address], capture_output=True, text=True, timeout=HANG,
                              cwd=REPO)
    assert done.returncode == 2, done.stderr
    one_error_line(done.stderr, peer.address)
    assert "not a Dask scheduler" in done.stderr and "SSH-2.0-OpenSSH" in done.stderr


def test_the_timeout_is_a_parameter_and_is_kept():
    with Peer(silent) as peer:
        with pytest.raises(BadInput, match=r"nothing in 0\.5 s") as caught:
            finished(lambda: connect(peer.address, timeout=0.5))
    assert peer.address in str(caught.value) and "\n" not in str(caught.value)


def test_both_dask_paths_take_the_timeout():
    """The partitioned run (engines.dask.analyzed) and the driver-side one (batches) pass
    scheduler_timeout on to connect: what the API hands them."""
    from roceview import engines

    dask = engines.get("dask")
    with Peer(silent) as peer:
        for call in (lambda: dask.analyzed([str(CAPTURE)], peer.address, print, scheduler_timeout=0.5, roce_ports=(),
                                           chunk_packets=1000, pmtu=None, link_speed=100.0, bucket_ms=1.0, facts=True),
                     lambda: dask.batches([str(CAPTURE)], peer.address, scheduler_timeout=0.5, roce_ports=(),
                                          chunk_packets=1000, warn=print)):
            with pytest.raises(BadInput, match=r"nothing in 0\.5 s"):
                finished(call, deadline=10)


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 1e300, 3601, "10", True])
def test_a_timeout_out_of_range_is_refused_before_connecting(timeout):
    with Peer(silent) as peer:
        with pytest.raises(BadInput, match="timeout must be a number of seconds"):
            finished(lambda: connect(peer.address, timeout=timeout), deadline=5)
        assert peer.conns == []


def test_a_port_out_of_range_is_one_line_at_once(short_timeout):
    code, _, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:99999"),
                            deadline=5)
    assert code == 2
    one_error_line(err, "tcp://127.0.0.1:99999")
    assert "port" in err


@pytest.fixture(scope="module")
def scheduler():
    """A real scheduler on TCP and one worker thread, in this process (its log can be read)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=":0") as cluster:
        yield cluster


def test_a_real_scheduler_connects_and_sees_a_whole_handshake(scheduler):
    said: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: said.append(record.getMessage())
    log = logging.getLogger("distributed.comm.tcp")
    log.addHandler(handler)
    try:
        client, cluster = finished(lambda: connect(scheduler.scheduler_address, timeout=10))
        try:
            assert cluster is None and client.submit(sum, [1, 2]).result(timeout=HANG) == 3
        finally:
            client.close()
        time.sleep(0.2)                   # the scheduler's side of the probe's connection closes
    finally:
        log.removeHandler(handler)
    assert not [m for m in said if "before handshake" in m], said


def test_the_cli_on_a_real_scheduler_gives_the_local_report(scheduler):
    code, dask_out, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask",
                                               "--scheduler", scheduler.scheduler_address))
    assert code == 0, err
    assert dask_out == run("analyze", CAPTURE)[1]


def test_a_peer_that_answers_only_identity_is_one_line_and_the_next_client_connects(scheduler, short_timeout):
    """It passes the check; the Client then fails half made. Closed by connect, it leaves
    nothing for the collector to reap in a later Client's event-loop thread."""
    with Peer(answers_identity_only) as peer:
        code, _, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", peer.address))
    assert code == 2, err
    one_error_line(err, peer.address)
    gc.collect()
    client, _ = finished(lambda: connect(scheduler.scheduler_address, timeout=10), deadline=8)
    client.close()


def test_a_worker_given_as_the_scheduler_is_one_line_exit_2(scheduler, short_timeout):
    worker = next(iter(scheduler.workers.values())).address
    code, _, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", worker))
    assert code == 2, err
    one_error_line(err, worker)
