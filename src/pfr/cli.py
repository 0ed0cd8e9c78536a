"""The ``pfr`` command line: a thin layer over :mod:`pfr.api`.

Every :class:`~pfr.errors.PfrError` ends the command with one line on stderr and exit code 2.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from pfr import api
from pfr.data.loaders import UserFormat
from pfr.design.types import Design
from pfr.errors import PfrError

app = typer.Typer(
    name="pfr",
    help="Paired Fallback Robustness Test: does a decision model use its fallback when it should, and consistently?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


DatasetOpt = Annotated[
    str,
    typer.Option(
        "--dataset",
        "-d",
        help="clinc150, banking77, trec, demo, a .csv/.jsonl/.parquet file, or hf:NAME[:CONFIG] (a Hugging Face "
        "dataset id or a local folder; with --split)",
    ),
]
PanelOpt = Annotated[str, typer.Option(help="main, diagnostic, development[-32|-64], calibration, or a named panel")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="folder with the original files (default: $PFR_DATA_DIR, then download)"),
]
TextColOpt = Annotated[str, typer.Option("--text-col", help="text column of a user file")]
LabelColOpt = Annotated[str, typer.Option("--label-col", help="label column of a user file")]
DescOpt = Annotated[
    Path | None, typer.Option("--descriptions", help="CSV (id,description[,parent]) or JSON of category descriptions")
]
EncodingOpt = Annotated[
    str, typer.Option("--encoding", help="encoding of a user file and its descriptions (a UTF-8 BOM is accepted)")
]
SplitOpt = Annotated[
    str | None,
    typer.Option("--split", help="split of an hf: dataset (default: its only split)"),
]
ShowDroppedOpt = Annotated[
    bool, typer.Option("--show-dropped", help="list the duplicate and conflicting-label rows a user file drops")
]
LimitOpt = Annotated[
    int | None,
    typer.Option(help="keep N texts: the first N of a built-in panel; a label-balanced hash sample of a user file"),
]
SeedOpt = Annotated[int, typer.Option(help="hash seed of panels and designs")]
KOpt = Annotated[int, typer.Option("--options", "-k", help="options per request (regular + fallback)")]
FallbackOpt = Annotated[str, typer.Option("--fallback", help="fallback option name")]
WordingOpt = Annotated[int, typer.Option("--wording", help="U/C wording pair (1, 2 or 3)")]
InfoOpt = Annotated[str, typer.Option("--info", help="category information: text, text+label or label")]
MembershipOpt = Annotated[bool, typer.Option("--membership/--no-membership", help="state the rule as a T1/T2 table")]
LayoutOpt = Annotated[str, typer.Option("--layout", help="union list layout: line or breaks")]
ReplacementOpt = Annotated[
    str, typer.Option("--replacement", help="replacement category: any, same or different parent")
]
ChoiceSetOpt = Annotated[int, typer.Option("--choice-set", help="which hash-seeded choice set (0, 1, 2, …)")]
TaskOpt = Annotated[
    str,
    typer.Option(
        "--task", help="category (the main test), compact, quality-cost, category-policy or classify-then-map"
    ),
]
PolicyInfoOpt = Annotated[
    str, typer.Option("--policy-info", help="quality-cost policy information: estimates, utilities or predicate")
]
PositionOpt = Annotated[int | None, typer.Option("--position", help="fixed 1-based fallback slot (default: cycle)")]


def _design(k: int, fallback: str, wording: int, info: str, membership: bool, layout: str, replacement: str,
            choice_set: int, position: int | None, seed: int, task: str, policy_info: str) -> Design:  # fmt: skip
    return Design(
        k, fallback, wording, info, membership, layout, replacement, choice_set, position, seed, task, policy_info
    )


def _build(dataset: str, panel: str, data_dir: Path | None, text_col: str, label_col: str,
           descriptions: Path | None, limit: int | None, seed: int, design: Design,
           encoding: str = "utf-8", show_dropped: bool = False,
           split: str | None = None) -> tuple[list[Any], list[str]]:  # fmt: skip
    from pfr.data.loaders import load_dataset
    from pfr.data.panels import build_panel, dropped_examples, is_user_dataset

    fmt = UserFormat(text_col, label_col, str(descriptions) if descriptions else None, encoding, split)
    reqs = api.build(dataset, panel, design, data_dir=data_dir, limit=limit, seed=seed, fmt=fmt)
    ds = load_dataset(dataset, data_dir, fmt)  # cached: what api.build just read
    notes: list[str] = []  # printed after the command succeeds, so an error stays one line
    if not is_user_dataset(ds):
        return reqs, notes
    label = f"{ds.name} ({ds.source})" if ds.source else ds.name
    dropped = dropped_examples(ds)
    if dropped:
        dup = sum(d.reason == "duplicate" for d in dropped)
        conflict = len(dropped) - dup
        hint = "" if show_dropped else "; --show-dropped lists them"
        notes.append(f"{label}: dropped {dup} duplicate text(s) and {conflict} row(s) whose text has conflicting "
                     f"labels{hint}")  # fmt: skip
        if show_dropped:
            notes += [f"  {d.line()}" for d in dropped]
    if limit is not None:
        full = len(build_panel(ds, panel, seed=seed))
        if limit < full:
            notes.append(f"{label}: --limit {limit}: a hash-ranked sample of {limit} of {full} texts, balanced over "
                         f"the labels (seed {seed}), in file order")  # fmt: skip
    return reqs, notes


@app.command()
def datasets(data_dir: DataDirOpt = None) -> None:
    """List the built-in datasets and where their files are.

    Any other --dataset is a user file (.csv, .jsonl, .parquet) or hf:NAME[:CONFIG] with --split: a
    Hugging Face dataset id, a folder saved with save_to_disk, or a folder of data files (pip install 'pfr[hub]').
    """
    from pfr.data.loaders import available

    for row in available(data_dir):
        typer.echo(f"{row['name']:<10} {row['files']}")


@app.command()
def build(
    dataset: DatasetOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write")],
    panel: PanelOpt = "main",
    data_dir: DataDirOpt = None,
    text_col: TextColOpt = "text",
    label_col: LabelColOpt = "label",
    descriptions: DescOpt = None,
    encoding: EncodingOpt = "utf-8",
    split: SplitOpt = None,
    show_dropped: ShowDroppedOpt = False,
    limit: LimitOpt = None,
    seed: SeedOpt = 0,
    k: KOpt = 16,
    fallback: FallbackOpt = "Other",
    wording: WordingOpt = 1,
    info: InfoOpt = "text",
    membership: MembershipOpt = False,
    layout: LayoutOpt = "line",
    replacement: ReplacementOpt = "any",
    choice_set: ChoiceSetOpt = 0,
    position: PositionOpt = None,
    task: TaskOpt = "category",
    policy_info: PolicyInfoOpt = "estimates",
) -> None:
    """Build the PFR requests of a panel and write them as JSONL (one request per line)."""
    design = _design(
        k, fallback, wording, info, membership, layout, replacement, choice_set, position, seed, task, policy_info
    )
    reqs, notes = _build(
        dataset, panel, data_dir, text_col, label_col, descriptions, limit, seed, design, encoding, show_dropped, split
    )
    api.write_requests(reqs, out)
    for note in notes:
        typer.echo(note, err=True)
    if design.task.startswith("matched-length"):
        from pfr.design.matched import check_pairs

        pairs = check_pairs(reqs)
        bad = [c for c in pairs if not c.matched]
        for c in bad:
            typer.echo(f"unmatched pair: {c.describe()}", err=True)
        how = pairs[0].tokenizer if pairs else "none"
        typer.echo(f"matched-length: {len(pairs)} pairs checked ({how}), {len(bad)} unmatched; "
                   "`pfr run` checks them again under the model's tokenizer", err=True)  # fmt: skip
    typer.echo(f"wrote {len(reqs)} requests ({len({r.text_id for r in reqs})} texts) to {out}", err=True)


@app.command()
def run(
    model: Annotated[
        str, typer.Option("--model", "-m", help="model spec, e.g. minilm-router, smollm2-135m, hf:ID, baseline:oracle")
    ],
    store: Annotated[Path, typer.Option("--store", "-s", help="results store folder (created; resumed if it exists)")],
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="dataset name or file (or use --requests)")
    ] = None,
    requests: Annotated[Path | None, typer.Option("--requests", help="JSONL of requests from `pfr build`")] = None,
    panel: PanelOpt = "main",
    data_dir: DataDirOpt = None,
    text_col: TextColOpt = "text",
    label_col: LabelColOpt = "label",
    descriptions: DescOpt = None,
    encoding: EncodingOpt = "utf-8",
    split: SplitOpt = None,
    show_dropped: ShowDroppedOpt = False,
    limit: LimitOpt = None,
    seed: SeedOpt = 0,
    k: KOpt = 16,
    fallback: FallbackOpt = "Other",
    wording: WordingOpt = 1,
    info: InfoOpt = "text",
    membership: MembershipOpt = False,
    layout: LayoutOpt = "line",
    replacement: ReplacementOpt = "any",
    choice_set: ChoiceSetOpt = 0,
    position: PositionOpt = None,
    task: TaskOpt = "category",
    policy_info: PolicyInfoOpt = "estimates",
    model_opt: Annotated[
        list[str] | None, typer.Option("--model-opt", help="backend option key=value (repeatable)")
    ] = None,
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
) -> None:
    """Score every request with a model and keep the per-request scores in the store (resumable)."""
    from pfr.errors import DataError
    from pfr.models.registry import parse_options

    opts = parse_options(model_opt)
    if temperature is not None:
        opts["temperature"] = str(temperature)
    notes: list[str] = []
    if requests is not None:
        reqs = api.read_requests(requests)
    elif dataset is not None:
        design = _design(
            k, fallback, wording, info, membership, layout, replacement, choice_set, position, seed, task, policy_info
        )
        reqs, notes = _build(dataset, panel, data_dir, text_col, label_col, descriptions, limit, seed, design,
                             encoding, show_dropped, split)  # fmt: skip
    else:
        raise DataError("pfr run needs --dataset or --requests")
    summary = api.run(
        model, reqs, store, options=opts, batch_size=batch_size, progress=progress, keep_unmatched=keep_unmatched,
        progress_every=progress_every,
    )  # fmt: skip
    for note in notes:
        typer.echo(note, err=True)
    typer.echo(
        f"{summary.total} requests: {summary.scored} scored now, {summary.cached} already in {store} "
        f"({summary.seconds:.1f} s)",
        err=True,
    )


#: set by :func:`main` when it runs as the process's program (not called in-process with arguments)
_OWNS_PROCESS = False


@contextlib.contextmanager
def _lasting_heap() -> Iterator[None]:
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
        if _OWNS_PROCESS:
            gc.freeze()
        if was_enabled:
            gc.enable()


@app.command()
def report(
    stores: Annotated[list[Path], typer.Argument(help="one or more results stores")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, markdown, latex, csv, json or html")] = "text",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="write here instead of stdout")] = None,
    draws: Annotated[int, typer.Option(help="bootstrap draws")] = 10_000,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
    figures: Annotated[Path | None, typer.Option("--figures", help="also write the figures (PNG and SVG) here")] = None,
    family: Annotated[
        str, typer.Option("--family", help="Holm family: primary (main design per model × dataset) or all")
    ] = "primary",
) -> None:
    """Metrics per model × dataset × design, with paired intervals and exact tests."""
    from pfr.report.render import load_report, render

    with _lasting_heap():
        rep = load_report([str(s) for s in stores], draws=draws, seed=seed, family=family)
        text = render(rep, fmt)
        if figures is not None:
            from pfr.report.figures import write_figures

            write_figures(rep, figures)
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
    alpha: Annotated[float, typer.Option(help="false-fallback budget of the one-sided calibration")] = 0.05,
    draws: Annotated[int, typer.Option(help="bootstrap refits of the development threshold")] = 2000,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text or json")] = "text",
) -> None:
    """Selection rules on fixed scores: development threshold, oracles, calibration, refits (DESIGN §8)."""
    from pfr.analysis.thresholds import threshold_summary
    from pfr.errors import DataError
    from pfr.report.thresholds import render_thresholds
    from pfr.run.store import Store

    with _lasting_heap(), Store(dev, create=False) as d, Store(test, create=False) as t:
        rows = threshold_summary(list(d.results()), list(t.results()), alpha=alpha, draws=draws, seed=seed)
    if not rows:
        raise DataError(f"no model × dataset × design is scored in both {dev} and {test}")
    sys.stdout.write(render_thresholds(rows, fmt) + "\n")


@app.command()
def export(
    store: Annotated[Path, typer.Argument(help="results store")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write")],
) -> None:
    """One JSONL row per scored request: request fields, exact prompt, scores, choice, model, timing."""
    from pfr.run.store import Store

    with _lasting_heap(), Store(store, create=False) as st:
        rows = []
        for r in st.results():
            row = r.request.to_dict()
            row.pop("inventory")
            row.update(
                prompt=r.prompt,
                scores=list(r.logprobs),
                logits=list(r.logits),
                censored=list(r.censored),
                choice=r.choice,
                model=r.model,
                seconds=r.seconds,
                meta=r.meta,
            )
            rows.append(json.dumps(row, ensure_ascii=False))
    api.atomic_write(out, rows)
    typer.echo(f"wrote {len(rows)} rows to {out}", err=True)


@app.command()
def study(
    path: Annotated[Path, typer.Argument(help="study file (TOML): models × datasets × designs")],
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    model: Annotated[str | None, typer.Option("--model", "-m", help="score this model instead of the file's")] = None,
    model_opt: Annotated[
        list[str] | None, typer.Option("--model-opt", help="backend option key=value for --model (repeatable)")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="keep the first N texts of every panel")] = None,
    store: Annotated[Path | None, typer.Option("--store", "-s", help="results store instead of the file's")] = None,
) -> None:
    """Run a study file: build, score (resumably) into its store, and write its reports."""
    from pfr.errors import DataError
    from pfr.models.registry import parse_options
    from pfr.studies import load_study, run_study

    if model_opt and model is None:
        raise DataError("pfr study: --model-opt goes with --model (the file's [[models]] tables carry their own)")
    opts = parse_options(model_opt)
    loaded = load_study(path, model=model, model_options=opts, limit=limit, store=store)
    for out in run_study(loaded, progress=progress):
        typer.echo(f"wrote {out}", err=True)


@app.command()
def demo(
    model: Annotated[str, typer.Option("--model", "-m", help="model spec")] = "minilm-router",
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="dataset")] = "demo",
    limit: LimitOpt = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for the store and the report")] = Path("pfr-demo"),
    data_dir: DataDirOpt = None,
) -> None:
    """The embedded default: a small real model on the bundled demo data, offline; prints the main metrics."""
    from pfr.report import render_report

    if limit is None and model != "minilm-router" and dataset == "demo":
        limit = 24
    reqs = api.build(dataset, "main", Design(), data_dir=data_dir, limit=limit)
    store = out / "store"
    summary = api.run(model, reqs, store)
    typer.echo(f"{summary.total} requests: {summary.scored} scored now, {summary.cached} from the store", err=True)
    typer.echo(render_report([str(store)], fmt="text"))
    html = out / "report.html"
    try:
        api.atomic_write(html, [render_report([str(store)], fmt="html")])
        typer.echo(f"report: {html}", err=True)
    except PfrError as exc:
        typer.echo(f"(no HTML report: {exc})", err=True)


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
    from typer.main import get_command

    from pfr.console import printable_streams

    printable_streams()  # a cp1252 or ASCII console prints "-" for "−" instead of crashing
    global _OWNS_PROCESS
    _OWNS_PROCESS = argv is None
    args = sys.argv[1:] if argv is None else list(argv)
    usage_errors, aborts = _usage_errors(), _aborts()
    try:
        # Not app(standalone_mode=False): typer's own main turns Ctrl-C into a *return value* of 130
        # there, which a caller cannot tell from success. Parsing and invoking directly lets every
        # exception reach the handlers below.
        cmd = get_command(app)
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


if __name__ == "__main__":
    main()
