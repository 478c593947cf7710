"""`analyze --engine dask --scheduler ADDRESS` where ADDRESS is not a Dask scheduler: a banner,
an HTTP server, a service that accepts and never answers, one that closes, one whose greeting
stops half way or is garbage. Each is one line on stderr naming the address, exit 2, within
the connection timeout (a real local TCP service in a thread, a short timeout). A real
scheduler still connects, and its log shows no half-made connection."""
from __future__ import annotations

import logging
import math
import random
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("dask.distributed")

from helpers.cli import run  # noqa: E402
from roceview.errors import BadInput  # noqa: E402
from roceview.engines.dask.client import connect  # noqa: E402
from conftest import REPO, SAMPLES  # noqa: E402

CAPTURE = SAMPLES / "clean.pcap"
HANG = 30          # seconds: a run still going by then hangs (the timeout under test is 1 s)


class Peer:
    """A TCP service on 127.0.0.1 run by a thread: `behave(conn, stop)` per connection; the
    connections stay open until the peer is closed (a hang must be the client's)."""

    def __init__(self, behave):
        self.behave, self.stop, self.conns = behave, threading.Event(), []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(conn)
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            self.behave(conn, self.stop)
        except OSError:
            pass

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for conn in [self.sock, *self.conns]:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def banner(conn, stop):           # SSH, SMTP, FTP ...: they speak first
    conn.sendall(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")
    stop.wait()


def http(conn, stop):             # answers what it is sent (Dask's own greeting) with an error
    conn.settimeout(5)
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    conn.shutdown(socket.SHUT_WR)
    stop.wait()


def silent(conn, stop):           # accepts and never answers
    stop.wait()


def closes(conn, stop):
    conn.close()


def reads_then_closes(conn, stop):
    conn.settimeout(5)
    conn.recv(65536)
    conn.shutdown(socket.SHUT_RDWR)


def stalls_in_greeting(conn, stop):     # a plausible greeting size, then 10 of its 58 bytes
    conn.sendall(struct.pack("Q", 58) + b"\x01" + bytes(9))
    stop.wait()


def garbage_greeting(conn, stop):       # a plausible size, then 58 random bytes
    conn.sendall(struct.pack("Q", 58) + random.Random(7).randbytes(58))
    stop.wait()


def garbage(conn, stop):
    conn.sendall(random.Random(11).randbytes(256))
    stop.wait()


PEERS = [banner, http, silent, closes, reads_then_closes, stalls_in_greeting, garbage_greeting, garbage]


@pytest.fixture
def short_timeout(monkeypatch):
    import roceview.engines.dask.client as engine

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT", "1s")


def finished(call, deadline: float = HANG):
    """call()'s result (or exception), run in a thread; a call still running after `deadline`
    seconds fails the test instead of hanging it."""
    out: dict = {}

    def target():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline)
    assert not thread.is_alive(), f"still running after {deadline} s: a hang"
    if "error" in out:
        raise out["error"]
    return out["value"]


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
            code, _, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", address))
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


def test_a_worker_given_as_the_scheduler_is_one_line_exit_2(scheduler, short_timeout):
    worker = next(iter(scheduler.workers.values())).address
    code, _, err = finished(lambda: run("analyze", CAPTURE, "--engine", "dask", "--scheduler", worker))
    assert code == 2, err
    one_error_line(err, worker)
