"""Bad input through the CLI, in process (`roceview.cli.main(argv, env)`) and as a real
process (`python -m roceview`).

* Input that cannot be read at all (missing, empty, not a capture, unknown link type,
  corrupt gzip, permission denied, ...): exactly one line on stderr, exit code 2, nothing
  on stdout, never a traceback.
* A damaged file (cut in the middle of a record, a record claiming more than 256 KiB):
  one warning line on stderr, the packets before the damage are still shown (dissect) or
  analyzed (analyze), exit code 0.

Both `dissect` and `analyze` are exercised.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roceview.capture.writer import pcapng_bytes, write_pcap
from roceview.cli import Environment, main

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("dissect", "analyze")
RUNNERS = ("inprocess", "subprocess")
N_PACKETS = 12
ERROR_LINE = re.compile(r"^roceview(?: \w+)?: error: \S.*$")
WARNING_LINE = re.compile(r"^roceview(?: \w+)?: warning: \S.*$")


# --------------------------------------------------------------------------- helpers

def _frame(k: int) -> bytes:
    """A small RoCEv2 RC SEND_ONLY frame (ICRC not computed: not needed here)."""
    bth = struct.pack(">BBHB", 0x04, 0x40, 0xFFFF, 0) + (0x11).to_bytes(3, "big") + b"\x80" + k.to_bytes(3, "big")
    payload = bth + bytes(16) + b"\0\0\0\0"
    udp = struct.pack(">HHHH", 49152, 4791, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 2, 20 + len(udp), k, 0x4000, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])) + udp
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip


def _frames(n: int = N_PACKETS) -> list[bytes]:
    return [_frame(k) for k in range(n)]


def pcap_bytes(frames: list[bytes], tmp_path: Path) -> bytes:
    path = tmp_path / "_build.pcap"
    lengths = [len(f) for f in frames]
    write_pcap(path, np.frombuffer(b"".join(frames), np.uint8), lengths,
               [1_600_000_000_000_000_000 + 1000 * i for i in range(len(frames))])
    data = path.read_bytes()
    path.unlink()
    return data


def ng_bytes(frames: list[bytes]) -> bytes:
    return pcapng_bytes(frames, [1_600_000_000_000_000_000 + 1000 * i for i in range(len(frames))])


def _argv(command: str, path: str, tmp_path: Path) -> list[str]:
    if command == "dissect":
        return ["dissect", path, "--jsonl"]
    return ["analyze", path, "--json", str(tmp_path / "analysis.json")]


def _process_cmd() -> list[str]:
    if (REPO / "roceview" / "__main__.py").exists():
        return [sys.executable, "-m", "roceview"]
    return [sys.executable, "-c", "import sys; from roceview.cli import entry; sys.argv[0]='roceview'; entry()"]


def run(runner: str, argv: list[str], capfd=None, stdin: bytes = b"") -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `roceview ARGV`."""
    if runner == "subprocess":
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        proc = subprocess.run(_process_cmd() + argv, input=stdin, capture_output=True, timeout=300, env=env,
                              cwd=REPO)
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(argv, Environment(stdin=io.StringIO(), stdout=out, stderr=err))
    except SystemExit as exc:  # main() must not exit; record it as a failure signal
        code = f"SystemExit({exc.code})"
    # whatever went around the Environment (print to sys.stderr, tracebacks) counts too
    leaked_out, leaked_err = capfd.readouterr() if capfd is not None else ("", "")
    return code, out.getvalue() + leaked_out, err.getvalue() + leaked_err


def assert_bad_input(code, out: str, err: str, *needles: str) -> None:
    lines = err.splitlines()
    assert "Traceback" not in err and "Traceback" not in out, err
    assert len(lines) == 1, f"want exactly one line on stderr, got {len(lines)}:\n{err}"
    assert ERROR_LINE.match(lines[0]), lines[0]
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert code == 2, f"exit code {code!r}, stderr {err!r}"
    assert out == "", f"nothing should be printed on stdout: {out[:300]!r}"


def assert_damaged(command: str, code, out: str, err: str, tmp_path: Path, packets: int, *needles: str) -> None:
    assert "Traceback" not in err and "Traceback" not in out, err
    lines = err.splitlines()
    assert len(lines) == 1 and WARNING_LINE.match(lines[0]), f"want one warning line on stderr, got:\n{err}"
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert code == 0, f"exit code {code!r}, stderr {err!r}"
    if command == "dissect":
        rows = [json.loads(line) for line in out.splitlines()]
        assert [r["frame"] for r in rows] == list(range(1, packets + 1))
        assert all(r["proto"] == "roce_v2" for r in rows)
    else:
        summary = json.loads((tmp_path / "analysis.json").read_text())["summary"]
        assert summary["packets"] == packets, summary


# --------------------------------------------------------------------------- unreadable input

def _write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _linktype_147_pcap(tmp_path):
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147)
    return _write(tmp_path, "user0.pcap", header + struct.pack("<IIII", 0, 0, 4, 4) + b"abcd"), ["147"]


def _linktype_147_pcapng(tmp_path):
    from roceview.capture.writer import pcapng_bytes as build

    return _write(tmp_path, "user0.pcapng", build([b"abcd"], [0], linktype=147)), ["147"]


BAD_CASES = {
    "missing-file": lambda tmp: (str(tmp / "no-such-file.pcap"), ["no-such-file.pcap"]),
    "empty-file": lambda tmp: (_write(tmp, "empty.pcap", b""), ["empty.pcap"]),
    "text-file": lambda tmp: (_write(tmp, "notes.txt", b"this is not a capture\n" * 20), ["notes.txt"]),
    "binary-garbage": lambda tmp: (_write(tmp, "garbage.bin", bytes(range(256)) * 4), ["garbage.bin"]),
    "pcap-header-cut": lambda tmp: (_write(tmp, "short.pcap", b"\xd4\xc3\xb2\xa1\x02\x00"), ["short.pcap"]),
    "unknown-linktype-pcap": _linktype_147_pcap,
    "unknown-linktype-pcapng": _linktype_147_pcapng,
    "corrupt-gzip": lambda tmp: (_write(tmp, "corrupt.pcap.gz", b"\x1f\x8b\x08\x00" + bytes(range(7, 250))),
                                 ["corrupt.pcap.gz"]),
    "gzip-of-nothing": lambda tmp: (_write(tmp, "nothing.pcap.gz", gzip.compress(b"")), ["nothing.pcap.gz"]),
    "gzip-of-text": lambda tmp: (_write(tmp, "text.gz", gzip.compress(b"hello, world\n" * 50)), ["text.gz"]),
    "not-a-directory": lambda tmp: (_write(tmp, "plain", b"x") + "/child.pcap", ["child.pcap"]),
    "directory-without-captures": lambda tmp: (_mkdir(tmp / "empty-dir"), ["empty-dir"]),
}


def _mkdir(path: Path) -> str:
    path.mkdir()
    (path / "README.txt").write_text("no captures here\n")
    return str(path)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_unreadable_input(case, command, runner, tmp_path, capfd):
    path, needles = BAD_CASES[case](tmp_path)
    code, out, err = run(runner, _argv(command, path, tmp_path), capfd)
    assert_bad_input(code, out, err, *needles)
    if case.startswith("unknown-linktype"):
        assert "link type" in err.lower() or "linktype" in err.lower(), err


def _unreadable_path(tmp_path: Path) -> str:
    """A path whose open() fails with EACCES, also for root: /proc/sys files without read
    permission refuse root too; otherwise a chmod 000 file when not running as root."""
    for candidate in ("/proc/sys/vm/drop_caches", "/proc/sys/vm/compact_memory"):
        try:
            open(candidate, "rb").close()
        except PermissionError:
            return candidate
        except OSError:
            continue
    if os.geteuid() != 0:
        path = tmp_path / "secret.pcap"
        path.write_bytes(b"\xd4\xc3\xb2\xa1")
        path.chmod(0)
        return str(path)
    pytest.skip("running as root and no file refuses reading to root here (chmod does not deny root)")


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("command", COMMANDS)
def test_permission_denied(command, runner, tmp_path, capfd):
    path = _unreadable_path(tmp_path)
    code, out, err = run(runner, _argv(command, path, tmp_path), capfd)
    assert_bad_input(code, out, err, Path(path).name)
    assert "permission" in err.lower(), err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("data", [b"", b"not a capture at all\n"], ids=["empty-stdin", "text-stdin"])
def test_unreadable_stdin(command, data, tmp_path):
    code, out, err = run("subprocess", _argv(command, "-", tmp_path), stdin=data)
    assert_bad_input(code, out, err)


# --------------------------------------------------------------------------- damaged files

def _cut_in_record_body(tmp_path):
    data = pcap_bytes(_frames(), tmp_path)
    return data[:-10], N_PACKETS - 1


def _cut_in_record_header(tmp_path):
    frames = _frames()
    data = pcap_bytes(frames, tmp_path)
    last = 16 + len(frames[-1])
    return data[:len(data) - last + 7], N_PACKETS - 1


def _absurd_caplen(tmp_path):
    data = pcap_bytes(_frames(), tmp_path)
    return data + struct.pack("<IIII", 1_600_000_001, 0, 256 * 1024 + 1, 256 * 1024 + 1) + bytes(4096), N_PACKETS


def _absurd_caplen_huge(tmp_path):
    data = pcap_bytes(_frames(), tmp_path)
    good_after = pcap_bytes(_frames(3), tmp_path)[24:]
    return data + struct.pack("<IIII", 1_600_000_001, 0, 0x7FFFFFF0, 60) + good_after, N_PACKETS


def _pcapng_cut(tmp_path):
    return ng_bytes(_frames())[:-9], N_PACKETS - 1


def _pcapng_absurd_block(tmp_path):
    data = ng_bytes(_frames())
    body = struct.pack("<IIIII", 0, 0, 5, 300_000, 300_000) + bytes(300_000)
    return data + struct.pack("<II", 6, len(body) + 12) + body + struct.pack("<I", len(body) + 12), N_PACKETS


DAMAGED = {
    "pcap-cut-in-record-body": (_cut_in_record_body, ["middle of a record"]),
    "pcap-cut-in-record-header": (_cut_in_record_header, ["middle of a record"]),
    "pcap-caplen-256KiB+1": (_absurd_caplen, ["262145"]),
    "pcap-caplen-2GiB": (_absurd_caplen_huge, []),
    "pcapng-cut-in-block": (_pcapng_cut, []),
    "pcapng-caplen-300000": (_pcapng_absurd_block, []),
}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_file_warns_and_keeps_earlier_packets(case, command, runner, tmp_path, capfd):
    build, needles = DAMAGED[case]
    data, packets = build(tmp_path)
    name = "damaged.pcapng" if case.startswith("pcapng") else "damaged.pcap"
    path = _write(tmp_path, name, data)
    code, out, err = run(runner, _argv(command, path, tmp_path), capfd)
    assert_damaged(command, code, out, err, tmp_path, packets, name, *needles)


@pytest.mark.parametrize("command", COMMANDS)
def test_damaged_stdin_warns_and_keeps_earlier_packets(command, tmp_path):
    data, packets = _cut_in_record_body(tmp_path)
    code, out, err = run("subprocess", _argv(command, "-", tmp_path), stdin=data)
    assert_damaged(command, code, out, err, tmp_path, packets)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("command", COMMANDS)
def test_caplen_of_exactly_256KiB_is_not_damage(command, runner, tmp_path, capfd):
    """The limit is > 256 KiB: a 262144-byte record is read like any other."""
    frames = _frames(3) + [_frame(3) + bytes(256 * 1024 - len(_frame(3)))] + _frames(2)
    path = _write(tmp_path, "big.pcap", pcap_bytes(frames, tmp_path))
    code, out, err = run(runner, _argv(command, path, tmp_path), capfd)
    assert code == 0 and "Traceback" not in err, err
    assert "warning" not in err, err
    if command == "dissect":
        assert len(out.splitlines()) == 6


@pytest.mark.parametrize("command", COMMANDS)
def test_pcapng_caplen_just_over_256KiB_is_damage(command, tmp_path, capfd):
    data = ng_bytes(_frames())
    cap = 256 * 1024 + 1
    body = struct.pack("<IIIII", 0, 0, 5, cap, cap) + bytes(cap) + bytes(-cap % 4)
    path = _write(tmp_path, "just-over.pcapng",
                  data + struct.pack("<II", 6, len(body) + 12) + body + struct.pack("<I", len(body) + 12))
    code, out, err = run("inprocess", _argv(command, path, tmp_path), capfd)
    assert_damaged(command, code, out, err, tmp_path, N_PACKETS, "just-over.pcapng")


@pytest.mark.parametrize("command", COMMANDS)
def test_gzip_cut_in_the_middle_warns_and_keeps_earlier_packets(command, tmp_path, capfd):
    frames = _frames(400)
    raw = pcap_bytes(frames, tmp_path)
    compressed = gzip.compress(raw, compresslevel=1)
    cut = compressed[:len(compressed) * 3 // 4]
    import zlib

    recovered = zlib.decompressobj(31).decompress(cut)
    complete, pos = 0, 24
    while pos + 16 <= len(recovered):
        incl = struct.unpack("<I", recovered[pos + 8:pos + 12])[0]
        if pos + 16 + incl > len(recovered):
            break
        complete, pos = complete + 1, pos + 16 + incl
    assert 0 < complete < 400
    path = _write(tmp_path, "cut.pcap.gz", cut)
    code, out, err = run("inprocess", _argv(command, path, tmp_path), capfd)
    assert_damaged(command, code, out, err, tmp_path, complete, "cut.pcap.gz")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("cut", [30, 40])
def test_a_pcapng_stream_cut_inside_its_interface_block_warns_as_the_file_does(command, cut, tmp_path):
    """Through stdin the reader's buffer holds stale bytes past what was read: a cut inside
    the interface description block read them as zeros, 0 packets and no warning."""
    data = pcapng_bytes(_frames(), [1_600_000_000_000_000_000 + 1000 * i for i in range(N_PACKETS)])[:cut]
    path = _write(tmp_path, "cut.pcapng", data)
    from_file = run("subprocess", _argv(command, path, tmp_path))
    from_stdin = run("subprocess", _argv(command, "-", tmp_path), stdin=data)
    assert "file ends in the middle of a block" in from_file[2]
    assert from_stdin[2] == from_file[2].replace(str(path), "<stdin>"), (from_stdin, from_file)
