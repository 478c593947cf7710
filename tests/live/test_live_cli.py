"""`roceview live`: `-r -` fed through a pipe writes what `analyze` writes for the same capture;
--count / --duration / Ctrl-C stop cleanly with -w's file whole; the one-line errors for a
missing interface, a missing tcpdump and no permission to capture (a fake tcpdump on PATH, and
as root a real one without CAP_NET_RAW); tcpdump's kernel drop counters in the summary.

`roceview live` with the TUI says when its stream has ended; rates under 10 pkt/s."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
import pytest
from roceview.api import analyze
from roceview.capture.readers import read_records
from roceview.render.export import CSV_FILES, write_csv_dir
import io
import types
from helpers.live import LOSS, packet_count, reference_csv, same_csvs  # noqa: F401


REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "captures").glob("*.pcap"))


def live(*argv, stdin_bytes: bytes | None = None, env=None, timeout=120):
    """`roceview live ...` in a subprocess, its stdin a pipe carrying stdin_bytes."""
    proc = subprocess.run([sys.executable, "-m", "roceview", "live", *argv], cwd=REPO, input=stdin_bytes,
                          stdin=None if stdin_bytes is not None else subprocess.DEVNULL,
                          capture_output=True, env=env, timeout=timeout)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def generated(tmp_path: Path, kind: str) -> Path:
    """The network-loss-receiver-side scenario written as pcap or pcapng."""
    path = tmp_path / f"loss.{kind}"
    subprocess.run([sys.executable, "-m", "roceview", "generate", "network-loss-receiver-side", "-o", str(path)],
                   cwd=REPO, check=True, capture_output=True)
    return path


@pytest.mark.parametrize("capture", SAMPLES, ids=[p.name for p in SAMPLES])
def test_stdin_pipe_writes_the_csvs_analyze_writes(capture, tmp_path):
    code, out, err = live("-r", "-", "--no-tui", "--csv", str(tmp_path / "live"), stdin_bytes=capture.read_bytes())
    assert code == 0, err
    assert "stopped by end of stream" in out
    same_csvs(tmp_path / "live", reference_csv(capture, tmp_path / "ref"))


def test_pcapng_stream_and_json_summary(tmp_path):
    ng = generated(tmp_path, "pcapng")
    code, out, err = live("-r", "-", "--no-tui", "--csv", str(tmp_path / "live"), "--json", str(tmp_path / "l.json"),
                          stdin_bytes=ng.read_bytes())
    assert code == 0, err
    same_csvs(tmp_path / "live", reference_csv(ng, tmp_path / "ref"))
    summary = json.loads((tmp_path / "l.json").read_text())["summary"]
    assert summary["live"]["packets_analyzed"] == summary["packets"] == packet_count(ng)
    assert summary["live"]["kernel_drops"] is None and summary["live"]["roceview_drops"] == 0


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_count_stops_and_the_saved_file_holds_exactly_those_packets(kind, tmp_path):
    src = generated(tmp_path, kind)
    saved = tmp_path / f"saved.{kind}"
    code, out, err = live("-r", "-", "--count", "100", "-w", str(saved), "--no-tui", "--csv", str(tmp_path / "live"),
                          stdin_bytes=src.read_bytes())
    assert code == 0, err
    assert "stopped by count" in out
    assert packet_count(saved) == 100
    assert src.read_bytes().startswith(saved.read_bytes())
    same_csvs(tmp_path / "live", reference_csv(saved, tmp_path / "ref"))


SLOW_WRITER = textwrap.dedent("""
    import struct, sys, time
    data = open(sys.argv[1], "rb").read()
    out = sys.stdout.buffer
    for pos in range(0, len(data), 97):       # records and blocks split across reads
        out.write(data[pos:pos + 97]); out.flush()
        time.sleep(0.0005)
    if data[:4] == bytes.fromhex("0a0d0d0a"):  # pcapng: past the section header and interface blocks
        first = 0
        for _ in range(2):
            first += struct.unpack("<I", data[first + 4:first + 8])[0]
    else:
        first = 24                            # pcap: past the file header
    out.write(data[first:first + 30]); out.flush()    # the start of one more record, never finished
    time.sleep(600)
""")


def slow_live(source: Path, *argv):
    writer = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(source)], stdout=subprocess.PIPE)
    reader = subprocess.Popen([sys.executable, "-m", "roceview", "live", "-r", "-", "--no-tui", *argv],
                              cwd=REPO, stdin=writer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer.stdout.close()
    return writer, reader


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_duration_stops_a_stream_that_never_ends(kind, tmp_path):
    source = generated(tmp_path, kind)
    saved = tmp_path / f"saved.{kind}"
    writer, reader = slow_live(source, "--duration", "3", "-w", str(saved), "--csv", str(tmp_path / "live"))
    try:
        out, err = reader.communicate(timeout=60)
    finally:
        writer.kill()
        writer.wait()
    assert reader.returncode == 0, err
    assert "stopped by duration" in out and "warning" not in err
    assert saved.read_bytes() == source.read_bytes()          # whole records only: the last one cut off
    same_csvs(tmp_path / "live", reference_csv(source, tmp_path / "ref"))


def test_ctrl_c_stops_cleanly(tmp_path):
    writer, reader = slow_live(LOSS, "--csv", str(tmp_path / "live"), "--json", str(tmp_path / "l.json"))
    try:
        status = reader.stderr.readline()
        assert status.startswith("live "), status
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=60)
    finally:
        writer.kill()
        writer.wait()
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    assert "stopped by interrupt" in out
    assert (tmp_path / "live" / "qps.csv").exists()
    assert json.loads((tmp_path / "l.json").read_text())["summary"]["live"]["stopped_by"] == "interrupt"


def test_status_line_when_stdout_is_not_a_terminal(tmp_path):
    """Without --no-tui and with stdout a pipe, live runs as --no-tui: a report, not the TUI."""
    code, out, err = live("-r", "-", stdin_bytes=LOSS.read_bytes())
    assert code == 0, err
    assert "Findings" in out


def run_on_a_terminal(*argv: str) -> tuple[int, bytes]:
    """`roceview live ARGV` with stdin, stdout and stderr a pseudo-terminal: exit code, output."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "roceview", "live", *argv])
    output = b""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        output += data
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output


@pytest.mark.skipif(importlib.util.find_spec("roceview.tui") is not None, reason="this build has the TUI")
def test_without_the_tui_a_terminal_is_told_to_use_no_tui():
    code, output = run_on_a_terminal("-r", "-")
    assert code == 2
    assert b"the TUI is not available in this build; use --no-tui" in output


# ---- errors: one line, exit 2 ------------------------------------------------------------------

def one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err


def fake_tool_env(tmp_path: Path, script: str, name: str = "tcpdump") -> dict:
    """PATH holding a fake `tcpdump` (a shell script) and no other capture tool."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "cat").symlink_to(shutil.which("cat"))       # the scripts' one command
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return {**os.environ, "PATH": str(bin_dir)}


def test_no_such_interface():
    code, _, err = live("-i", "roceview-nosuch0", "--no-tui")
    one_line_error(code, err, "no such interface: roceview-nosuch0")


def test_missing_tcpdump(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    code, _, err = live("-i", "lo", "--no-tui", env=env)
    one_line_error(code, err, "needs tcpdump (or dumpcap)", "live -r -")


def test_no_permission_with_a_fake_tcpdump(tmp_path):
    env = fake_tool_env(tmp_path, 'echo "tcpdump: lo: You don\'t have permission to perform this capture on '
                                  'that device" >&2\necho "(socket: Operation not permitted)" >&2\nexit 1\n')
    code, _, err = live("-i", "lo", "--no-tui", env=env)
    one_line_error(code, err, "no permission to capture", "root", "CAP_NET_RAW")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("tcpdump"),
                    reason="needs root, setpriv and tcpdump (drops CAP_NET_RAW/CAP_NET_ADMIN to test)")
def test_no_permission_without_cap_net_raw():
    proc = subprocess.run(["setpriv", "--bounding-set=-net_raw,-net_admin", sys.executable, "-m", "roceview", "live",
                           "-i", "lo", "--no-tui", "--duration", "5"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    one_line_error(proc.returncode, proc.stderr, "no permission to capture", "CAP_NET_RAW")


def test_bad_capture_filter_with_a_fake_tcpdump(tmp_path):
    env = fake_tool_env(tmp_path, 'echo "tcpdump: can\'t parse filter expression: syntax error" >&2\nexit 1\n')
    code, _, err = live("-i", "lo", "-f", "bad ((", "--no-tui", env=env)
    one_line_error(code, err, "filter expression")


def test_kernel_drops_are_read_from_tcpdump(tmp_path):
    """A fake tcpdump writes a capture and, at its end, tcpdump's counters: 7 kernel drops, and
    5 packets more captured than it wrote (roceview's drops: written but never read)."""
    n = packet_count(LOSS)
    env = fake_tool_env(tmp_path, f'cat "{LOSS}"\necho "{n + 5} packets captured" >&2\n'
                                  f'echo "{n + 12} packets received by filter" >&2\n'
                                  'echo "7 packets dropped by kernel" >&2\n')
    code, out, err = live("-i", "lo", "--no-tui", "--json", str(tmp_path / "l.json"), "--csv", str(tmp_path / "live"),
                          env=env)
    assert code == 0, err
    assert "kernel drops 7" in out
    s = json.loads((tmp_path / "l.json").read_text())["summary"]["live"]
    assert (s["kernel_drops"], s["captured"], s["received_by_filter"], s["roceview_drops"]) == (7, n + 5, n + 12, 5)
    same_csvs(tmp_path / "live", reference_csv(LOSS, tmp_path / "ref"))


def test_read_options_that_need_an_interface():
    code, _, err = live("-r", "-", "-f", "udp", "--no-tui", stdin_bytes=b"")
    one_line_error(code, err, "-f and --snaplen apply to -i")


def test_capture_options_reach_tcpdump(tmp_path):
    """-f, --snaplen and --count become tcpdump's filter, -s and -c; the pcap goes to stdout (-w -)."""
    args = tmp_path / "args"
    env = fake_tool_env(tmp_path, f'echo "$@" > "{args}"\ncat "{LOSS}"\n')
    code, _, err = live("-i", "lo", "--no-tui", "--snaplen", "128", "--count", "1000", "-f", "udp port 4791", env=env)
    assert code == 0, err
    assert args.read_text().split() == ["-i", "lo", "-w", "-", "-U", "-n", "-s", "128", "-B", "65536", "-c", "1000",
                                        "udp", "port", "4791"]


def test_stdin_a_terminal_is_refused():
    code, output = run_on_a_terminal("-r", "-", "--no-tui")
    assert code == 2
    assert b"standard input is a terminal" in output


def test_the_tui_gets_batches_and_live_stats(tmp_path, monkeypatch):
    """The contract with roceview/tui: run_app(source, *, title, options: tui.Options,
    live_stats) where source yields roceview Batches, not analyzed: the consumer feeds each to
    source.analysis (the session's one analysis); after it returns, --csv is written from that."""
    import io
    import types

    from roceview.packets.batch import Batch
    from roceview.cli import Environment, main
    from roceview.tui import Options

    seen = {}

    def run_app(source, *, title, options, live_stats):
        seen["rows"] = 0
        for batch in source:
            assert isinstance(batch, Batch)
            source.analysis.feed(batch)
            seen["rows"] += batch.n
        seen["title"], seen["stats"], seen["options"] = title, live_stats(), options

    import roceview

    fake = types.SimpleNamespace(run_app=run_app, Options=Options)
    monkeypatch.setitem(sys.modules, "roceview.tui", fake)
    monkeypatch.setattr(roceview, "tui", fake)      # `import roceview.tui as tui` reads the attribute

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out, err = Terminal(), io.StringIO()
    code = main(["live", "-r", str(LOSS), "--csv", str(tmp_path / "live")], Environment(stdout=out, stderr=err))
    assert code == 0, err.getvalue()
    assert seen["rows"] == packet_count(LOSS) and seen["stats"]["roceview drops"] == 0
    assert seen["title"] == f"roceview live {LOSS}" and seen["options"].link_speed == 100.0
    same_csvs(tmp_path / "live", reference_csv(LOSS, tmp_path / "ref"))


def test_fail_on_exits_3_as_analyze_does(tmp_path):
    code, out, err = live("-r", "-", "--no-tui", "--fail-on", "warning", stdin_bytes=LOSS.read_bytes())
    assert code == 3, err
    assert "network_loss" in out


def test_dumpcap_when_tcpdump_is_missing(tmp_path):
    """Without tcpdump, dumpcap (pcapng on stdout; its counters at exit) does the capture."""
    ng = generated(tmp_path, "pcapng")
    n = packet_count(ng)
    args = tmp_path / "args"
    env = fake_tool_env(tmp_path, f'echo "$@" > "{args}"\ncat "{ng}"\necho "Packets captured: {n}" >&2\n'
                                  f'echo "Packets received/dropped on interface \'lo\': {n + 4}/4 '
                                  '(pcap:0/dumpcap:0/flushed:0/ps_ifdrop:0) (100.0%)" >&2\n', name="dumpcap")
    code, out, err = live("-i", "lo", "--no-tui", "-f", "udp", "--json", str(tmp_path / "l.json"),
                          "--csv", str(tmp_path / "live"), env=env)
    assert code == 0, err
    assert args.read_text().split() == ["-i", "lo", "-w", "-", "-q", "-B", "64", "-f", "udp"]
    s = json.loads((tmp_path / "l.json").read_text())["summary"]["live"]
    assert (s["tool"], s["captured"], s["received_by_filter"], s["kernel_drops"]) == ("dumpcap", n, n + 4, 4)
    same_csvs(tmp_path / "live", reference_csv(ng, tmp_path / "ref"))


LOSS_SENDER_SIDE = REPO / "captures" / "network-loss.pcap"


def test_the_overview_says_the_stream_ended_not_capturing(monkeypatch, tmp_path):
    """After the last packet of `cat x.pcap | roceview live -r -` the overview said
    'capture capturing' next to 'loaded' until q."""
    import roceview
    from roceview.cli import Environment, main
    from roceview.tui import Options

    seen = {}

    def run_app(source, *, title, options, live_stats):
        seen["during"] = live_stats()["capture"]
        for batch in source:
            source.analysis.feed(batch)
        seen["after"] = live_stats()["capture"]

    fake = types.SimpleNamespace(run_app=run_app, Options=Options)
    monkeypatch.setitem(sys.modules, "roceview.tui", fake)
    monkeypatch.setattr(roceview, "tui", fake)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = io.StringIO()
    assert main(["live", "-r", str(LOSS_SENDER_SIDE)], Environment(stdout=Terminal(), stderr=err)) == 0, err.getvalue()
    assert seen == {"during": "capturing", "after": "ended (end of stream)"}


def test_a_slow_capture_rate_is_not_zero():
    from roceview.tui.overview import _rate

    assert (_rate(43 / 250.573), _rate(4_380_651.2), _rate(12.4)) == ("0.17", "4,380,651", "12")
