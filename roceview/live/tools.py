"""Capture tools run as a subprocess writing a capture to a pipe: tcpdump (pcap, `-w - -U`),
else Wireshark's dumpcap (pcapng). Each reads the tool's counters from its stderr and turns
its start-up failures into one line."""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading

from roceview.errors import BadInput

# The kernel's capture buffer: what arrives while roceview is busy waits there. Both tools ask
# for 2 MiB by default, 0.2 s of 1 KiB frames at 10 k packets/s: the TUI's loader, building a
# snapshot with the findings of a long capture, holds its reader up longer than that, and the
# kernel dropped frames (docs/performance.md, "live -i: the kernel's capture buffer").
BUFFER_MIB = 64
MISSING = ("live -i needs tcpdump (or dumpcap), and neither is installed (Debian: apt-get install tcpdump); "
           "or pipe a capture in: tcpdump -w - ... | roceview live -r -")


def start_capture(iface: str, snaplen: int | None = None, bpf: str | None = None, count: int | None = None):
    """tcpdump if installed, else dumpcap; BadInput (one line) for a missing tool or interface."""
    for tool in (Tcpdump, Dumpcap):
        path = shutil.which(tool.NAME)
        if path is not None:
            _check_interface(iface)
            return tool(path, iface, snaplen, bpf, count)
    raise BadInput(MISSING)


class Tcpdump:
    """`tcpdump -w - -U` on an interface, its pcap on a pipe. tcpdump prints its counters on
    stderr at exit and on SIGUSR1 ("N packets captured, N packets received by filter, N
    packets dropped by kernel"): the latest are in `stats`. Started in its own session so a
    Ctrl-C reaches roceview only, which then stops tcpdump with SIGINT (it flushes and exits)."""

    STATS = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel|dropped by interface)")
    KEYS = {"captured": "captured", "received by filter": "received_by_filter",
            "dropped by kernel": "kernel_drops", "dropped by interface": "interface_drops"}

    NAME = "tcpdump"
    LISTENING = "tcpdump: listening on"
    PERMISSION = "give tcpdump CAP_NET_RAW and CAP_NET_ADMIN (setcap cap_net_raw,cap_net_admin=eip $(which tcpdump))"

    def __init__(self, tool: str, iface: str, snaplen: int | None, bpf: str | None, count: int | None):
        cmd = self.command(tool, iface, snaplen, bpf, count)
        self.stats: dict[str, int] = {}
        self.errors: list[str] = []
        # tcpdump handles SIGUSR1 once set up (it prints "listening on" then); before, the
        # signal would kill it
        self.listening = threading.Event()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self._stderr = threading.Thread(target=self._read_stderr, name="roceview-capture-stderr", daemon=True)
        self._stderr.start()

    @staticmethod
    def command(tool: str, iface: str, snaplen, bpf, count) -> list[str]:
        # -B: the kernel buffer in KiB (tcpdump(1))
        cmd = [tool, "-i", iface, "-w", "-", "-U", "-n", "-s", str(snaplen or 0), "-B", str(BUFFER_MIB * 1024)]
        cmd += ["-c", str(count)] if count else []
        return cmd + ([bpf] if bpf else [])

    def counters(self, line: str) -> dict[str, int]:
        return {self.KEYS[k]: int(n) for n, k in self.STATS.findall(line)}

    def _read_stderr(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").strip()
            found = self.counters(line)
            if found:
                self.stats.update(found)
            elif line.startswith(self.LISTENING):
                self.listening.set()
            elif line:
                self.errors.append(line)

    def fd(self) -> int:
        return self.proc.stdout.fileno()

    def _signal(self, sig) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def ask_stats(self) -> None:
        if self.listening.is_set():
            self._signal(signal.SIGUSR1)

    def stop(self) -> None:
        self._signal(signal.SIGINT)

    def finish(self, timeout: float = 10.0) -> int:
        """Wait for the tool's exit and its last counters; kill it if it hangs."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._stderr.join(2.0)
        return code

    def failure(self) -> BadInput:
        """Why the tool ended before writing a capture header, in one line."""
        first = self.errors[0].removeprefix(f"{self.NAME}: ") if self.errors else ""
        if "permission" in first.lower() or "not permitted" in " ".join(self.errors).lower():
            return BadInput(f"no permission to capture ({first}): run as root, or {self.PERMISSION}")
        return BadInput(f"{self.NAME} failed: {first or f'exit status {self.proc.returncode}'}")


class Dumpcap(Tcpdump):
    """Wireshark's dumpcap (pcapng on stdout). Its counters come at exit only ("Packets
    captured: N", "Packets received/dropped on interface 'x': R/D (...)"): it has no SIGUSR1."""

    NAME = "dumpcap"
    LISTENING = "Capturing on"
    PERMISSION = "add the user to the wireshark group (dumpcap's CAP_NET_RAW/CAP_NET_ADMIN)"
    CAPTURED = re.compile(r"Packets captured: (\d+)")
    RECEIVED = re.compile(r"Packets received/dropped on interface .*: (\d+)/(\d+)")

    @staticmethod
    def command(tool: str, iface: str, snaplen, bpf, count) -> list[str]:
        cmd = [tool, "-i", iface, "-w", "-", "-q", "-B", str(BUFFER_MIB)] + (["-s", str(snaplen)] if snaplen else [])   # MiB
        cmd += ["-c", str(count)] if count else []
        return cmd + (["-f", bpf] if bpf else [])

    def counters(self, line: str) -> dict[str, int]:
        got = self.CAPTURED.search(line)
        if got:
            return {"captured": int(got.group(1))}
        got = self.RECEIVED.search(line)
        if got:
            return {"received_by_filter": int(got.group(1)), "kernel_drops": int(got.group(2))}
        return {}

    def ask_stats(self) -> None:
        pass                                   # SIGUSR1 would end dumpcap


def _check_interface(iface: str) -> None:
    """A missing interface fails here in one line (tcpdump's own message is two)."""
    import socket

    if iface == "any":
        return
    try:
        socket.if_nametoindex(iface)
    except OSError:
        raise BadInput(f"no such interface: {iface} (ip link lists them)") from None
