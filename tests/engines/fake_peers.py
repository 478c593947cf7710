"""Real TCP services on 127.0.0.1, each run by a thread, that are not Dask schedulers (for
tests of `--scheduler`), and a deadline for a call that might hang."""
from __future__ import annotations

import random
import socket
import struct
import threading

HANG = 30          # seconds: a call still running by then hangs (the timeouts under test are ~1 s)


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
            except OSError:             # the poll's timeout included
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


def framed(message: dict) -> bytes:
    """`message` as distributed's TCP comm writes it (comm/tcp.py: size, packed frames)."""
    from distributed.protocol import dumps
    from distributed.protocol.utils import pack_frames

    body = pack_frames(dumps(message))
    return struct.pack("Q", len(body)) + body


def answers_identity_only(conn, stop):
    """Greets as a scheduler and answers 'identity' as one, and nothing else: a Client gets
    past both and then waits for its stream to start."""
    import pickle
    import sys

    conn.sendall(framed({"compression": None, "python": tuple(sys.version_info)[:3],
                         "pickle-protocol": pickle.HIGHEST_PROTOCOL}))
    conn.settimeout(0.05)
    got = b""
    while not stop.is_set():
        try:
            more = conn.recv(65536)
        except TimeoutError:
            continue
        if not more:
            return
        got += more
        if b"identity" in got:
            got = b""
            conn.sendall(framed({"type": "Scheduler", "id": "fake", "address": "tcp://127.0.0.1:1", "services": {},
                                 "started": 0.0, "n_workers": 1, "total_threads": 1, "total_memory": 1,
                                 "workers": {}}))
