"""The report's connections section: one line per RDMA CM connection (connections.csv), what
its two sides agreed on and how it ended; the whole table is in --csv / --json."""
from __future__ import annotations

from roceview.render.screen import Screen
from roceview.units import count, duration, plural

SHOWN = 20           # connections listed; a CM storm lists the first ones and counts the rest


def print_connections(result, console: Screen) -> None:
    table = getattr(result, "connections_table", None)
    if table is None or not len(table):
        return
    console.print("\n" + console.style("Connections", "bold") + f" ({plural(len(table), 'RDMA CM connection')})")
    for i in range(min(len(table), SHOWN)):
        console.para(connection_line({k: table.data[k][i] for k in table.columns}))
    if len(table) > SHOWN:
        console.para(f"{console.ellipsis} {count(len(table) - SHOWN)} more: connections.csv (--csv) or --json")


def connection_line(c: dict) -> str:
    """`client>server#id  service  QPs 0x..  ↔ 0x..  MTU 1024  setup 7.202 ms  state (reason)`."""
    qp = lambda q: f"0x{int(q):06x}" if int(q) >= 0 else "?"       # noqa: E731
    parts = [c["connection"], c["service"] or c["service_id"], f"QPs {qp(c['client_qp'])} <> {qp(c['server_qp'])}"]
    if int(c["path_mtu"]) > 0:
        parts.append(f"MTU {int(c['path_mtu'])}")
    if c["setup_us"] == c["setup_us"] and float(c["setup_us"]) >= 0:          # not NaN: the RTU was seen
        parts.append(f"setup {duration(float(c['setup_us']) * 1000)}")
    retries = int(c["req_retries"]) + int(c["rep_retries"])
    if retries:
        parts.append(plural(retries, "retry", "retries"))
    parts.append(c["state"] + (f" ({c['reject_reason']})" if c["reject_reason"] else ""))
    return "  ".join(str(p) for p in parts if p != "")
