"""connect() to TCP services that send a real Dask scheduler's greeting mutated (cut, bytes
flipped, a wrong size, a garbage body, garbage after it), random bytes or a text banner, in
one to three pieces, then stall or close: every try is one BadInput line naming the address,
within a deadline; never another exception, a hang or a connection.

Seeded and bounded: ROCEVIEW_FUZZ_EXAMPLES sets the tries (CI: 40), ROCEVIEW_FUZZ_SEED the
seed. The greeting is recorded from a real scheduler, not built as handshake.py builds it."""
from __future__ import annotations

import os
import random
import socket
import struct
import time

import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("dask.distributed")

from fake_peers import Peer, finished  # noqa: E402
from roceview.engines.dask.client import connect  # noqa: E402
from roceview.errors import BadInput  # noqa: E402

TRIES = int(os.environ.get("ROCEVIEW_FUZZ_EXAMPLES", "40"))
SEED = int(os.environ.get("ROCEVIEW_FUZZ_SEED", "30"))
TIMEOUT = 0.3        # seconds given to connect(); each try's deadline is far longer (a hang)
BANNERS = [b"SSH-2.0-OpenSSH_9.6\r\n", b"220 mail ESMTP Postfix\r\n", b"HTTP/1.1 400 Bad Request\r\n\r\n",
           b"+OK POP3 ready\r\n", b"* OK IMAP4rev1\r\n", b"\x16\x03\x01\x00\x05hello", b"\x00" * 8, b"\xff" * 8]


@pytest.fixture(scope="module")
def greeting() -> bytes:
    """What a real scheduler sends first on a new TCP connection (size prefix included)."""
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=":0") as cluster:
        host, port = cluster.scheduler_address.removeprefix("tcp://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            got = b""
            while len(got) < 8 or len(got) < 8 + struct.unpack_from("Q", got)[0]:
                got += sock.recv(4096)
    return got


def payload(rng: random.Random, real: bytes) -> bytes:
    """One stranger's first bytes."""
    kind = rng.randrange(8)
    if kind == 0:
        return rng.randbytes(rng.randrange(121))
    if kind == 1:
        return real[:rng.randrange(len(real))]
    if kind == 2:
        out = bytearray(real)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 3:
        size = rng.choice([0, 1, rng.randint(2, 200), (1 << 16) + 1, 1 << 63, rng.getrandbits(64)])
        return struct.pack("Q", size) + real[8:]
    if kind == 4:
        return real + rng.randbytes(rng.randint(1, 64))
    if kind == 5:
        return real
    if kind == 6:
        return rng.choice(BANNERS)
    return real[:8] + rng.randbytes(len(real) - 8)


def stranger(data: bytes, pieces: list[int], pause: float, closes: bool):
    """A peer's behaviour: `data` in pieces (cut at `pieces`), then a close or a stall."""
    def behave(conn, stop):
        for a, b in zip([0, *pieces], [*pieces, len(data)]):
            conn.sendall(data[a:b])
            time.sleep(pause)
        if closes:
            conn.shutdown(socket.SHUT_RDWR)
        else:
            stop.wait()
    return behave


def one_try(rng: random.Random, real: bytes) -> str | None:
    """None, or what went wrong with this try."""
    data = payload(rng, real)
    pieces = sorted(rng.sample(range(1, len(data)), min(rng.randrange(3), max(len(data) - 1, 0))))
    with Peer(stranger(data, pieces, rng.choice([0, 0.01, 0.03]), rng.random() < 0.5)) as peer:
        try:
            client = finished(lambda: connect(peer.address, timeout=TIMEOUT))
        except BadInput as exc:
            text = str(exc)
            return None if peer.address in text and "\n" not in text else f"{data!r}: {text!r}"
        except BaseException as exc:  # noqa: BLE001 - the failure this test looks for
            return f"{data!r}: {type(exc).__name__}: {exc}"
        client[0].close()
        return f"{data!r}: connected"


def test_strangers_are_one_line_within_the_timeout(greeting):
    rng = random.Random(SEED)
    failures = [f for f in (one_try(rng, greeting) for _ in range(TRIES)) if f]
    print(f"fuzzed scheduler peers: {TRIES} tries, {len(failures)} failures (seed {SEED})")
    assert not failures, failures[:5]
