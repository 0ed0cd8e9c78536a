"""Run a study: every model on every dataset × design, into one store, then its reports."""

from __future__ import annotations

from pathlib import Path

from pfr import api
from pfr.models.registry import load_model
from pfr.studies.schema import Study

_SUFFIX = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv", "json": "json", "html": "html"}


def run_study(study: Study, *, progress: bool = True, log: bool = True) -> list[Path]:
    """Build, score (resumably) and report; returns the report files written."""
    from pfr.report import render_report

    request_sets = []
    for d in study.datasets:
        for design in study.designs:
            reqs = api.build(d.name, d.panel, design, data_dir=study.data_dir, limit=d.limit, fmt=d.fmt)
            request_sets.append((d, design, reqs))
    for m in study.models:
        backend = load_model(m.spec, m.options)  # loaded once, used for every dataset × design
        for d, design, reqs in request_sets:
            summary = api.run(backend, reqs, study.store, progress=progress)
            if log:
                print(
                    f"{m.spec} · {d.name}/{d.panel} · {design.name}: {summary.scored} scored, {summary.cached} stored",
                    flush=True,
                )
    written = []
    for fmt in study.formats:
        out = study.store / f"report.{_SUFFIX[fmt]}"
        api.atomic_write(out, [render_report([str(study.store)], fmt=fmt, draws=study.draws, seed=study.seed)])
        written.append(out)
    return written
