"""``pfr study --dry-run``: what a study would cost per model and request set, storing nothing."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from pfr.models.base import no_contact
from pfr.models.registry import safe_spec
from pfr.run.cost import Cost, Rate, combine, estimate
from pfr.run.session import opened
from pfr.studies.execute import RequestSet, build_request_sets, load_study_model
from pfr.studies.schema import Study


def estimate_study(
    study: Study, *, progress: bool = True, sets: list[RequestSet] | None = None
) -> list[tuple[str, Cost]]:
    """Per model of a study, its cost on every request set (``sets``: the study's, built here when not
    given) and the total (label ``total``)."""
    with no_contact():  # a dry run asks no service or server, calls no user function
        return _estimate_study(study, progress, build_request_sets(study) if sets is None else sets)


def _estimate_study(study: Study, progress: bool, sets: list[RequestSet]) -> list[tuple[str, Cost]]:
    out: list[tuple[str, Cost]] = []
    for m in study.models:
        costs: list[Cost] = []
        rate: Rate | None = None
        shown = safe_spec(m.spec)
        with opened(m.spec, m.options, progress, loader=partial(load_study_model, study, m)) as (backend, load):
            for d, panel, design, reqs, store in sets:
                cost = estimate(backend, reqs, store, model=shown, load_seconds=load, measure=rate is None)
                if rate is None:
                    rate = cost.rate
                else:
                    cost = replace(cost, rate=rate, load_seconds=load)
                costs.append(cost)
                out.append((f"{shown} · {d.name}/{panel} · {design.name}", cost))
        if costs:
            out.append((f"{shown} · total", combine(costs)))
    return out
