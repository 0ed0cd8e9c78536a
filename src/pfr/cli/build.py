"""``pfr datasets``, ``pfr build`` and ``pfr run``: from a dataset to requests to stored scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pfr import api
from pfr.cli.app import app
from pfr.cli.options import BuildFlags, DataDirOpt, DatasetOpt, ModelOptsOpt, with_build_flags
from pfr.errors import DataError


@app.command()
def datasets(data_dir: DataDirOpt = None) -> None:
    """List the built-in datasets and where their files are.

    Any other --dataset is a user file (.csv, .jsonl, .parquet) or hf:NAME[:CONFIG] with --split: a
    Hugging Face dataset id, a folder saved with save_to_disk, or a folder of data files (pip install 'pfr[hub]').
    """
    for row in api.datasets(data_dir):
        typer.echo(f"{row['name']:<10} {row['files']}")


@app.command()
@with_build_flags
def build(
    dataset: DatasetOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write")],
    flags: BuildFlags,
) -> None:
    """Build the PFR requests of a panel and write them as JSONL (one request per line)."""
    api.in_existing_folder(out, "--out")
    reqs, notes = flags.build(dataset, check_pairs=True)
    if not reqs:
        why = "--limit 0" if flags.limit == 0 else "the panel has no texts"
        raise DataError(f"pfr build: {dataset} panel {flags.panel!r} gives 0 requests ({why}); {out} was not written")
    api.write_requests(reqs, out)
    for note in notes:
        typer.echo(note, err=True)
    typer.echo(f"wrote {len(reqs)} requests ({len({r.text_id for r in reqs})} texts) to {out}", err=True)


@app.command()
@with_build_flags
def run(
    model: Annotated[
        str, typer.Option("--model", "-m", help="model spec, e.g. minilm-router, smollm2-135m, hf:ID, baseline:oracle")
    ],
    store: Annotated[Path, typer.Option("--store", "-s", help="results store folder (created; resumed if it exists)")],
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="dataset name or file (or use --requests)")
    ] = None,
    requests: Annotated[Path | None, typer.Option("--requests", help="JSONL of requests from `pfr build`")] = None,
    flags: BuildFlags = BuildFlags(),
    model_opt: ModelOptsOpt = None,
    temperature: Annotated[float | None, typer.Option(help="score temperature T")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="requests per model call and per store commit (default: the backend's)")
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    progress_every: Annotated[
        float,
        typer.Option("--progress-every", help="seconds between progress lines when stderr is not a terminal"),
    ] = 10.0,
    keep_unmatched: Annotated[
        bool, typer.Option("--keep-unmatched", help="score matched-length pairs whose token counts differ")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the requests, tokens and expected time; store nothing")
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/N",
            help="score only shard I of N (1-based; whole texts, by a hash of the text id), or `slurm`: the Slurm "
            "array task's shard",
        ),
    ] = None,
) -> None:
    """Score every request with a model and keep the per-request scores in the store (resumable)."""
    opts = api.parse_options(model_opt)
    # a bad --shard (or Slurm variable) stops the command before any work
    part = api.parse_shard(shard) if shard is not None else None
    if temperature is not None:
        opts["temperature"] = str(temperature)
    notes: list[str] = []
    if requests is not None:
        reqs = api.read_requests(requests)
    elif dataset is not None:
        reqs, notes = flags.build(dataset)
    else:
        raise DataError("pfr run needs --dataset or --requests")
    if part is not None:
        reqs = api.shard(reqs, part)
    if dry_run:
        typer.echo("\n".join(api.describe_cost(api.estimate(model, reqs, store, options=opts, progress=progress))))
        return
    summary = api.run(
        model, reqs, store, options=opts, batch_size=batch_size, progress=progress, keep_unmatched=keep_unmatched,
        progress_every=progress_every,
    )  # fmt: skip
    for note in notes:
        typer.echo(note, err=True)
    typer.echo(
        f"{f'shard {part}: ' if part is not None else ''}{summary.total} requests: {summary.scored} scored now, "
        f"{summary.cached} already in {store} "
        f"({summary.seconds:.1f} s)",
        err=True,
    )


@app.command()
def merge(
    sources: Annotated[list[Path], typer.Argument(metavar="STORE...", help="stores to merge (the shards' stores)")],
    store: Annotated[Path, typer.Option("--store", "-s", help="the merged store (created; added to if it exists)")],
) -> None:
    """Merge results stores (the shards of `pfr run --shard`) into one; the same result twice is kept once,
    two different scores for one request are refused and nothing is merged."""
    summary = api.merge(store, sources)
    typer.echo(
        f"merged {summary.sources} stores into {store}: {summary.added} results added, {summary.duplicates} "
        f"already there ({summary.seconds:.1f} s)",
        err=True,
    )
