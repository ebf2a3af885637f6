"""Logging through structlog: readable lines by default, JSON lines with ``--log-format json``.

Logs go to stderr; a command's results go to stdout, so ``dftpass plan --format json | jq``
works while logs are shown.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(fmt: str = "console", verbosity: int = 0) -> None:
    level = logging.WARNING - 10 * verbosity if verbosity >= 0 else logging.ERROR
    level = max(logging.DEBUG, level)
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso" if fmt == "json" else "%H:%M:%S"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
