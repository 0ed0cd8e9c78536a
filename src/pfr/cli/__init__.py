"""The ``pfr`` command line: a thin layer over :mod:`pfr.api`.

Commands live in modules by what they work on (:mod:`pfr.cli.build`: datasets, build, run;
:mod:`pfr.cli.results`: report, thresholds, export; :mod:`pfr.cli.study`: study, demo) and register
with :data:`pfr.cli.app.app`; options shared by several commands are declared once in
:mod:`pfr.cli.options`. Every :class:`~pfr.errors.PfrError` ends the command with one line on
stderr and exit code 2.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

import typer

from pfr.cli import build, compare, results, study  # noqa: F401  (each registers its commands with the app)
from pfr.cli.app import PROCESS, app, command
from pfr.errors import PfrError

__all__ = ["app", "main"]


def _usage_errors() -> tuple[type[BaseException], ...]:
    """The exception types of the click that parses our command line.

    typer >= 0.2x bundles its own copy of click (``typer._click``); older typer uses the ``click``
    package. Both are listed so that a usage error is one line whichever is installed
    (pyproject.toml pins the range that is tested).
    """
    found: list[type[BaseException]] = []
    try:
        from typer._click.exceptions import ClickException as BundledClickException

        found.append(BundledClickException)
    except ImportError:  # pragma: no cover - older typer
        pass
    try:
        from click.exceptions import ClickException

        found.append(ClickException)
    except ImportError:  # pragma: no cover - click not installed
        pass
    return tuple(found)


def _aborts() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = [typer.Abort]
    try:
        from click.exceptions import Abort

        found.append(Abort)
    except ImportError:  # pragma: no cover
        pass
    return tuple(found)


def _usage_line(exc: BaseException) -> str:
    """One line for a usage error: click's message and where to find help."""
    fmt = getattr(exc, "format_message", None)
    message = fmt() if callable(fmt) else str(exc)
    message = " ".join(str(message).split())
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"pfr: error: {message}{hint}"


def _exit_interrupted(where: str = "") -> NoReturn:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not turn this into a traceback
    where = f" {where}" if where else ""
    sys.stderr.write(f"pfr: interrupted{where}; everything committed before the interrupt is kept\n")
    sys.stderr.flush()
    raise SystemExit(130)


def main(argv: list[str] | None = None) -> None:
    """Entry point. Exit codes: 0 success; 2 a usage error or bad input (one line on stderr,
    no traceback); 130 interrupted (one line; results committed before the signal stay)."""
    from pfr.console import printable_streams

    printable_streams()  # a cp1252 or ASCII console prints "-" for "−" instead of crashing
    PROCESS.owned = argv is None
    args = sys.argv[1:] if argv is None else list(argv)
    usage_errors, aborts = _usage_errors(), _aborts()
    try:
        # Not app(standalone_mode=False): typer's own main turns Ctrl-C into a *return value* of 130
        # there, which a caller cannot tell from success. Parsing and invoking directly lets every
        # exception reach the handlers below.
        cmd = command()
        with cmd.make_context("pfr", args) as ctx:
            cmd.invoke(ctx)
    except PfrError as exc:
        sys.stderr.write(f"pfr: error: {' '.join(str(exc).split())}\n")
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt as exc:
        _exit_interrupted(" ".join(str(exc).split()))
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except BrokenPipeError:
        # `pfr report … | head`: the reader went away; nothing is wrong with pfr's work.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None
    except usage_errors as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `pfr` or `pfr run`: the help text
            ctx_ = getattr(exc, "ctx", None)
            sys.stdout.write((ctx_.get_help() if ctx_ is not None else str(exc)) + "\n")
            raise SystemExit(2) from None
        sys.stderr.write(_usage_line(exc) + "\n")
        raise SystemExit(2) from None
    except aborts:
        _exit_interrupted()
    except OSError as exc:
        # The environment refused a file operation (permissions, a full disk, a vanished folder):
        # one line that names the file; anything pfr could commit is committed.
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"pfr: error: {where}{exc.strerror or exc}\n")
        raise SystemExit(2) from None

