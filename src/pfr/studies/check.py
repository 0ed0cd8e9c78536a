"""A study's ``[check]`` table: the thresholds of :mod:`pfr.report.gate`, applied to the study's report,
so that ``pfr study`` fails a build the way ``pfr check`` does.

Example::

    [check]
    min = { P4 = 0.8, J = 0.7 }      # or a list: ["P4=0.8", "J=0.7"]
    max = { "DR-F" = 0.1 }
    on = "interval"                  # or "point"
    baseline = "runs/v1"             # a regression gate against this store (or STORE@MODEL) …
    max_drop = { P4 = 0.02 }         # … for the limits of `pfr check --baseline`
    max_rise = { "F+" = 0.02 }
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfr.errors import DataError, PfrError

CHECK_KEYS = ("min", "max", "on", "baseline", "max-drop", "max-rise")


class GateFailed(PfrError):
    """A study's ``[check]`` found a metric that misses its threshold: exit 1, as ``pfr check``."""

    exit_code = 1


@dataclass(frozen=True)
class CheckSpec:
    mins: tuple[str, ...] = ()
    maxs: tuple[str, ...] = ()
    on: str = "interval"
    baseline: str | None = None  # resolved against the study file's folder
    drops: tuple[str, ...] = ()
    rises: tuple[str, ...] = ()


def _items(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DataError(f'{where}: give a table (P4 = 0.8) or a list of strings ("P4=0.8")')


def parse_check(table: Any, where: str, base: Path | None = None) -> CheckSpec:
    """The ``[check]`` table, checked: unknown keys, metrics and values are errors naming the file;
    a relative ``baseline`` resolves against ``base`` (the study file's folder)."""
    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a table ([check])")
    table = {str(k).replace("_", "-"): v for k, v in table.items()}
    bad = sorted(set(table) - set(CHECK_KEYS))
    if bad:
        raise DataError(f"{where}: unknown key {bad[0]!r} (valid keys: {', '.join(CHECK_KEYS)})")
    baseline = table.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or not baseline):
        raise DataError(f'{where}.baseline: give the baseline store as a string ("runs/v1" or "runs/v1@MODEL")')
    if baseline is not None and base is not None and not Path(baseline).expanduser().is_absolute():
        baseline = os.path.normpath(base / Path(baseline).expanduser())
    spec = CheckSpec(
        _items(table.get("min", {}), f"{where}.min"), _items(table.get("max", {}), f"{where}.max"),
        str(table.get("on", "interval")), baseline,
        _items(table.get("max-drop", {}), f"{where}.max_drop"), _items(table.get("max-rise", {}), f"{where}.max_rise"),
    )  # fmt: skip
    from pfr.report.gate import check_on, parse_thresholds
    from pfr.report.regression import check_pairing, parse_limits

    try:
        limits = parse_limits(spec.drops, spec.rises)
        check_pairing(spec.baseline, limits)
        if not parse_thresholds(spec.mins, spec.maxs) and not limits:
            raise PfrError("give at least one min or max (or a baseline with max_drop or max_rise)")
        check_on(spec.on)
    except PfrError as exc:
        raise DataError(f"{where}: {exc}") from None
    return spec


def run_check(spec: CheckSpec, report: Any, store: Path, *, draws: int = 10_000, seed: int = 0) -> list[Path]:
    """Check the study's report (and each of its models against ``baseline``); writes ``check.txt``,
    ``check.json`` and ``check.xml`` (JUnit) into the store, prints the table, appends to
    ``$GITHUB_STEP_SUMMARY``, and raises :class:`GateFailed` on a fail."""
    from pfr.files import atomic_write
    from pfr.report.gate import evaluate, parse_thresholds
    from pfr.report.gate_output import Result, publish, render_checks, verdict_line
    from pfr.report.regression import gate_against, parse_limits

    thresholds = parse_thresholds(spec.mins, spec.maxs)
    results: list[Result] = list(evaluate(report, thresholds, spec.on)) if thresholds else []
    if spec.baseline is not None:
        models = sorted({s.model for s in report.settings})
        for model in models:
            cand = str(store) if len(models) == 1 else f"{store}@{model}"
            results += gate_against(spec.baseline, cand, parse_limits(spec.drops, spec.rises), on=spec.on,
                                    draws=draws, seed=seed)  # fmt: skip
    paths: Sequence[Path] = (store / "check.txt", store / "check.json", store / "check.xml")
    atomic_write(paths[0], [render_checks(results, "text").rstrip("\n")])
    atomic_write(paths[1], [render_checks(results, "json").rstrip("\n")])
    publish(results, paths[2], os.environ.get("GITHUB_STEP_SUMMARY") or None)
    sys.stdout.write(render_checks(results, "text"))
    sys.stdout.flush()
    if not all(r.passed for r in results):
        raise GateFailed(f"{verdict_line(results)} See {paths[0]} and {paths[2]}")
    return list(paths)
