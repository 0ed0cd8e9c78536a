"""The ``pfr`` Typer application that every command module registers with, and process-wide state."""

from __future__ import annotations

import contextlib
import gc
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperOption

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


#: the value placeholder ``--help`` shows for an option of this type (when it declares none)
_VALUE_NAMES: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


class _Argument(TyperArgument):
    """An argument whose help shows its placeholder (``STORE...``) alone, not a Python type beside it,
    and the same placeholder in the usage line."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [self.metavar or self.display_name_raw]


def _name_values(command: Any) -> None:
    """Give every parameter of ``command`` (and its subcommands) a placeholder a user can read:
    none for a flag (``--dry-run``, ``--help``), ``STORE...`` for arguments, ``METRIC=VALUE`` or
    ``PATH`` for options, instead of typer's ``<bool>`` / ``<list[Path]>``."""
    from typer._click import Context

    help_option = command.get_help_option(Context(command))  # made now (and kept by the command) to be named
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if isinstance(param, TyperOption):
            if param.is_flag:
                param.metavar = ""
            elif param.metavar is None:
                annotation = param.type_descriptor.annotation
                if typing.get_origin(annotation) is list:  # a repeatable option takes one value each time
                    annotation = typing.get_args(annotation)[0]
                param.metavar = _VALUE_NAMES.get(annotation, "VALUE")
        elif isinstance(param, TyperArgument):
            name = param.metavar or (param.name or "value").upper()
            param.metavar = name + ("..." if param.nargs != 1 and not name.endswith("...") else "")
            param.__class__ = _Argument
    for sub in getattr(command, "commands", {}).values():
        _name_values(sub)


def command() -> Any:
    """The click command of :data:`app`, every placeholder named (:func:`_name_values`)."""
    from typer.main import get_command

    cmd = get_command(app)
    _name_values(cmd)
    return cmd
