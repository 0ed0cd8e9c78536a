"""The task switch: which builder makes the requests of a ``--task`` (main design, compact,
matched-length, quality-cost and category policies, the classify-then-map reference).

It sits above the builders it picks (:mod:`pfr.design.builder`, :mod:`pfr.design.policies`,
:mod:`pfr.design.reference`), so none of them needs to import another's switch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from pfr.data.loaders import UserFormat, load_dataset
from pfr.data.panels import build_panel
from pfr.data.types import Dataset, Example
from pfr.design import policies, reference
from pfr.design.builder import build_quad, check_design, coarse_view
from pfr.design.types import TASKS, Design, Request
from pfr.design.wording import MATCHED_GROUPS
from pfr.errors import DesignError


def check_panel_task(design: Design, examples: Sequence[Example]) -> None:
    """Refuse a panel and a task that do not belong together: a boundary panel is built only as the
    boundary quality–cost policy, and nothing else is ever built on it."""
    panels = {ex.panel for ex in examples}
    boundary = sorted(p for p in panels if policies.is_boundary_panel(p))
    if boundary and design.task != "quality-cost":
        raise DesignError(
            f"panel {boundary[0]!r} is a boundary panel of the quality–cost Defer policy: build it with "
            f"--task quality-cost, not --task {design.task}"
        )
    if boundary and len(panels) > 1:
        raise DesignError(f"boundary panel {boundary[0]!r} mixed with other panels ({', '.join(sorted(panels))})")


def iter_requests(dataset: Dataset, examples: Sequence[Example], design: Design = Design()) -> Iterator[Request]:
    """All requests of a panel in panel order, four per example (RU, RC, FU, FC)."""
    check_panel_task(design, examples)
    if design.task == "quality-cost":
        boundary = bool(examples) and policies.is_boundary_panel(examples[0].panel)
        quad = policies.boundary_quad if boundary else policies.quality_cost_quad
    elif design.task == reference.TASK:
        check_design(reference.main_design(design.factors()), dataset.inventory, dataset.source or dataset.name)
        quad = reference.classify_quad
    elif design.task == "category-policy":
        policies.check_policy(design, dataset)
        quad = policies.category_policy_quad
    elif design.task in ("category", "compact", *MATCHED_GROUPS):
        if design.task == "compact":
            dataset, examples = coarse_view(dataset, examples)
        check_design(design, dataset.inventory, dataset.source or dataset.name)
        quad = build_quad
    else:
        raise DesignError(f"unknown task {design.task!r} (use {', '.join(TASKS)})")
    for i, ex in enumerate(examples):
        yield from quad(ex, i, dataset, design)


def build_requests(dataset: Dataset, examples: Sequence[Example], design: Design = Design()) -> list[Request]:
    return list(iter_requests(dataset, examples, design))


def panel_requests(
    dataset: str,
    panel: str = "main",
    design: Design | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
    fmt: UserFormat | None = None,
) -> list[Request]:
    """The requests of one panel of a named dataset under one design, in panel order (``pfr.build``)."""
    ds = load_dataset(dataset, data_dir, fmt)
    examples = build_panel(ds, panel, seed=seed, limit=limit)
    return build_requests(ds, examples, design or Design(seed=seed))
