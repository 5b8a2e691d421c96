"""Free TCP ports for services this process starts or tells others to listen on.

A port from `bind(0)` lies in the kernel's ephemeral range, which every outgoing connection and every `bind(0)`
of another program (the Temporal dev server picks its internal ports that way) also draws from: between handing
the number out and the service binding it, someone else can take it. Ports below that range are only ever taken
on purpose, so they are picked from there, at random, and never twice by one process.

Processes that pick ports side by side (test workers, each starting stacks) cannot see each other's picks until the
services bind: `OPENCLAW_PORTS=<low>-<high>` gives each its own slice (inherited by the processes it starts).
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

LOWEST = 10_000
"""Below this sit well-known and registered ports that services on a developer's machine often hold."""
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
RANGE_ENV = "OPENCLAW_PORTS"
_handed_out: set[int] = set()
_lock = threading.Lock()
_random = random.Random()
"""Its own generator: code that seeds the global one (a benchmark, a property test) would otherwise make two
processes draw the same ports."""


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS starts at 49152


def _bindable(port: int, host: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _range() -> tuple[int, int]:
    """[low, high) to pick from: `OPENCLAW_PORTS` (inclusive bounds) when set, else below the ephemeral range."""
    top = _ephemeral_start()
    value = os.environ.get(RANGE_ENV, "").strip()
    if not value:
        return LOWEST, top
    try:
        low, high = (int(part) for part in value.split("-"))
    except ValueError:
        raise ValueError(f"{RANGE_ENV}={value!r}: expected <low>-<high>, e.g. 10000-20999") from None
    if not 1024 <= low <= high <= 65535:
        raise ValueError(f"{RANGE_ENV}={value!r}: the bounds must satisfy 1024 <= low <= high <= 65535")
    return low, high + 1


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, outside the ephemeral range where the kernel can hand it to someone else."""
    low, top = _range()
    with _lock:
        if top - low >= 1000 or os.environ.get(RANGE_ENV):
            for _ in range(200):
                port = _random.randrange(low, top)
                # free on `host` and on every interface: a service may be told to listen on either
                if port not in _handed_out and _bindable(port, host) and (host == "" or _bindable(port, "")):
                    _handed_out.add(port)
                    return port
        # No room below the ephemeral range (an unusual kernel setting): let the kernel choose.
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        _handed_out.add(port)
        return port
