"""Run a study: every model on every dataset × design, into one store, then its reports."""

from __future__ import annotations

from pathlib import Path

from pfr import api
from pfr.models.registry import load_model
from pfr.studies.schema import Study

_SUFFIX = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv", "json": "json", "html": "html"}


def dev_store(study: Study) -> Path:
    """Where a study with ``[thresholds]`` keeps its development-panel scores (apart from the report's)."""
    assert study.thresholds is not None
    return study.store / study.thresholds.dev_panel


def run_study(study: Study, *, progress: bool = True, log: bool = True) -> list[Path]:
    """Build, score (resumably) and report; returns the report files written."""
    from pfr.report.render import load_report, render

    request_sets = []
    for d in study.datasets:
        for design in study.designs:
            reqs = api.build(d.name, d.panel, design, data_dir=study.data_dir, limit=d.limit, fmt=d.fmt)
            request_sets.append((d, d.panel, design, reqs, study.store))
            if study.thresholds is not None:
                dev = api.build(
                    d.name, study.thresholds.dev_panel, design, data_dir=study.data_dir, limit=d.limit, fmt=d.fmt
                )
                request_sets.append((d, study.thresholds.dev_panel, design, dev, dev_store(study)))
    for m in study.models:
        backend = load_model(m.spec, m.options)  # loaded once, used for every dataset × design
        try:  # closed before the next model loads, also on error
            if study.template is not None:
                from pfr.models.templates import apply_template

                apply_template(backend, study.template, f"{study.source}: template")
            for d, panel, design, reqs, store in request_sets:
                summary = api.run(backend, reqs, store, progress=progress)
                if log:
                    print(
                        f"{m.spec} · {d.name}/{panel} · {design.name}: {summary.scored} scored, "
                        f"{summary.cached} stored",
                        flush=True,
                    )
        finally:
            getattr(backend, "close", lambda: None)()  # a third-party backend without close() still runs
    written = []
    report = load_report([str(study.store)], draws=study.draws, seed=study.seed, family=study.family)
    for fmt in study.formats:
        out = study.store / f"report.{_SUFFIX[fmt]}"
        api.atomic_write(out, [render(report, fmt)])
        written.append(out)
    if study.thresholds is not None:
        written += _thresholds(study)
    return written


def _thresholds(study: Study) -> list[Path]:
    from pfr.analysis.thresholds import threshold_summary
    from pfr.report.thresholds import render_thresholds
    from pfr.run.store import Store

    spec = study.thresholds
    assert spec is not None
    with Store(dev_store(study), create=False) as d, Store(study.store, create=False) as t:
        rows = threshold_summary(
            list(d.results()), list(t.results()), alpha=spec.alpha, draws=spec.draws, seed=spec.seed
        )
    out = []
    for fmt, suffix in (("text", "txt"), ("json", "json")):
        path = study.store / f"thresholds.{suffix}"
        api.atomic_write(path, [render_thresholds(rows, fmt)])
        out.append(path)
    return out
