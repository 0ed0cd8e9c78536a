"""A study's ``[check]`` table: the thresholds of :mod:`pfr.report.gate`, applied to the study's report,
so that ``pfr study`` fails a build the way ``pfr check`` does.

Example::

    [check]
    min = { P4 = 0.8, J = 0.7 }      # or a list: ["P4=0.8", "J=0.7"]
    max = { "DR-F" = 0.1 }
    on = "interval"                  # or "point"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.errors import DataError, PfrError

CHECK_KEYS = ("min", "max", "on")


class GateFailed(PfrError):
    """A study's ``[check]`` found a metric that misses its threshold: exit 1, as ``pfr check``."""

    exit_code = 1


@dataclass(frozen=True)
class CheckSpec:
    mins: tuple[str, ...] = ()
    maxs: tuple[str, ...] = ()
    on: str = "interval"


def _items(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DataError(f'{where}: give a table (P4 = 0.8) or a list of strings ("P4=0.8")')


def parse_check(table: Any, where: str) -> CheckSpec:
    """The ``[check]`` table, checked: unknown keys, metrics and values are errors naming the file."""
    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a table ([check])")
    bad = sorted(set(table) - set(CHECK_KEYS))
    if bad:
        raise DataError(f"{where}: unknown key {bad[0]!r} (valid keys: {', '.join(CHECK_KEYS)})")
    spec = CheckSpec(
        _items(table.get("min", {}), f"{where}.min"), _items(table.get("max", {}), f"{where}.max"),
        str(table.get("on", "interval")),
    )  # fmt: skip
    from pfr.report.gate import check_on, parse_thresholds

    try:
        if not parse_thresholds(spec.mins, spec.maxs):
            raise PfrError("give at least one min or max")
        check_on(spec.on)
    except PfrError as exc:
        raise DataError(f"{where}: {exc}") from None
    return spec


def run_check(spec: CheckSpec, report: Any, store: Path) -> list[Path]:
    """Check the study's report; writes ``check.txt``, ``check.json`` and ``check.xml`` (JUnit) into the
    store, prints the table, appends to ``$GITHUB_STEP_SUMMARY``, and raises :class:`GateFailed` on a fail."""
    from pfr.files import atomic_write
    from pfr.report.gate import evaluate, parse_thresholds
    from pfr.report.gate_output import publish, render_checks, verdict_line

    results = evaluate(report, parse_thresholds(spec.mins, spec.maxs), spec.on)
    paths: Sequence[Path] = (store / "check.txt", store / "check.json", store / "check.xml")
    atomic_write(paths[0], [render_checks(results, "text").rstrip("\n")])
    atomic_write(paths[1], [render_checks(results, "json").rstrip("\n")])
    publish(results, paths[2], os.environ.get("GITHUB_STEP_SUMMARY") or None)
    sys.stdout.write(render_checks(results, "text"))
    sys.stdout.flush()
    if not all(r.passed for r in results):
        raise GateFailed(f"{verdict_line(results)} See {paths[0]} and {paths[2]}")
    return list(paths)
