"""`roceview generate SCENARIO -o FILE [--seed N] [--scale N] [--mirror sender|receiver]`."""
from __future__ import annotations

import argparse

from roceview.errors import BadInput, WriteError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", metavar="SCENARIO",
                        help="fault to simulate (`roceview generate list` prints them)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="capture to write: .pcapng -> pcapng, anything else -> pcap (ns); "
                             "- is standard output (pcap)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the traffic volume (messages) by this factor (default 1)")
    parser.add_argument("--mirror", choices=("sender", "receiver"), default=None,
                        help="capture point: the senders' links (before the switch) or the "
                             "receiver's link (after it); default per scenario")
    parser.add_argument("--truth", metavar="FILE", help="also write the ground truth as JSON (- for standard output)")


def run(args, env):
    from roceview.commands.base import ExitStatus
    from roceview.generate import SCENARIOS, generate

    if args.scenario == "list":
        for name, sc in SCENARIOS.items():
            print(f"{name:28s} {sc.summary}", file=env.stdout)
        return ExitStatus.OK
    if args.scenario not in SCENARIOS:
        raise BadInput(f"unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}")
    if not args.output:
        raise BadInput("an output file is required: -o FILE")
    if args.output == "-" and args.truth == "-":
        raise BadInput("-o - and --truth - would both write to standard output: name a file for one")
    if args.seed < 0:                   # numpy's generators take a non-negative seed
        raise BadInput(f"--seed must be >= 0, got {args.seed}")
    if not args.scale > 0 or args.scale > 1000:
        raise BadInput(f"--scale must be in (0, 1000], got {args.scale:g}")
    from roceview.commands.progress import Progress

    with Progress(env.stderr, f"generating {args.scenario}", counts=False) as bar:
        cap = generate(args.scenario, seed=args.seed, scale=args.scale, mirror=args.mirror)
        bar.describe(f"writing {len(cap):,} frames")
        for write, name in ((lambda: _write_capture(cap, args.output, env), args.output),
                            (lambda: args.truth and _write_truth(cap.truth, args.truth, env), args.truth)):
            try:
                write()
            except BrokenPipeError:  # `-o - | head`: quiet, as the other commands end on a closed pipe
                raise
            except OSError as exc:   # e.g. the disk is full
                raise WriteError(f"cannot write {name}: {exc.strerror or exc}") from None
    t = cap.truth
    print(f"{args.output}: {len(cap)} frames, scenario {t.scenario}, seed {t.seed}, "
          f"mirror {t.mirror}-side", file=env.stderr)
    return ExitStatus.OK


def _write_capture(cap, output: str, env) -> None:
    """`-o -` streams the pcap to standard output (as tcpdump's `-w -`): written to a temporary
    folder first, since the writers name a file, then copied."""
    from roceview.generate import write_capture

    if output != "-":
        return write_capture(cap, output)
    import shutil
    import tempfile

    from roceview import interrupt

    with tempfile.TemporaryDirectory(prefix="roceview-") as folder:
        interrupt.remove_on_interrupt(folder, "tree")
        path = f"{folder}/capture.pcap"
        write_capture(cap, path)
        env.stdout.flush()
        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, env.stdout.buffer)
        env.stdout.flush()


def _write_truth(truth, path, env) -> None:
    import json
    from contextlib import nullcontext

    from roceview.capture.writer import atomic_output

    with nullcontext(env.stdout) if path == "-" else atomic_output(path, "w") as fh:
        json.dump(truth.as_dict(), fh, indent=1)
        fh.write("\n")

