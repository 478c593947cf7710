"""roceview: RoCE traffic analyzer and congestion diagnoser."""
__version__ = "0.1.0"


def read_packets(paths, columns=None, roce_ports=(), warn=None, analysis=False, pmtu=None):
    """The packets table as a pandas DataFrame (columns: docs/columns.md); analysis=True adds
    the analysis flags and related frames (flags, missing_psns, rel_frame, rtt_ns)."""
    from roceview.api import read_packets as _read

    return _read(paths, columns=columns, roce_ports=roce_ports, warn=warn, analysis=analysis, pmtu=pmtu)


def iter_packets(paths, columns=None, roce_ports=(), chunk_packets=1 << 18, warn=None, analysis=False, pmtu=None):
    """The packets table in DataFrame chunks, for files larger than memory; analysis=True as
    read_packets."""
    from roceview.api import iter_packets as _iter

    return _iter(paths, columns=columns, roce_ports=roce_ports, chunk_packets=chunk_packets, warn=warn,
                 analysis=analysis, pmtu=pmtu)


# The function itself (api.py imports only typing at first): help(roceview.analyze) shows its
# keyword arguments; the analysis modules still import only when it runs.
from roceview.api import analyze  # noqa: E402
