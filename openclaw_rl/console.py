"""One output style for every `openclaw-rl` command and benchmark: tables, errors, success and note lines, bars.

Machines read `--json`; people read these. On a terminal they have colour (unless NO_COLOR is set); in a pipe, a
file or a test they are plain text without ANSI codes, and tables are aligned columns separated by two spaces
under a header line, with no box drawing, so `grep`, `awk` and tests can parse them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import IO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

PROG = "openclaw-rl"
_WIDE = 100_000  # not a terminal: never wrap a table's cells or a line (a pipe has no width)


def colour_wanted(stream: IO[str], force_terminal: bool | None = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set to anything non-empty (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if force_terminal is not None:
        return force_terminal
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def console(stream: IO[str] | None = None, force_terminal: bool | None = None) -> Console:
    """A rich console on `stream` (default: stdout as it is now, so pytest's capture sees it)."""
    stream = stream if stream is not None else sys.stdout
    tty = force_terminal if force_terminal is not None else bool(getattr(stream, "isatty", lambda: False)())
    colour = colour_wanted(stream, force_terminal)
    return Console(
        file=stream,
        force_terminal=tty,
        color_system="auto" if colour else None,
        no_color=not colour,
        width=None if tty else _WIDE,
        highlight=False,  # never colour numbers or paths on our own: text is data
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    title: str | None = None,
    *,
    right: Collection[str] = (),
    file: IO[str] | None = None,
    force_terminal: bool | None = None,
) -> None:
    """Print an aligned table: `columns` are the headers (stable: scripts rely on them), `right` the ones
    right-aligned (numbers). None prints as '-'."""
    con = console(file, force_terminal)
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold" if con.is_terminal else None,
        box=box.SIMPLE_HEAD if con.is_terminal else None,  # a rule under the header on a terminal; plain otherwise
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),  # two spaces between columns
        header_style="bold cyan" if con.is_terminal else None,
    )
    for name in columns:
        t.add_column(name, justify="right" if name in right else "left", no_wrap=not con.is_terminal)
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    with con.capture() as cap:
        con.print(t)
    # Trailing padding is noise for parsers and diffs.
    text = "\n".join(line.rstrip() for line in cap.get().splitlines())
    out = file if file is not None else sys.stdout
    out.write(text + "\n")
    out.flush()


def _line(message: str, style: str | None, stream: IO[str], force_terminal: bool | None) -> None:
    # Text, never markup: messages hold '[...]' (bars, tool calls) that rich would otherwise read as tags.
    console(stream, force_terminal).print(Text(message, style=style or ""))
    stream.flush()


def error(
    command: str | None, message: str, *, file: IO[str] | None = None, force_terminal: bool | None = None
) -> None:
    """`openclaw-rl <command>: <message>` on stderr (red on a terminal); no command: `openclaw-rl: <message>`."""
    prefix = f"{PROG} {command}:" if command else f"{PROG}:"
    _line(f"{prefix} {message}", "red", file if file is not None else sys.stderr, force_terminal)


def success(message: str, *, file: IO[str] | None = None, force_terminal: bool | None = None) -> None:
    """A done-it line on stdout (green on a terminal)."""
    _line(message, "green", file if file is not None else sys.stdout, force_terminal)


def note(message: str, *, err: bool = False, file: IO[str] | None = None, force_terminal: bool | None = None) -> None:
    """A secondary line (dim on a terminal): stdout, or stderr with err=True (advice that is not the output)."""
    _line(message, "dim", file if file is not None else (sys.stderr if err else sys.stdout), force_terminal)


def bar(done: float, total: float, width: int = 24, fill: str = "#", empty: str = "-") -> str:
    """`[######------]`: done out of total (clamped), `width` cells."""
    frac = 0.0 if total <= 0 else max(0.0, min(1.0, done / total))
    n = int(frac * width)
    return "[" + fill * n + empty * (width - n) + "]"


class StatusLine:
    """One progress line: redrawn in place on a terminal, one printed line per change otherwise (logs, pipes)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = ""

    def show(self, line: str) -> None:
        if line == self.last:
            return
        self.last = line
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        """Leave the terminal's cursor on a fresh line."""
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


# ---- command help: every command says what it does and shows an example ----------------------------------------


def commands(parser: argparse.ArgumentParser, path: str = ""):
    """(command path, its parser, the help its parent lists it with) for every command, depth first."""
    yield path, parser, None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias (episodes run = start)
                    continue
                seen.add(id(sub))
                child = f"{path} {name}".strip()
                for p, q, h in commands(sub, child):
                    yield p, q, h if p != child else helps.get(name)


def with_examples(parser: argparse.ArgumentParser, examples: dict[str, list[str]]) -> argparse.ArgumentParser:
    """Every command without a description gets the help its parent lists it with; its `examples[path]` go to its
    epilog."""
    for path, sub, listed_as in commands(parser):
        if not sub.description and listed_as:
            sub.description = listed_as[0].upper() + listed_as[1:] + "."
        said = examples.get(path, [])
        if said and "example" not in (sub.epilog or "") and "example" not in (sub.description or ""):
            block = "example" + ("s" if len(said) > 1 else "") + ":\n" + "\n".join(f"  {e}" for e in said)
            sub.epilog = f"{sub.epilog}\n\n{block}" if sub.epilog else block
            if sub.formatter_class is argparse.HelpFormatter:
                sub.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser
