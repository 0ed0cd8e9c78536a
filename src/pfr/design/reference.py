"""The classify-then-map reference (docs/method.md §4.2, paper §3.2 and §5.1).

One full-inventory classification request per text: every inventory category is an option, in
lexicographic order, with the symbols ``A–Z a–z 0–9`` (then option numbers, which only routers and
``python:`` models read); there is no fallback option. The prediction is then mapped by ``g_S`` onto
the four main-design requests of the same text (the quads ``--task category`` builds with the same
seed and factors): a predicted category in the regular set ``S`` of a request becomes that
category's option, any other category the fallback. U and C offer the same options, so the mapped
decisions never differ between them, and ``J`` equals the classification accuracy. An invalid
classification (it names no category) stays invalid in all four mapped requests (docs/method.md
§6.1): wrong everywhere, never the fallback, and a changed decision under R and F.
"""

from __future__ import annotations

from dataclasses import asdict, fields, replace

from pfr.data.types import Dataset, Example
from pfr.design.invalid import INVALID
from pfr.design.types import Design, Option, Request, content_id, option_symbol

TASK = "classify-then-map"
#: assignment and definition fields of a reference request (it belongs to no cell of the quad)
ASSIGNMENT, DEFINITION = "X", "-"
CRITERION = "Choose the category of the input."

_DESIGN_FIELDS = {f.name for f in fields(Design)}


def is_reference(request: Request) -> bool:
    return request.factors.get("task") == TASK


def classify_request(ex: Example, index: int, dataset: Dataset, design: Design) -> Request:
    """The full-inventory classification request of one example at panel position ``index``."""
    inventory = dataset.inventory
    ids = sorted(c.id for c in inventory)
    options = tuple(Option(option_symbol(i), cid, False, cid) for i, cid in enumerate(ids))
    expected = ids.index(ex.y)
    by_id = {c.id: c for c in inventory}
    supplied = by_id[ex.y] if design.info != "text" else None
    factors, name = design.factors(), design.name
    body = {
        "text_id": ex.text_id,
        "dataset": dataset.name,
        "panel": ex.panel,
        "index": index,
        "assignment": ASSIGNMENT,
        "definition": DEFINITION,
        "text": ex.text,
        "y": ex.y,
        "options": [asdict(o) for o in options],
        "expected": expected,
        "fallback_index": -1,
        "criterion": CRITERION,
        "design": name,
        "factors": factors,
        "supplied": asdict(supplied) if supplied else None,
        "show_text": design.info != "label",
        "inventory": [c.id for c in inventory],
    }
    return Request(
        request_id=content_id(body),
        text_id=ex.text_id,
        dataset=dataset.name,
        panel=ex.panel,
        index=index,
        assignment=ASSIGNMENT,
        definition=DEFINITION,
        text=ex.text,
        y=ex.y,
        options=options,
        expected=expected,
        fallback_index=-1,
        criterion=CRITERION,
        inventory=inventory,
        design=name,
        factors=dict(factors),
        supplied=supplied,
        show_text=design.info != "label",
    )


def classify_quad(ex: Example, index: int, dataset: Dataset, design: Design) -> list[Request]:
    """The reference task's requests of one example: one request, not four."""
    return [classify_request(ex, index, dataset, design)]


def main_design(factors: dict[str, object]) -> Design:
    """The main (``--task category``) design a reference request is mapped onto: same factors."""
    kept = {k: v for k, v in factors.items() if k in _DESIGN_FIELDS}
    return Design(**{**kept, "task": "category"})  # type: ignore[arg-type]


def main_quad(reference: Request) -> list[Request]:
    """The four main-design requests (RU, RC, FU, FC) of the reference request's text.

    Everything the main builder draws is keyed on the text, the dataset name, the inventory, the
    panel position and the design factors, all of which the reference request carries, so the
    quads equal those of ``pfr build --task category`` with the same seed and factors.
    """
    from pfr.design.builder import build_quad

    ex = Example(reference.text_id, reference.text, reference.y, "", 0, reference.panel)
    ds = Dataset(reference.dataset, reference.inventory, {})
    return build_quad(ex, reference.index, ds, main_design(reference.factors))


def g_s(request: Request, predicted: str | None) -> int:
    """``g_S``: the option of ``predicted`` when it is a regular option of ``request``, else the fallback;
    no prediction (``None``: the classification was an invalid answer) stays invalid (docs/method.md §6.1)."""
    if predicted is None:
        return INVALID
    for i, o in enumerate(request.options):
        if not o.is_fallback and o.category == predicted:
            return i
    return request.fallback_index


def mapped_quad(reference: Request, predicted: str | None) -> list[tuple[Request, int]]:
    """The main quad of the reference's text, each request with the choice ``g_S`` gives it.

    The mapped requests keep the reference's design name and factors, so they form a setting of
    their own next to the direct one."""
    out = []
    for q in main_quad(reference):
        choice = g_s(q, predicted)
        out.append((replace(q, design=reference.design, factors=dict(reference.factors)), choice))
    return out


def reference_problem(request: Request) -> str | None:
    """The first malformed field of a reference request (the store's check), else ``None``."""
    n = len(request.options)
    if (request.assignment, request.definition) != (ASSIGNMENT, DEFINITION):
        return f"assignment/definition: a {TASK} request has {ASSIGNMENT}/{DEFINITION}"
    if any(o.is_fallback for o in request.options) or request.fallback_index != -1:
        return f"options: a {TASK} request has no fallback option"
    if [o.category for o in request.options] != sorted(c.id for c in request.inventory):
        return "options: not the full inventory in lexicographic order"
    if isinstance(request.expected, bool) or not isinstance(request.expected, int) or not 0 <= request.expected < n:
        return f"expected: {request.expected!r} is out of range for {n} options"
    if request.options[request.expected].category != request.y:
        return "expected: not the gold category's option"
    return None
