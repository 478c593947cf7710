"""Is the service at `--scheduler` a Dask scheduler? Asked before distributed's Client connects.

Why: distributed's Client reads a peer's first 8 bytes as the size of its greeting and
allocates that much (a banner, 'SSH-2.0-' or 'HTTP/1.1', asks for about 3 EiB: MemoryError),
unpacks what follows without checking it (struct.error), and waits for the greeting with no
timeout at all (a service that accepts and never answers: a hang; distributed.comm.core.connect
says so). A Dask scheduler greets first, at once, with a small message (its compression,
Python version and pickle protocol, about 60 bytes). So on TCP we read that greeting ourselves,
every size bounded before it is read and every read under the deadline, send ours (the
scheduler then sees a whole handshake: no "closed before handshake completed" in its log),
and ask 'identity', as the Client asks first: only a scheduler answers it as one (a worker
greets alike; a service that greets and then stalls would hang the Client, and a Client that
fails half made deadlocks the next one's event loop when the collector reaps it). Other
schemes (tls, ws, ucx) are asked the same through distributed's comm layer under the
deadline. inproc (a scheduler in this process) is not asked: nothing there can be a stranger.

Every failure is a BadInput: one line that names the address and says what was seen.
"""
from __future__ import annotations

import math
import pickle
import socket
import struct
import sys
import time

from roceview.errors import BadInput

MAX_TIMEOUT = 3600.0         # seconds: a longer wait for a scheduler is a typo (1e300 overflows timers)
GREETING_MAX = 1 << 16       # bytes: a scheduler's greeting is ~60; more is not a Dask greeting
ANSWER_MAX = 1 << 24         # bytes: its answer to 'identity' (n_workers=0: about 300)
SHOWN = 40                   # bytes of a stranger's first words quoted in the error line
SIZE = struct.Struct("Q")    # distributed's frame prefix (comm/tcp.py: native "Q")


def checked_timeout(timeout) -> float:
    """`timeout` as seconds, or BadInput: a finite number above 0 and at most MAX_TIMEOUT (a
    bool or a string is refused: the caller meant something else)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        raise BadInput(f"the Dask scheduler timeout must be a number of seconds above 0 and at most "
                       f"{MAX_TIMEOUT:g} (got {timeout!r})")
    return float(timeout)


def check(address: str, timeout: float) -> None:
    """BadInput unless the service at `address` greets as a Dask scheduler within `timeout` s."""
    from distributed.comm.addressing import parse_address

    try:
        scheme, location = parse_address(address)
    except (ValueError, TypeError) as exc:
        raise unreachable(address, exc) from None
    end = time.monotonic() + timeout
    if scheme == "tcp":
        _check_tcp(address, location, end, timeout)
    elif scheme != "inproc":
        _check_comm(address, end, timeout)


def unreachable(address: str, why) -> BadInput:
    return BadInput(f"cannot reach the Dask scheduler at {address}: {one_line(why)}")


def not_dask(address: str, why: str) -> BadInput:
    return BadInput(f"{address} is not a Dask scheduler: {why}")


def one_line(why) -> str:
    """An exception or a text on one line (a message with newlines would be several)."""
    text = " ".join(str(why).split())
    return text or type(why).__name__


def _left(end: float) -> float:
    return max(0.0, end - time.monotonic())


def _check_tcp(address: str, location: str, end: float, timeout: float) -> None:
    from distributed.comm.addressing import parse_host_port

    try:
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise unreachable(address, exc) from None
    if not 0 < port < 65536:
        raise unreachable(address, f"port {port} is not a TCP port (1-65535)")
    with _connected(address, host, port, end, timeout) as sock:
        peer = _Raw(sock, address, end, timeout)
        greeting = peer.message(GREETING_MAX)
        if not (isinstance(greeting, dict) and "pickle-protocol" in greeting):
            raise not_dask(address, f"its first message is not a Dask greeting ({peer.seen!r})")
        peer.send({"compression": None, "python": tuple(sys.version_info)[:3], "pickle-protocol": pickle.HIGHEST_PROTOCOL})
        peer.send({"op": "identity", "n_workers": 0, "reply": True})
        _is_scheduler(address, peer.message(ANSWER_MAX))


def _is_scheduler(address: str, identity) -> None:
    """BadInput unless `identity` is a scheduler's answer to 'identity' (a worker or a nanny
    greets as a scheduler does, and refuses the question's n_workers)."""
    if isinstance(identity, dict) and identity.get("status") == "error":
        raise not_dask(address, "it greets as Dask does but refused a scheduler's question (a worker's or "
                                "a nanny's address?)")
    if not (isinstance(identity, dict) and "Scheduler" in str(identity.get("type", ""))):
        kind = identity.get("type") if isinstance(identity, dict) else None
        raise not_dask(address, f"it answers as a Dask {kind}" if kind else
                       "it greets as Dask does but did not say what it is")


def _connected(address: str, host: str, port: int, end: float, timeout: float) -> socket.socket:
    """A socket connected to host:port. A refused or unreachable attempt is tried again until
    the deadline, with a growing pause, as distributed's connect does (a scheduler starting)."""
    pause, last = 0.01, None
    while True:
        try:
            return socket.create_connection((host, port), timeout=max(_left(end), 0.001))
        except (OSError, OverflowError, ValueError) as exc:   # OverflowError/ValueError: not an address
            if not isinstance(exc, OSError) or isinstance(exc, socket.gaierror):
                raise unreachable(address, exc) from None
            last = exc
        if _left(end) <= 0:
            raise unreachable(address, f"no connection in {timeout:g} s ({one_line(last)})")
        time.sleep(min(pause, _left(end)))
        pause = min(pause * 2, 0.5)


class _Raw:
    """distributed's TCP messages read and written on a plain socket, every read under the
    deadline and every size bounded before anything is read into it. A message (comm/tcp.py):
    its size (8 bytes), its frames packed (protocol.utils.pack_frames), then buffers the
    packed frames announce; frames[0] is msgpack (protocol.core.loads)."""

    def __init__(self, sock: socket.socket, address: str, end: float, timeout: float):
        self.sock, self.address, self.end, self.timeout = sock, address, end, timeout
        self.got = b""          # received, not yet taken
        self.seen = b""         # the first SHOWN bytes received, for the error line

    def message(self, limit: int):
        """The next message decoded (nothing unpickled), or BadInput."""
        from distributed.protocol.utils import unpack_frames

        (size,) = SIZE.unpack(self.take(SIZE.size))
        if not 0 < size <= limit:
            raise not_dask(self.address, f"it sent {self.seen!r}")
        body = self.take(size)
        try:
            frames, buffers = unpack_frames(body, partial=True)
        except Exception:  # noqa: BLE001 - bytes that are not packed frames
            frames, buffers = [], []
        if not frames or sum(buffers) > limit:
            raise not_dask(self.address, f"its message is not Dask's ({self.seen!r})")
        frames += [self.take(n) for n in buffers]
        return _unpacked(bytes(frames[0]), self)

    def take(self, n: int) -> bytes:
        while len(self.got) < n:
            self.sock.settimeout(max(_left(self.end), 0.001))
            try:
                more = self.sock.recv(max(SHOWN, min(n - len(self.got), 1 << 20)))
            except TimeoutError:                      # (socket.timeout)
                raise not_dask(self.address, _stalled(self.seen, self.timeout)) from None
            except OSError as exc:
                raise unreachable(self.address, exc) from None
            if not more:
                raise not_dask(self.address, "it closed the connection "
                                             + (f"after {self.seen!r}" if self.seen else "without a word"))
            self.got += more
            self.seen = (self.seen + more)[:SHOWN]
        taken, self.got = self.got[:n], self.got[n:]
        return taken

    def send(self, message: dict) -> None:
        from distributed.protocol import dumps
        from distributed.protocol.utils import pack_frames

        body = pack_frames(dumps(message))
        self.sock.settimeout(max(_left(self.end), 0.001))
        try:
            self.sock.sendall(SIZE.pack(len(body)) + body)
        except OSError as exc:
            raise unreachable(self.address, exc) from None


def _unpacked(frame: bytes, peer: _Raw):
    """frames[0] as distributed's loads reads it, without its hooks (nothing unpickled) and
    without its log (a CRITICAL traceback on our stderr for a stranger's bytes)."""
    import msgpack

    try:
        return msgpack.loads(frame, use_list=False, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - anything msgpack raises on bytes that are not its
        raise not_dask(peer.address, f"its message is not Dask's ({peer.seen!r})") from None


def _stalled(got: bytes, timeout: float) -> str:
    if not got:
        return (f"it accepted the connection and sent nothing in {timeout:g} s "
                "(a Dask scheduler greets at once; or it is stuck)")
    return f"it sent {got!r} and then nothing in {timeout:g} s"


def _check_comm(address: str, end: float, timeout: float) -> None:
    """Another scheme's handshake and question, through distributed's comm layer (its TLS
    settings included), in a thread of its own (an event loop may already run in this one)
    under the deadline."""
    import threading

    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(_comm_identity(address, _left(end))),
                              name="roceview-dask-handshake", daemon=True)
    thread.start()
    thread.join(_left(end) + 1.0)
    if not outcome or isinstance(outcome[0], TimeoutError):
        raise not_dask(address, f"no Dask answer in {timeout:g} s")
    if isinstance(outcome[0], BaseException):
        raise unreachable(address, f"{type(outcome[0]).__name__}: {one_line(outcome[0])}")
    _is_scheduler(address, outcome[0])


def _comm_identity(address: str, seconds: float):
    """The answer of the server at `address` to 'identity' (nothing unpickled), else the error
    connecting or asking raised."""
    import asyncio

    async def ask():
        from distributed.comm import connect
        from distributed.security import Security

        comm = await connect(address, timeout=seconds, deserialize=False, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "n_workers": 0, "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    try:
        return asyncio.run(asyncio.wait_for(ask(), seconds))
    except BaseException as exc:  # noqa: BLE001 - reported by the caller as one line
        return exc
