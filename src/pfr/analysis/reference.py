"""The classify-then-map reference in a report (docs/method.md §4.2, paper §3.2, §5.1, Figure 1, Table 2).

A stored reference result is one full-inventory classification of a text. :func:`expand` replaces
it by the four main-design requests of that text, each with the decision ``g_S`` maps the
prediction to, so the reference becomes a setting of its own (its design name is the reference
design's, ``task=classify-then-map``). A mapped decision is a hard decision: its stored
log-probabilities are 0 for the mapped option and log(1e-12) for the others. An invalid reference
answer (choice -1) stays invalid, and label-only, in all four mapped requests (docs/method.md §6.1).

:func:`reference_correct` gives, per model × dataset × panel × text, whether the reference
classified the text correctly; the report uses it for the accuracy of the reference setting and
for the *reference-correct subset* of the direct setting (Figure 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from pfr.design.invalid import INVALID, answered
from pfr.design.reference import TASK, is_reference, mapped_quad
from pfr.models.scores import LOG_FLOOR
from pfr.run.store import StoredResult

#: suffix of the design name of a direct setting restricted to the reference-correct texts
SUBSET = "reference-correct"

#: (model identity key, dataset, panel, design, text_id) → the reference classified the text correctly
Outcomes = dict[tuple[str, str, str, str, str], bool]


def predicted(result: StoredResult) -> str | None:
    """The category the reference predicted (its first-in-order argmax option), or ``None`` for an
    invalid answer, which names no category (docs/method.md §6.1: never ``options[-1]``)."""
    if not answered(result.choice):
        return None
    return result.request.options[result.choice].category


def expand(results: Iterable[StoredResult]) -> tuple[list[StoredResult], Outcomes]:
    """Replace every reference result by its four mapped main-design results; other results pass
    through unchanged. Also returns whether each reference classification was correct."""
    from pfr.analysis.metrics import identity_key

    out: list[StoredResult] = []
    outcomes: Outcomes = {}
    for r in results:
        q = r.request
        if not is_reference(q):
            out.append(r)
            continue
        pred = predicted(r)
        outcomes[(identity_key(r.model), q.dataset, q.panel, q.design, q.text_id)] = pred == q.y
        for req, choice in mapped_quad(q, pred):
            if not answered(choice):  # invalid stays invalid, label-only as it was stored
                out.append(replace(r, request=req, logits=(), logprobs=(), censored=(), choice=INVALID,
                                   meta={**r.meta, "invalid": True, "reference_prediction": None}))  # fmt: skip
                continue
            hard = tuple(0.0 if i == choice else LOG_FLOOR for i in range(len(req.options)))
            out.append(
                replace(
                    r,
                    request=req,
                    logits=hard,
                    logprobs=hard,
                    censored=tuple(False for _ in hard),
                    choice=choice,
                    meta={**r.meta, "reference_prediction": pred},
                )
            )
    return out, outcomes


def is_reference_setting(design_factors: dict[str, object]) -> bool:
    return design_factors.get("task") == TASK


def subset_design(design: str) -> str:
    return f"{design} [{SUBSET}]"


def subset_positions(
    positions: dict[tuple[str, str, str, str], np.ndarray],
    text_ids: np.ndarray,
    outcomes: Outcomes,
    ident_keys: dict[str, str],
) -> dict[tuple[str, str, str, str], tuple[np.ndarray, str]]:
    """The reference-correct subsets (Figure 1): for every ``direct`` setting whose model, dataset
    and panel also have a reference, the rows of the texts the reference classified correctly.

    Returns the subset setting's key → (its rows, the reference design it is restricted by)."""
    default = next(iter(_reference_names()))
    refs: dict[tuple[str, str, str], list[str]] = {}
    for ident, dataset, panel, design, _ in outcomes:
        names = refs.setdefault((ident, dataset, panel), [])
        if design not in names:
            names.append(design)
    out: dict[tuple[str, str, str, str], tuple[np.ndarray, str]] = {}
    for (model, dataset, panel, design), pos in positions.items():
        if design != "direct" or model not in ident_keys:
            continue
        ident = ident_keys[model]
        for ref in refs.get((ident, dataset, panel), []):
            keep = np.asarray(
                [outcomes.get((ident, dataset, panel, ref, str(t)), False) for t in text_ids[pos]], dtype=bool
            )
            if keep.any():
                name = subset_design("direct") if ref == default else f"direct [{SUBSET}: {ref}]"
                out[(model, dataset, panel, name)] = (pos[keep], ref)
    return out


def _reference_names() -> tuple[str, ...]:
    from pfr.design.types import Design

    return (Design(task=TASK).name,)
