"""Is the service at `--scheduler` a Dask scheduler? Asked before distributed's Client connects.

Why: distributed's Client reads a peer's first 8 bytes as the size of its greeting and
allocates that much (a banner, 'SSH-2.0-' or 'HTTP/1.1', asks for about 3 EiB: MemoryError),
unpacks what follows without checking it (struct.error), and waits for the greeting with no
timeout at all (a service that accepts and never answers: a hang; distributed.comm.core.connect
says so). A Dask scheduler greets first, at once, with a small message (its compression,
Python version and pickle protocol, about 60 bytes). So on TCP we read that greeting ourselves,
under a deadline and a size bound, decode it with distributed's own functions, then send ours
so that the scheduler sees a whole handshake (no "closed before handshake completed" in its
log). Other schemes (tls, ws, ucx) are asked through distributed's comm layer under a deadline.
inproc (a scheduler in this process) is not asked: nothing there can be a stranger.

Every failure is a BadInput: one line that names the address and says what was seen.
"""
from __future__ import annotations

import math
import socket
import struct
import time

from roceview.errors import BadInput

MAX_TIMEOUT = 3600.0         # seconds: a longer wait for a scheduler is a typo (1e300 overflows timers)
GREETING_MAX = 1 << 16       # bytes: a scheduler's greeting is ~60; more is not a Dask greeting
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
    sock = _connected(address, host, port, end, timeout)
    try:
        greeting = _greeting(sock, address, end, timeout)
        _decoded(greeting, address)
        _greet_back(sock)
    finally:
        sock.close()


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


def _greeting(sock: socket.socket, address: str, end: float, timeout: float) -> bytes:
    """The peer's whole first message (size prefix excluded), or BadInput saying what came."""
    got = _read(sock, b"", SIZE.size, address, end, timeout, SHOWN)
    (size,) = SIZE.unpack_from(got)
    if not 0 < size <= GREETING_MAX:
        raise not_dask(address, f"it sent {got[:SHOWN]!r}")
    got = _read(sock, got, SIZE.size + size, address, end, timeout, SIZE.size + size - len(got))
    return got[SIZE.size:SIZE.size + size]


def _read(sock, got: bytes, want: int, address: str, end: float, timeout: float, ask: int) -> bytes:
    """`got` extended to at least `want` bytes (recv asks `ask` at first, then what is missing)."""
    while len(got) < want:
        sock.settimeout(max(_left(end), 0.001))
        try:
            more = sock.recv(max(ask, want - len(got)))
        except socket.timeout:
            raise not_dask(address, _stalled(got, timeout)) from None
        except OSError as exc:
            raise unreachable(address, exc) from None
        if not more:
            raise not_dask(address, "it closed the connection "
                                    + (f"after {got[:SHOWN]!r}" if got else "without a word"))
        got += more
    return got


def _stalled(got: bytes, timeout: float) -> str:
    if not got:
        return (f"it accepted the connection and sent nothing in {timeout:g} s "
                "(a Dask scheduler greets at once; or it is stuck)")
    return f"it sent {got[:SHOWN]!r} and then nothing in {timeout:g} s"


def _decoded(greeting: bytes, address: str) -> dict:
    """The greeting as distributed reads it (comm/tcp.py read: frames, then protocol.loads,
    nothing unpickled); a Dask greeting is a dict with a pickle protocol."""
    from distributed.protocol import loads
    from distributed.protocol.utils import unpack_frames

    try:
        frames, missing = unpack_frames(greeting, partial=True)
        message = None if missing else loads([bytes(f) for f in frames], deserialize=False)
    except Exception:  # noqa: BLE001 - anything the bytes make distributed raise: not a greeting
        message = None
    if not (isinstance(message, dict) and "pickle-protocol" in message):
        raise not_dask(address, f"its first message is not a Dask greeting ({greeting[:SHOWN]!r})")
    return message


def _greet_back(sock: socket.socket) -> None:
    """Our greeting, as a Client's (comm/core.py handshake_info, comm/tcp.py framing), so the
    scheduler's side of this connection ends as any client's that leaves. A failure here is
    not the scheduler's: the check already passed."""
    import pickle
    import sys

    from distributed.protocol import dumps
    from distributed.protocol.utils import pack_frames

    mine = {"compression": None, "python": tuple(sys.version_info)[:3], "pickle-protocol": pickle.HIGHEST_PROTOCOL}
    try:
        body = pack_frames(dumps(mine))
        sock.sendall(SIZE.pack(len(body)) + body)
    except Exception:  # noqa: BLE001 - courtesy only
        pass


def _check_comm(address: str, end: float, timeout: float) -> None:
    """Another scheme's handshake, through distributed's comm layer (TLS settings included),
    in a thread of its own (an event loop may already run in this one) under the deadline."""
    import threading

    outcome: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: outcome.append(_comm_handshake(address, _left(end))),
                              name="roceview-dask-handshake", daemon=True)
    thread.start()
    thread.join(_left(end) + 1.0)
    if not outcome or isinstance(outcome[0], TimeoutError):
        raise not_dask(address, f"no Dask handshake in {timeout:g} s")
    if outcome[0] is not None:
        raise unreachable(address, f"{type(outcome[0]).__name__}: {one_line(outcome[0])}")


def _comm_handshake(address: str, seconds: float) -> BaseException | None:
    """None once distributed's connect to `address` completed its handshake, else its error."""
    import asyncio

    async def handshake():
        from distributed.comm import connect
        from distributed.security import Security

        comm = await asyncio.wait_for(connect(address, timeout=seconds, **Security().get_connection_args("client")),
                                      seconds)
        await comm.close()

    try:
        asyncio.run(handshake())
    except BaseException as exc:  # noqa: BLE001 - reported by the caller as one line
        return exc
    return None
