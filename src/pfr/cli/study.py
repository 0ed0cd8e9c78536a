"""``pfr study`` (a study file end to end) and ``pfr demo`` (the embedded default)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pfr import api
from pfr.cli.app import app
from pfr.cli.options import AddressOpt, DataDirOpt, ExecutorOpt, LimitOpt
from pfr.errors import DataError, PfrError


@app.command()
def study(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="study file (TOML): models × datasets × designs")],
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    model: Annotated[str | None, typer.Option("--model", "-m", help="score this model instead of the file's")] = None,
    model_opt: Annotated[
        list[str] | None,
        typer.Option("--model-opt", metavar="KEY=VALUE", help="backend option key=value for --model (repeatable)"),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="keep the first N texts of every panel")] = None,
    store: Annotated[Path | None, typer.Option("--store", "-s", help="results store instead of the file's")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print each run's cost; store nothing")] = False,
    executor: ExecutorOpt = "local",
    workers: Annotated[
        int | None, typer.Option("--workers", help="with --dry-run: plan the study's wall time on N workers")
    ] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="with --dry-run: --workers N, one per GPU")] = None,
    rate: Annotated[
        list[str] | None,
        typer.Option(
            "--rate",
            metavar="MODEL=RATE",
            help="with --workers: a model's tokens (or requests) per second on one worker, measured elsewhere "
            "(repeatable)",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            help="score only shard I of N of the texts (1-based), or `slurm`; no report (merge the shards first)",
        ),
    ] = None,
    address: AddressOpt = None,
    unit_texts: Annotated[
        int, typer.Option("--unit-texts", min=1, help="--executor ray (and its plan): texts per unit, whole texts")
    ] = 64,
    straggler: Annotated[
        float,
        typer.Option("--straggler", min=1.0, help="--executor ray (and its plan): copy a unit over K × the median"),
    ] = 3.0,
) -> None:
    """Run a study file: build, score (resumably) into its store, and write its reports."""
    if workers is not None and gpus is not None:
        raise DataError("--workers and --gpus say the same (one worker per GPU); give one")
    n = workers if workers is not None else gpus
    if not dry_run and (n is not None or rate):
        raise DataError(f"{'--rate' if n is None else '--workers' if gpus is None else '--gpus'} plans a scale-out "
                        "run: it goes with --dry-run")  # fmt: skip
    if rate and n is None:
        raise DataError("--rate goes with --workers N (or --gpus N)")
    if executor not in ("local", "ray"):
        raise DataError(f"--executor {executor}: expected local or ray")
    if shard is not None and n is not None:
        raise DataError("--shard and --workers: a plan is of the whole study; give one")
    part = api.parse_shard(shard) if shard is not None else None
    if dry_run and n is not None:
        costs, plan = api.plan_study(
            path, n, executor=executor, gpus=gpus is not None, rates=rate or [], progress=progress, model=model,
            model_options=model_opt, limit=limit, store=store, unit_texts=unit_texts, straggler=straggler,
        )  # fmt: skip
        typer.echo("\n".join([*api.describe_study_cost(costs), *api.describe_plan(plan)]))
        return
    if dry_run:
        costs = api.estimate_study(
            path, progress=progress, model=model, model_options=model_opt, limit=limit, store=store, shard=part
        )
        typer.echo("\n".join(api.describe_study_cost(costs)))
        return
    outs = api.study(
        path, progress=progress, model=model, model_options=model_opt, limit=limit, store=store, shard=part,
        executor=executor, address=address, unit_texts=unit_texts, straggler=straggler,
    )  # fmt: skip
    for out in outs:
        typer.echo(f"wrote {out}", err=True)
    if part is not None:
        typer.echo(f"shard {part} scored; no report: merge the shards' stores (pfr merge), then pfr report", err=True)


@app.command()
def demo(
    model: Annotated[str, typer.Option("--model", "-m", help="model spec")] = "minilm-router",
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="dataset")] = "demo",
    limit: LimitOpt = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for the store and the report")] = Path("pfr-demo"),
    data_dir: DataDirOpt = None,
) -> None:
    """The embedded default: a small real model on the bundled demo data, offline; prints the main metrics."""
    api.in_existing_folder(out, "--out")
    if limit is None and model != "minilm-router" and dataset == "demo":
        limit = 24
    reqs = api.build(dataset, "main", api.Design(), data_dir=data_dir, limit=limit)
    store = out / "store"
    summary = api.run(model, reqs, store)
    typer.echo(f"{summary.total} requests: {summary.scored} scored now, {summary.cached} from the store", err=True)
    typer.echo(api.report([store], "text"))
    html = out / "report.html"
    try:
        api.atomic_write(html, [api.report([store], "html")])
        typer.echo(f"report: {html}", err=True)
    except PfrError as exc:
        typer.echo(f"(no HTML report: {exc})", err=True)
