"""``pfr compare``: two versions of a model on the same texts (a thin layer over :func:`pfr.api.compare`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from pfr import api
from pfr.cli.app import app, lasting_heap
from pfr.cli.options import BootSeedOpt, DrawsOpt, OutOpt


@app.command()
def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="the baseline: a store, or STORE@MODEL")],
    cand: Annotated[str, typer.Argument(metavar="CAND", help="the candidate: a store, or STORE@MODEL")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-f", help="text, markdown, json or html (default: --out's suffix, else text)"),
    ] = None,
    out: OutOpt = None,
    draws: DrawsOpt = 10_000,
    seed: BootSeedOpt = 0,
) -> None:
    """CAND − BASE per setting, paired on the texts both scored: intervals, exact McNemar, MDE, changed texts."""
    fmt = api.report_format(out, fmt)  # a bad suffix or folder fails before the stores are read
    if fmt not in ("text", "markdown", "json", "html"):
        raise typer.BadParameter(f"{fmt}: give text, markdown, json or html", param_hint="--format/--out")
    if out is not None:
        api.in_existing_folder(out, "--out")
    with lasting_heap():
        text = api.render_comparison(api.compare(base, cand, draws=draws, seed=seed), fmt)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        api.atomic_write(out, [text])
        typer.echo(f"wrote {out}", err=True)
