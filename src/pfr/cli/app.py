"""The ``pfr`` Typer application that every command module registers with, and process-wide state."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Annotated

import typer

app = typer.Typer(
    name="pfr",
    help="Paired Fallback Robustness Test: does a decision model use its fallback when it should, and consistently?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _Process:
    """Whether :func:`pfr.cli.main` runs as the process's program (not called in-process with arguments)."""

    owned = False


PROCESS = _Process()


def _version(value: bool) -> None:
    if value:
        from pfr import __version__

        typer.echo(f"pfr {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Paired Fallback Robustness Test: does a decision model use its fallback when it should, and consistently?"""


@contextlib.contextmanager
def lasting_heap() -> Iterator[None]:
    """Pause the cyclic garbage collector while a command builds objects that live until it exits:
    a report's 10^5 results hold no reference cycles, and each full pass over them costs about
    0.2 s per 10^4 texts. When the command owns the process they are then frozen, so the pass the
    interpreter makes at exit skips them too (docs/performance.md); an in-process caller keeps
    an ordinary collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if PROCESS.owned:
            gc.freeze()
        if was_enabled:
            gc.enable()
