"""Ports handed to services lie outside the kernel's ephemeral range, so no outgoing connection can take them."""

from __future__ import annotations

import socket

from openclaw_rl import ports


def test_ports_are_free_below_the_ephemeral_range_and_never_repeat():
    top = ports._ephemeral_start()
    picked = [ports.free_port() for _ in range(300)]
    assert len(set(picked)) == len(picked)
    assert all(ports.LOWEST <= p < top for p in picked)
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked[-1]))  # free when handed out


def _bindable_ports(count: int) -> list[int]:
    """Ports below the ephemeral range that nothing holds now (another test or process may hold any given one)."""
    found = [p for p in range(ports.LOWEST + 1, ports.LOWEST + 500) if ports._bindable(p, "127.0.0.1")]
    assert len(found) >= count
    return found[:count]


def test_a_taken_or_handed_out_port_is_skipped(monkeypatch):
    handed_out, taken, free = _bindable_ports(3)
    # This process's earlier picks are not this test's business: start from a known set.
    monkeypatch.setattr(ports, "_handed_out", {handed_out})
    with socket.socket() as held:
        held.bind(("127.0.0.1", taken))
        draws = iter([handed_out, taken, free])
        monkeypatch.setattr(ports._random, "randrange", lambda lo, hi: next(draws))
        assert ports.free_port() == free
    assert ports._handed_out == {handed_out, free}


def test_no_room_below_the_range_falls_back_to_the_kernel(monkeypatch):
    monkeypatch.setattr(ports, "_ephemeral_start", lambda: ports.LOWEST + 10)
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_range_in_the_environment_bounds_the_picks(monkeypatch):
    monkeypatch.setenv(ports.RANGE_ENV, "20000-20099")
    picked = [ports.free_port() for _ in range(20)]
    assert all(20000 <= p <= 20099 for p in picked) and len(set(picked)) == 20


def test_picks_do_not_draw_on_the_global_generator(monkeypatch):
    """Code that seeds the global generator alike in two processes (a benchmark, a property test) must not make
    them draw the same ports."""
    import random

    def seeded_alike(*_):
        raise AssertionError("free_port drew from the global random generator")

    monkeypatch.setattr(random, "randrange", seeded_alike)
    assert ports.LOWEST <= ports.free_port() < ports._ephemeral_start()


def test_a_malformed_range_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(ports.RANGE_ENV, "lots")
    try:
        ports.free_port()
    except ValueError as exc:
        assert "OPENCLAW_PORTS='lots'" in str(exc) and "<low>-<high>" in str(exc)
    else:
        raise AssertionError("a malformed range was accepted")
