"""The shared build/run flags: declared once, spliced into each command where ``flags`` stands."""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import Any

from typer.main import get_command

from pfr.cli import app
from pfr.cli.build import build, run
from pfr.cli.options import BuildFlags, with_build_flags

SHARED = [f.name for f in fields(BuildFlags)]


def test_build_and_run_take_every_shared_flag_in_place() -> None:
    build_params = list(inspect.signature(build).parameters)
    assert build_params == ["dataset", "out", *SHARED]
    run_params = list(inspect.signature(run).parameters)
    at = run_params.index(SHARED[0])
    assert run_params[:at] == ["model", "store", "dataset", "requests"]
    assert run_params[at : at + len(SHARED)] == SHARED
    assert "flags" not in run_params and "model_opt" in run_params
    command = get_command(app)
    for name in ("build", "run"):
        opts = {o for p in command.commands[name].params for o in p.opts}  # type: ignore[attr-defined]
        assert {"--panel", "--data-dir", "--options", "-k", "--policy-info", "--show-dropped"} <= opts


def test_the_flags_reach_the_command_as_one_value() -> None:
    seen: list[BuildFlags] = []

    def command(dataset: str, flags: BuildFlags) -> None:
        seen.append(flags)

    wrapped: Any = with_build_flags(command)
    values = {f.name: f.default for f in fields(BuildFlags)} | {"k": 5, "task": "compact", "limit": 7}
    wrapped(dataset="trec", **values)
    assert seen == [BuildFlags(**values)]
    design = seen[0].design()
    assert (design.k, design.task, design.seed) == (5, "compact", 0)
    assert seen[0].user_format().text_col == "text"
