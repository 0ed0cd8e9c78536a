"""Run a study: every model on every dataset × design, into one store, then its reports."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from pfr.design.tasks import panel_requests
from pfr.design.types import Design, Request
from pfr.files import atomic_write
from pfr.models.base import Backend
from pfr.models.lm.templates import apply_template
from pfr.models.registry import load_model, safe_spec
from pfr.report.model import load_report
from pfr.report.render import render
from pfr.report.thresholds import render_thresholds, threshold_rows
from pfr.run.session import opened, run_model
from pfr.run.shards import Shard, shard_requests
from pfr.studies.schema import DatasetEntry, ModelEntry, Study

_SUFFIX = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv", "json": "json", "html": "html"}


def dev_store(study: Study) -> Path:
    """Where a study with ``[thresholds]`` keeps its development-panel scores (apart from the report's)."""
    assert study.thresholds is not None
    return study.store / study.thresholds.dev_panel


RequestSet = tuple[DatasetEntry, str, Design, list[Request], Path]


def build_request_sets(study: Study) -> list[RequestSet]:
    """Every (dataset, panel, design, requests, store) the study scores, in the order it scores them."""
    request_sets: list[RequestSet] = []
    for d in study.datasets:
        for design in study.designs:
            reqs = panel_requests(d.name, d.panel, design, data_dir=study.data_dir, limit=d.limit, fmt=d.fmt)
            request_sets.append((d, d.panel, design, reqs, study.store))
            if study.thresholds is not None:
                dev = panel_requests(
                    d.name, study.thresholds.dev_panel, design, data_dir=study.data_dir, limit=d.limit, fmt=d.fmt
                )
                request_sets.append((d, study.thresholds.dev_panel, design, dev, dev_store(study)))
    return request_sets


def load_study_model(study: Study, m: ModelEntry) -> Backend:
    """One of the study's models, loaded with its options and the study's prompt template."""
    backend = load_model(m.spec, m.options)
    if study.template is not None:
        apply_template(backend, study.template, f"{study.source}: template")
    return backend


def shard_sets(request_sets: list[RequestSet], shard: Shard | None) -> list[RequestSet]:
    """Each request set cut to the whole texts of ``shard`` (:mod:`pfr.run.shards`); all for ``None``."""
    if shard is None:
        return request_sets
    return [(d, panel, design, shard_requests(reqs, shard), store) for d, panel, design, reqs, store in request_sets]


def run_study(study: Study, *, progress: bool = True, log: bool = True, shard: Shard | None = None) -> list[Path]:
    """Build, score (resumably) and report; returns the report files written. With ``shard``, only
    its texts are scored and no report is written (the shards' stores are merged first)."""
    request_sets = shard_sets(build_request_sets(study), shard)
    for m in study.models:
        # loaded once, used for every dataset × design, closed before the next model loads (also on error)
        with opened(m.spec, m.options, progress, loader=partial(load_study_model, study, m)) as (backend, _):
            for d, panel, design, reqs, store in request_sets:
                summary = run_model(backend, reqs, store, progress=progress)
                if log:
                    print(
                        f"{safe_spec(m.spec)} · {d.name}/{panel} · {design.name}: {summary.scored} scored, "
                        f"{summary.cached} stored",
                        flush=True,
                    )
    if shard is not None:
        return []
    return write_reports(study)


def write_reports(study: Study) -> list[Path]:
    """The study's report files (and thresholds, check) from its store, whoever scored it."""
    written = []
    report = load_report([str(study.store)], draws=study.draws, seed=study.seed, family=study.family)
    for fmt in study.formats:
        out = study.store / f"report.{_SUFFIX[fmt]}"
        atomic_write(out, [render(report, fmt)])
        written.append(out)
    if study.thresholds is not None:
        written += _thresholds(study)
    if study.check is not None:
        from pfr.studies.check import run_check

        # raises GateFailed (exit 1) on a fail
        written += run_check(study.check, report, study.store, draws=study.draws, seed=study.seed)
    return written


def _thresholds(study: Study) -> list[Path]:
    spec = study.thresholds
    assert spec is not None
    rows = threshold_rows(dev_store(study), study.store, alpha=spec.alpha, draws=spec.draws, seed=spec.seed)
    out = []
    for fmt, suffix in (("text", "txt"), ("json", "json")):
        path = study.store / f"thresholds.{suffix}"
        atomic_write(path, [render_thresholds(rows, fmt)])
        out.append(path)
    return out
