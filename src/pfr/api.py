"""The Python API behind the CLI: build requests, run a model, report, export, thresholds, studies.

Every ``pfr`` command calls one function here and nothing else (docs/architecture.md).

A notebook user calls these directly::

    import pfr
    reqs = pfr.build("trec", panel="main", data_dir="../shared/data")
    summary = pfr.run("baseline:oracle", reqs, store="runs/oracle")
    pfr.metrics("runs/oracle")
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pfr.data.user import UserFormat
from pfr.design.tasks import panel_requests
from pfr.design.types import Design, Request
from pfr.errors import DataError
from pfr.files import atomic_write, in_existing_folder
from pfr.models.base import Backend
from pfr.models.registry import load_model, parse_options
from pfr.options import ALPHA
from pfr.run.runner import RunSummary
from pfr.run.session import run_model
from pfr.run.store import Store, StoredResult

__all__ = [
    "ALPHA",
    "Design",
    "Request",
    "RunSummary",
    "UserFormat",
    "atomic_write",
    "build",
    "build_notes",
    "compare",
    "datasets",
    "export",
    "in_existing_folder",
    "indicators",
    "load_model",
    "merge",
    "metrics",
    "parse_options",
    "parse_shard",
    "read_requests",
    "render_comparison",
    "report",
    "report_format",
    "run",
    "shard",
    "study",
    "thresholds",
    "write_requests",
]


#: The requests of one panel of a dataset under one design, in panel order (4 per text).
build = panel_requests


def build_notes(
    dataset: str,
    panel: str = "main",
    design: Design | None = None,
    requests: Sequence[Request] = (),
    *,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    fmt: UserFormat | None = None,
    show_dropped: bool = False,
) -> list[str]:
    """What a build has to tell its user, one line each: the rows a user file dropped, how ``limit``
    sampled it and, for a matched-length ``design``, the pairs of ``requests`` that do not match."""
    from pfr.data.notes import dataset_notes
    from pfr.run.matched import build_notes as matched_notes

    notes = dataset_notes(
        dataset, panel, data_dir=data_dir, limit=limit, seed=seed, fmt=fmt, show_dropped=show_dropped
    )
    if design is not None and design.task.startswith("matched-length"):
        notes += matched_notes(requests)
    return notes


def datasets(data_dir: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """The built-in datasets and where their files are (``pfr datasets``)."""
    from pfr.data.loaders import available

    return available(data_dir)


def write_requests(requests: Iterable[Request], path: str | os.PathLike[str]) -> None:
    """Write requests as JSONL, format version 2 (:mod:`pfr.design.jsonl`: each inventory once)."""
    from pfr.design.jsonl import encode

    atomic_write(path, encode(requests))


def read_requests(path: str | os.PathLike[str], encoding: str = "utf-8") -> list[Request]:
    """Requests from a JSONL file written by :func:`write_requests` / ``pfr build``.

    Every line is checked (fields present, ``expected`` and ``fallback_index`` in range, one
    fallback option): a hand-edited file fails at its line, naming the field."""
    from pfr.data.loaders import read_text
    from pfr.design.jsonl import Decoder, FormatError
    from pfr.run.store import request_problem

    out = []
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: file not found")
    decoder = Decoder()
    for n, line in enumerate(read_text(p, encoding).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            got = decoder.feed(json.loads(line))
        except FormatError as exc:
            raise DataError(f"{p}: line {n}: {exc}") from None
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError, ValueError) as exc:
            raise DataError(f"{p}: line {n}: not a pfr request ({type(exc).__name__}: {exc})") from None
        if got is None:
            continue
        req = got
        problem = request_problem(req)
        if problem:
            raise DataError(f"{p}: line {n}: {problem}")
        out.append(req)
    return out


#: Score requests with a model (a spec or a backend) into a store, resuming where it stopped
#: (:func:`pfr.run.session.run_model`).
run = run_model


def parse_shard(spec: str, environ: Mapping[str, str] | None = None) -> Any:
    """The shard ``spec`` names: ``I/N`` (1-based) or ``slurm`` (:func:`pfr.run.shards.parse_shard`)."""
    from pfr.run.shards import parse_shard as parse

    return parse(spec, environ)


def shard(requests: Sequence[Request], spec: Any) -> list[Request]:
    """The requests of the whole texts in shard ``spec`` (a ``Shard``, ``I/N`` or ``slurm``), in order."""
    from pfr.run.shards import shard_requests

    return shard_requests(requests, parse_shard(spec) if isinstance(spec, str) else spec)


def merge(dest: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]]) -> Any:
    """Merge stores into ``dest``, idempotently and atomically (:func:`pfr.run.merge.merge_stores`)."""
    from pfr.run.merge import merge_stores

    return merge_stores(dest, sources)


def indicators(*stores: str | os.PathLike[str]) -> Any:
    """Per-text indicators of every setting in the stores (:func:`pfr.analysis.metrics.quad_indicators`)."""
    from pfr.analysis.metrics import quad_indicators, results_frame  # pandas: only when metrics are asked for
    from pfr.analysis.reference import expand

    results: list[StoredResult] = []
    for path in stores:
        with Store(path, create=False) as st:
            results.extend(st.results())
    return quad_indicators(results_frame(expand(results)[0]))


def compare(
    base: str | os.PathLike[str], cand: str | os.PathLike[str], *, draws: int = 10_000, seed: int = 0
) -> Any:
    """``cand`` against ``base`` (each a store, or ``STORE@MODEL``): paired Δs with intervals, exact
    McNemar tests (Holm over the comparison), the MDE and the texts newly broken / fixed
    (:class:`pfr.analysis.compare.Comparison`; render it with :func:`render_comparison`)."""
    from pfr.analysis.compare import compare as compare_versions

    return compare_versions(str(base), str(cand), draws=draws, seed=seed)


def render_comparison(comparison: Any, fmt: str = "text") -> str:
    """A comparison from :func:`compare` as text, markdown or json."""
    from pfr.report.compare import render_comparison as render

    return render(comparison, fmt)


def report(
    stores: Sequence[str | os.PathLike[str]],
    fmt: str = "text",
    *,
    draws: int = 10_000,
    seed: int = 0,
    family: str = "primary",
    figures: str | os.PathLike[str] | None = None,
) -> str:
    """The report of ``stores`` in ``fmt`` (text, markdown, latex, csv, json or html); with ``figures``,
    its figures are also written there (PNG and SVG)."""
    from pfr.report.gate import require_quads
    from pfr.report.model import load_report
    from pfr.report.render import render

    rep = load_report([str(s) for s in stores], draws=draws, seed=seed, family=family)
    require_quads(rep)
    text = render(rep, fmt)
    if figures is not None:
        from pfr.report.figures import write_figures

        write_figures(rep, Path(figures))
    return text


def report_format(out: str | os.PathLike[str] | None, fmt: str | None) -> str:
    """The format ``pfr report`` writes: ``fmt`` when given, else the one ``out``'s suffix names
    (``.html``, ``.md``, ``.tex``, ``.csv``, ``.json``, ``.txt``); text to stdout."""
    from pfr.report.render import format_for

    return format_for(None if out is None else str(out), fmt)


def thresholds(
    dev: str | os.PathLike[str],
    test: str | os.PathLike[str],
    *,
    alpha: float = ALPHA,
    draws: int = 2000,
    seed: int = 0,
    fmt: str = "text",
) -> str:
    """The selection rules on fixed scores (development threshold, oracles, calibration, refits) of
    every model × dataset × design scored in both stores, as text or JSON."""
    from pfr.report.thresholds import render_thresholds, threshold_rows

    rows = threshold_rows(dev, test, alpha=alpha, draws=draws, seed=seed)
    if all("skipped" in r for r in rows):
        skipped = "; ".join(f"{r['model']} · {r['dataset']} · {r['panel']} · {r['design']}: {r['skipped']}"
                            for r in rows)  # fmt: skip
        raise DataError(
            f"no model × dataset × design is scored in both {dev} (its development panel) and {test} (the "
            f"other panels)" + (f"; {skipped}" if skipped else "")
        )
    return render_thresholds(rows, fmt)


def export(store: str | os.PathLike[str], out: str | os.PathLike[str], *, fmt: str = "jsonl", task: str = "pfr") -> int:
    """Write one JSONL row per scored request of ``store`` to ``out``; returns the row count.
    ``fmt="lm-eval"``: an lm-evaluation-harness task folder ``out`` named ``task`` (:mod:`pfr.run.lmeval`)."""
    if fmt == "lm-eval":
        from pfr.run.lmeval import export_task

        try:
            return export_task(store, out, task)
        except ValueError as exc:
            raise DataError(str(exc)) from None
    if fmt != "jsonl":
        raise DataError(f"--format {fmt}: unknown export format (known: jsonl, lm-eval)")
    from pfr.run.export import export_lines

    rows = export_lines(store)
    atomic_write(out, rows)
    return len(rows)


def _load_study(
    path: str | os.PathLike[str],
    model: str | None,
    model_options: Mapping[str, str] | list[str] | None,
    limit: int | None,
    store: str | os.PathLike[str] | None,
) -> Any:
    from pfr.studies import load_study

    if model_options and model is None:
        raise DataError("pfr study: --model-opt goes with --model (the file's [[models]] tables carry their own)")
    opts = parse_options(model_options) if isinstance(model_options, list) else dict(model_options or {})
    return load_study(
        Path(path), model=model, model_options=opts, limit=limit,
        store=Path(store) if store is not None else None,
    )  # fmt: skip


def study(
    path: str | os.PathLike[str],
    *,
    progress: bool = True,
    model: str | None = None,
    model_options: Mapping[str, str] | list[str] | None = None,
    limit: int | None = None,
    store: str | os.PathLike[str] | None = None,
    shard: Any = None,
    executor: str = "local",
    address: str | None = None,
    unit_texts: int = 64,
    straggler: float = 3.0,
) -> list[Path]:
    """Run a study file (build, score resumably, report); ``model``/``limit``/``store`` override the
    file's, ``model_options`` (a mapping or ``key=value`` strings) go with ``model``. Returns the
    report files written. ``shard`` (a ``Shard`` or ``I/N``/``slurm``): only its texts, no report.
    ``executor="ray"``: on Ray, at ``address`` or local (:func:`pfr.studies.ray_executor.run_study_ray`)."""
    from pfr.studies import run_study
    from pfr.studies.ray_executor import check_executor, run_study_ray

    check_executor(executor, address, shard)
    study_ = _load_study(path, model, model_options, limit, store)
    if executor == "ray":
        return run_study_ray(study_, address=address, unit_texts=unit_texts, straggler=straggler)
    part = parse_shard(shard) if isinstance(shard, str) else shard
    return run_study(study_, progress=progress, shard=part)


def metrics(*stores: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Point estimates of the PFR metrics per model × dataset × panel × design."""
    from pfr.analysis.metrics import setting_metrics

    return setting_metrics(indicators(*stores))


def check(
    stores: Sequence[str | os.PathLike[str]],
    mins: Sequence[str] = (),
    maxs: Sequence[str] = (),
    *,
    on: str = "interval",
    draws: int = 10_000,
    seed: int = 0,
    junit: str | os.PathLike[str] | None = None,
    step_summary: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    max_drop: Sequence[str] = (),
    max_rise: Sequence[str] = (),
) -> Any:
    """The PFR Test as a gate (:mod:`pfr.report.gate`): every ``--min``/``--max`` on every setting.

    With ``baseline`` (a store or ``STORE@MODEL``) the one store or ``STORE@MODEL`` in ``stores`` is
    the candidate, and each ``max_drop``/``max_rise`` (``"P4=0.02"``) bounds its paired change from the
    baseline (:mod:`pfr.report.regression`); ``mins``/``maxs`` then apply to the candidate alone.
    Returns the list of results (:class:`~pfr.report.gate.CheckResult`, then
    :class:`~pfr.report.regression.RegressionResult`); writes JUnit XML to ``junit`` and appends a
    Markdown table to ``step_summary`` when given. No complete quad, or no text both versions scored,
    is an error."""
    from pfr.report.gate_output import publish
    from pfr.report.regression import check_stores

    b = None if baseline is None else str(baseline)
    results = check_stores([str(s) for s in stores], mins, maxs, on, draws, seed, b, max_drop, max_rise)
    publish(results, junit, step_summary)
    return results


def render_checks(results: Sequence[Any], fmt: str = "text") -> str:
    """The table of :func:`check`'s results in ``fmt`` (text, markdown or json); an unknown ``fmt``
    is an error even for no results, so a command can check it before reading a store."""
    from pfr.report.gate_output import render_checks as _render

    return _render(results, fmt)


def estimate(
    model: str | Backend,
    requests: Sequence[Request],
    store: str | os.PathLike[str] | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> Any:
    """What ``run`` would cost, without storing anything (:mod:`pfr.run.cost`): requests, prompt and
    distinct tokens, and an expected time from a short measured rate."""
    from pfr.run.session import estimate_spec

    return estimate_spec(model, requests, store, options=options, progress=progress)


def estimate_study(
    path: str | os.PathLike[str],
    *,
    progress: bool = True,
    model: str | None = None,
    model_options: Mapping[str, str] | list[str] | None = None,
    limit: int | None = None,
    store: str | os.PathLike[str] | None = None,
    shard: Any = None,
) -> list[tuple[str, Any]]:
    """What :func:`study` would cost per model and request set (:mod:`pfr.studies.estimate`); stores
    nothing. Returns ``(label, cost)`` pairs, each model's total labelled ``"<model> · total"``.
    ``shard``: the cost of that shard's texts only."""
    from pfr.studies.estimate import estimate_study as _estimate_study
    from pfr.studies.execute import build_request_sets, shard_sets

    study = _load_study(path, model, model_options, limit, store)
    part = parse_shard(shard) if isinstance(shard, str) else shard
    return _estimate_study(study, progress=progress, sets=shard_sets(build_request_sets(study), part))


def plan_study(
    path: str | os.PathLike[str],
    workers: int,
    *,
    executor: str = "local",
    gpus: bool = False,
    rates: Sequence[str] = (),
    progress: bool = True,
    model: str | None = None,
    model_options: Mapping[str, str] | list[str] | None = None,
    limit: int | None = None,
    store: str | os.PathLike[str] | None = None,
    unit_texts: int = 64, straggler: float = 3.0,
) -> tuple[list[tuple[str, Any]], Any]:
    """The dry run's costs and the study's ``Plan`` on ``workers`` workers (:mod:`pfr.studies.plan`)."""
    from pfr.studies.plan import parse_rates, plan_file

    given = parse_rates(rates)  # a bad --rate fails before any model loads
    study = _load_study(path, model, model_options, limit, store)
    return plan_file(study, workers, executor=executor, gpus=gpus, rates=given, progress=progress,
                     unit_texts=unit_texts, straggler=straggler)  # fmt: skip


def describe_plan(plan: Any) -> list[str]:
    """The lines ``pfr study --dry-run --workers N`` prints for :func:`plan_study`'s plan."""
    from pfr.studies.plan import describe_plan as _describe

    return _describe(plan)


def describe_cost(cost: Any, label: str = "") -> list[str]:
    """The lines ``--dry-run`` prints for one :func:`estimate`."""
    from pfr.run.cost import describe

    return describe(cost, label)


def describe_study_cost(costs: Sequence[tuple[str, Any]]) -> list[str]:
    """The lines ``pfr study --dry-run`` prints for :func:`estimate_study`."""
    from pfr.run.cost import describe_study

    return describe_study(costs)


def import_scored(path: str | os.PathLike[str], store: str | os.PathLike[str], *, fmt: str = "pfr") -> Any:
    """Restore the scored requests of an export file into ``store`` (:mod:`pfr.run.importer`)."""
    from pfr.run.importer import import_scored as _import_scored

    return _import_scored(path, store, fmt)
