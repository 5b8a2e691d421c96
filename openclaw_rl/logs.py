"""structlog set-up shared by every process."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog


class DropOnError:
    """A log stream whose writes never raise: a full disk under the log file must not turn the request being logged
    into a failure (an error handler that logs before answering would answer 500 instead of its 503)."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except (OSError, ValueError):  # ENOSPC/EIO, or a closed stream at exit
            return 0

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def isatty(self) -> bool:
        return self.stream.isatty()


def configure_logging(level: str = "info", json_lines: bool = False, process: str | None = None) -> None:
    numeric = getattr(logging, level.upper(), logging.INFO)
    processors: list = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json_lines:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=DropOnError(sys.stderr)),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=max(numeric, logging.WARNING), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    if process:
        structlog.contextvars.bind_contextvars(process=process)
