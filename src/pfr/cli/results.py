"""``pfr report``, ``pfr thresholds`` and ``pfr export``: what the stored scores show."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from pfr import api
from pfr.cli.app import app, lasting_heap
from pfr.cli.options import BootSeedOpt, DrawsOpt, OutOpt


@app.command()
def report(
    stores: Annotated[list[Path], typer.Argument(metavar="STORE", help="one or more results stores")],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help="text, markdown, latex, csv, json or html (default: --out's suffix, else text)"
        ),
    ] = None,
    out: OutOpt = None,
    draws: DrawsOpt = 10_000,
    seed: BootSeedOpt = 0,
    figures: Annotated[Path | None, typer.Option("--figures", help="also write the figures (PNG and SVG) here")] = None,
    family: Annotated[
        str, typer.Option("--family", help="Holm family: primary (main design per model × dataset) or all")
    ] = "primary",
) -> None:
    """Metrics per model × dataset × design, with paired intervals and exact tests."""
    fmt = api.report_format(out, fmt)  # a bad suffix or folder fails before the stores are read
    for path, option in ((out, "--out"), (figures, "--figures")):
        if path is not None:
            api.in_existing_folder(path, option)
    with lasting_heap():
        text = api.report(stores, fmt, draws=draws, seed=seed, family=family, figures=figures)
        if figures is not None:
            typer.echo(f"wrote figures to {figures}", err=True)
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        api.atomic_write(out, [text.rstrip("\n")])
        typer.echo(f"wrote {out}", err=True)


@app.command()
def thresholds(
    dev: Annotated[Path, typer.Option("--dev", help="store with the development panel's scores")],
    test: Annotated[Path, typer.Option("--test", help="store with the test (main) panel's scores")],
    alpha: Annotated[float, typer.Option(help="false-fallback budget of the one-sided calibration")] = api.ALPHA,
    draws: Annotated[int, typer.Option(help="bootstrap refits of the development threshold")] = 2000,
    seed: BootSeedOpt = 0,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json")] = "text",
) -> None:
    """Selection rules on fixed scores: development threshold, oracles, calibration, refits (docs/method.md §8)."""
    with lasting_heap():
        text = api.thresholds(dev, test, alpha=alpha, draws=draws, seed=seed, fmt=fmt)
    sys.stdout.write(text + "\n")


@app.command()
def check(
    stores: Annotated[
        list[Path],
        typer.Argument(metavar="STORE", help="one or more results stores (with --baseline: one, or STORE@MODEL)"),
    ],
    min_: Annotated[
        list[str] | None, typer.Option("--min", metavar="METRIC=VALUE", help="the metric must reach VALUE (repeatable)")
    ] = None,
    max_: Annotated[
        list[str] | None,
        typer.Option("--max", metavar="METRIC=VALUE", help="the metric must not exceed VALUE (repeatable)"),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", metavar="BASE", help="compare STORE (one store or STORE@MODEL) with this baseline "
                     "(a store or STORE@MODEL), paired on the texts both scored"),
    ] = None,
    max_drop: Annotated[
        list[str] | None,
        typer.Option("--max-drop", metavar="METRIC=VALUE",
                     help="with --baseline: the 95% lower bound of Δ = STORE − BASE must be ≥ −VALUE, for A+, A−, J, "
                     "P4 (repeatable)"),
    ] = None,
    max_rise: Annotated[
        list[str] | None,
        typer.Option("--max-rise", metavar="METRIC=VALUE",
                     help="with --baseline: the 95% upper bound of Δ must be ≤ VALUE, for F+, DR, INV (repeatable)"),
    ] = None,
    on: Annotated[str, typer.Option("--on", help="interval (the 95% bound must clear it) or point")] = "interval",
    junit: Annotated[
        Path | None, typer.Option("--junit", help="also write JUnit XML here (in an existing folder)")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, markdown or json")] = "text",
    draws: DrawsOpt = 10_000,
    seed: BootSeedOpt = 0,
) -> None:
    """A release gate: exit 0 when every metric clears its threshold, 1 when one does not (docs/usage.md);
    with --baseline, a regression gate against an earlier version (docs/before-release.md)."""
    api.render_checks([], fmt)  # an unknown --format or a missing --junit folder fails before the store is read
    if junit is not None:
        api.in_existing_folder(junit, "--junit")
    with lasting_heap():
        results = api.check(stores, min_ or [], max_ or [], on=on, draws=draws, seed=seed, junit=junit,
                            step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None, baseline=baseline,
                            max_drop=max_drop or [], max_rise=max_rise or [])  # fmt: skip
    sys.stdout.write(api.render_checks(results, fmt))
    if not all(r.passed for r in results):
        raise typer.Exit(1)


@app.command()
def export(
    store: Annotated[Path, typer.Argument(metavar="STORE", help="results store")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write (a folder for lm-eval)")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="jsonl, or lm-eval (a task folder)")] = "jsonl",
    task: Annotated[str, typer.Option("--task", help="lm-eval task name")] = "pfr",
) -> None:
    """One JSONL row per scored request: request fields, exact prompt, scores, choice, model, timing."""
    api.in_existing_folder(out, "--out")
    with lasting_heap():
        n = api.export(store, out, fmt=fmt, task=task)
    typer.echo(f"wrote {n} rows to {out}", err=True)


@app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="file of scored requests (from `pfr export`)")],
    store: Annotated[Path, typer.Option("--store", "-s", help="results store to restore them into (created)")],
    fmt: Annotated[str, typer.Option("--from", help="pfr (a `pfr export` file) or lm-eval (--log_samples)")] = "pfr",
) -> None:
    """Restore the scored requests of an export file into a store; `pfr run` then scores only the rest."""
    with lasting_heap():
        done = api.import_scored(path, store, fmt=fmt)
    typer.echo(f"{done.rows} rows: {done.added} results added to {store}, {done.present} already there "
               f"({done.models} model(s))", err=True)  # fmt: skip
