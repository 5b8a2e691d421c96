"""openclaw_rl/console.py: plain, parseable output off a terminal; colour on one unless NO_COLOR; errors on stderr."""

from __future__ import annotations

import io

import pytest

from openclaw_rl import console as style

ANSI = "\x1b["


@pytest.fixture(autouse=True)
def _colour_env(monkeypatch):
    # A known terminal type and no NO_COLOR, whatever the machine running the tests has.
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_a_table_off_a_terminal_is_plain_aligned_columns(capsys):
    style.table(
        ["KEY ID", "USER", "STATE"],
        [["3f2a9c01d4e5", "alice", "active"], ["b1", "bob [admin]", None]],
        right={"STATE"},
    )
    out, err = capsys.readouterr()
    assert ANSI not in out and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["KEY", "ID", "USER", "STATE"]
    # Two spaces between columns; each column starts where its header does; right-aligned ends where it ends.
    assert lines[0].index("USER") == lines[1].index("alice") == lines[2].index("bob [admin]")
    assert lines[1].split() == ["3f2a9c01d4e5", "alice", "active"]
    assert lines[2].endswith(" -") and len(lines[2]) == len(lines[1])  # None shows as '-', right-aligned
    assert "─" not in out and "|" not in out  # no box drawing
    assert all(line == line.rstrip() for line in lines)


def test_a_table_with_no_rows_still_has_its_header_and_a_wide_one_never_wraps(capsys):
    style.table(["SESSION", "USER"], [])
    assert capsys.readouterr().out == "SESSION  USER\n"
    long = "x" * 300
    style.table(["A", "B"], [[long, "y"]], title="things")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "things" and out[2] == f"{long}  y"


def test_errors_go_to_stderr_with_the_command_prefix(capsys):
    style.error("keys", "no key with id x")
    style.error(None, "invalid settings")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["openclaw-rl keys: no key with id x", "openclaw-rl: invalid settings"]
    assert ANSI not in err


def test_success_and_note_lines(capsys):
    style.success("revoked key b1 of user bob")
    style.note("the only time the key is shown")
    style.note("put it first in the keyring", err=True)
    out, err = capsys.readouterr()
    assert out.splitlines() == ["revoked key b1 of user bob", "the only time the key is shown"]
    assert err == "put it first in the keyring\n"
    assert ANSI not in out + err


def test_text_is_never_read_as_markup(capsys):
    style.success("[#####-----] 5/10 [tool_call f(x)] :smile: [bold]not bold[/bold]")
    assert capsys.readouterr().out == "[#####-----] 5/10 [tool_call f(x)] :smile: [bold]not bold[/bold]\n"


def test_a_terminal_gets_colour():
    buf = io.StringIO()
    style.error("keys", "no key", file=buf, force_terminal=True)
    assert buf.getvalue().startswith(ANSI) and "openclaw-rl keys: no key" in buf.getvalue()
    buf = io.StringIO()
    style.table(["KEY ID", "USER"], [["b1", "bob"]], file=buf, force_terminal=True)
    assert ANSI in buf.getvalue() and "KEY ID" in buf.getvalue() and "bob" in buf.getvalue()


def test_no_color_is_respected_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    buf = io.StringIO()
    style.error("keys", "no key", file=buf, force_terminal=True)
    style.success("done", file=buf, force_terminal=True)
    style.table(["KEY ID", "USER"], [["b1", "bob"]], file=buf, force_terminal=True)
    assert ANSI not in buf.getvalue()
    assert "openclaw-rl keys: no key\ndone\n" in buf.getvalue() and "bob" in buf.getvalue()


def test_bar_and_status_line():
    assert style.bar(5, 10, width=10) == "[#####-----]"
    assert style.bar(50, 10, width=4) == "[####]" and style.bar(1, 0, width=4) == "[----]"
    assert style.bar(1, 4, width=4, empty=".") == "[#...]"
    buf = io.StringIO()
    line = style.StatusLine(buf)
    line.show("v1 3/8")
    line.show("v1 3/8")  # unchanged: not printed again
    line.show("v1 4/8")
    line.end()
    assert buf.getvalue() == "v1 3/8\nv1 4/8\n"  # not a terminal: one line per change, no cursor codes
