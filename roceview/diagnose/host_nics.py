"""Which source MACs are RoCE host NICs (Context.host_macs): the PFC and ECN rules read a pause's
owner from it (a host's own NIC pausing is a slow receiver; a switch port's pause is the fabric's).

A MAC that sends for exactly one RoCE address that no other MAC sends from is that host's NIC: a
router MAC carries many addresses, and a routed capture of several links shows a remote host's
frames from each link's switch port. That alone takes a switch port for a NIC when it forwards a
single peer's frames (one host pair across a routed switch, mirrored on one host's link). A router
decrements the IPv4 TTL / IPv6 hop limit of what it forwards (RFC 791, RFC 8200; RoCEv2 is routed
as any UDP), and a host starts its frames at a usual initial value: 64 (Linux, so rxe and mlx5's
RoCEv2 GIDs by default), 255 or 128. A MAC whose RoCEv2 frames' highest TTL is one to MAX_HOPS
below such a value forwarded them all: it is no host's NIC, and its frames do not count against
the NIC that really sends for that address, when another MAC's frames carry a higher TTL up to
that initial value (the value is in use on this capture: a host stack set to start just below
64, 128 or 255 on every host, as all at 60, keeps its NICs; one such host among hosts at 64 is
taken for a router). RoCEv1 (never routed) and MACs without a TTL are judged by their
addresses alone.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

INITIAL_TTLS = np.array([64, 128, 255])   # the usual initial TTLs / hop limits of host stacks
MAX_HOPS = 8                              # routers a frame may have crossed: a 5-tier Clos and more


def routed_ttl(ttl) -> np.ndarray:
    """Per TTL (-1: none), whether it is 1 to MAX_HOPS below the usual initial value at or above it."""
    ttl = np.asarray(ttl, dtype=np.int64)
    below = _start(ttl) - ttl
    return (ttl >= 0) & (below >= 1) & (below <= MAX_HOPS)


def forwarded_ttl(ttl) -> np.ndarray:
    """Per MAC's highest TTL: routed_ttl, and another MAC's highest is above it, up to the initial
    value (what a host sends at is in use here, and this MAC's frames came one hop or more below)."""
    ttl = np.asarray(ttl, dtype=np.int64)
    ordered = np.sort(ttl)
    higher = np.searchsorted(ordered, _start(ttl), side="right") - np.searchsorted(ordered, ttl, side="right")
    return routed_ttl(ttl) & (higher > 0)


def _start(ttl: np.ndarray) -> np.ndarray:
    """The usual initial value at or above each TTL."""
    return INITIAL_TTLS[np.minimum(np.searchsorted(INITIAL_TTLS, ttl), len(INITIAL_TTLS) - 1)]


def host_macs(classes, address_text) -> dict[int, set]:
    """MAC -> {the address} of each MAC that is a RoCE host's NIC (module docstring), from the
    packet classes (diagnose.facts.Klass); address_text(words) spells an address."""
    seen: dict[int, set] = defaultdict(set)
    highest: dict[int, int] = {}                     # MAC -> its RoCEv2 frames' highest TTL
    for c in classes:
        if c.src_mac >= 0:
            seen[c.src_mac].add(address_text(c.src))
            if c.proto == "roce_v2":
                highest[c.src_mac] = max(highest.get(c.src_mac, -1), c.ttl_max)
    macs = list(highest)
    forwarded = {m for m, routed in zip(macs, forwarded_ttl([highest[m] for m in macs]).tolist()) if routed}
    senders: dict[str, set] = defaultdict(set)
    for mac, addresses in seen.items():
        for address in addresses if mac not in forwarded else ():
            senders[address].add(mac)
    return {m: a for m, a in seen.items()
            if m not in forwarded and len(a) == 1 and len(senders[next(iter(a))]) == 1}
