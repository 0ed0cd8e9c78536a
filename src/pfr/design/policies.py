"""Fast/Defer policies (docs/method.md §4.3): the PFR quad applied to delegation decisions.

Both tasks map onto the quad: assignment ``R`` requires the regular action (``Fast``), ``F``
requires the fallback (``Defer`` / ``System2``); definition ``U`` and ``C`` are two equivalent
statements of the policy. The options are fixed: ``A. Fast``, ``B. Defer`` (or ``System2``).

* **quality-cost**: hypothetical estimates ``q_fast``, ``q_slow = q_fast + d`` and extra cost ``c``;
  Defer iff ``q_slow − q_fast > λ·c`` (gain wording, U) ⇔ Defer unless ``q_fast ≥ q_slow − λ·c``
  (utility-complement wording, C); ties select Fast. ``λ = d/c + 0.25`` requires Fast and
  ``λ = d/c − 0.25`` requires Defer. Texts are dealt round-robin to the 12 combinations of
  ``q_fast ∈ {0.50, 0.65, 0.80}``, ``d ∈ {0.10, 0.15}``, ``c ∈ {0.10, 0.20}``. The required action
  is decided in exact arithmetic (``Fraction``), never by a float comparison.
* **boundary panels** (``boundary-zero-gain``, ``boundary-negative-gain``, ``boundary-tie``; 64
  texts each): every one of the four requests requires Fast. Texts are dealt round-robin to
  ``q_fast ∈ {0.50, 0.65, 0.80}`` × the panel's gains (zero gain: ``d = 0``; negative gain:
  ``d ∈ {−0.10, −0.15}``; ties: ``d ∈ {0.10, 0.15}``); the quad's two slots (assignments ``R`` and
  ``F``) use the cost ``c = 0.10`` and ``c = 0.20``; ``λ = 1`` for zero and negative gain and
  ``λ = d/c`` for ties, so ``q_slow − λ·c = q_fast`` exactly there.
* **category-policy**: a hash-seeded half of the inventory maps to Fast, the rest to System2;
  ``R`` uses a partition with the gold category in the Fast group, ``F`` swaps it with one category
  of the other group, so group sizes and option order stay. U lists the System2 members, C
  excludes the Fast members; the input's category is never disclosed.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import asdict
from decimal import Decimal
from fractions import Fraction

from pfr.data.types import Category, Dataset, Example
from pfr.design.types import Design, Option, Request, content_id
from pfr.errors import DesignError

Q_FAST = (Fraction(50, 100), Fraction(65, 100), Fraction(80, 100))
GAINS = (Fraction(10, 100), Fraction(15, 100))
COSTS = (Fraction(10, 100), Fraction(20, 100))
COMBINATIONS = tuple(itertools.product(Q_FAST, GAINS, COSTS))
MARGIN = Fraction(1, 4)


def _num(x: Fraction) -> str:
    """An exact decimal rendering (every value here has a finite decimal expansion)."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    text = format(d.normalize(), "f")
    return text if "." in text else f"{text}.0"


def defer_required(q_fast: Fraction, q_slow: Fraction, lam: Fraction, cost: Fraction) -> bool:
    """Defer iff ``q_slow − λ·c > q_fast``; a tie selects Fast."""
    return q_slow - lam * cost > q_fast


def quality_cost_criterion(
    definition: str, info: str, q_fast: Fraction, q_slow: Fraction, lam: Fraction, cost: Fraction
) -> str:
    est = (
        f"Estimates: the fast model's expected quality is q_fast = {_num(q_fast)}, the slow model's is "
        f"q_slow = {_num(q_slow)}, deferring to the slow model costs c = {_num(cost)} extra, and the cost "
        f"weight is λ = {_num(lam)}."
    )
    if definition == "U":
        rule = "Choose Defer if the quality gain q_slow − q_fast is greater than λ·c; otherwise choose Fast."
    else:
        rule = "Choose Defer unless q_fast ≥ q_slow − λ·c; if q_fast ≥ q_slow − λ·c, choose Fast."
    parts = [est]
    if info == "utilities":
        parts.append(
            f"Utilities: u_fast = q_fast = {_num(q_fast)}; u_slow = q_slow − λ·c = {_num(q_slow - lam * cost)}."
        )
    elif info == "predicate":
        defer = defer_required(q_fast, q_slow, lam, cost)
        if definition == "U":
            parts.append(
                f"Defer predicate: q_slow − q_fast > λ·c is {'TRUE' if defer else 'FALSE'}. "
                "Mapping: TRUE → Defer, FALSE → Fast."
            )
        else:
            parts.append(
                f"Fast predicate: q_fast ≥ q_slow − λ·c is {'FALSE' if defer else 'TRUE'}. "
                "Mapping: TRUE → Fast, FALSE → Defer."
            )
    elif info != "estimates":
        raise DesignError(f"unknown policy information {info!r} (use estimates, utilities or predicate)")
    parts.append(rule)
    return " ".join(parts)


def _request(
    ex: Example,
    index: int,
    dataset: str,
    design: Design,
    assignment: str,
    definition: str,
    options: tuple[Option, ...],
    criterion: str,
    inventory: tuple[Category, ...],
    extra: Mapping[str, object],
    expected: int | None = None,
) -> Request:
    if expected is None:
        expected = 0 if assignment == "R" else 1
    factors = {**design.factors(), **extra}
    body = {
        "text_id": ex.text_id,
        "dataset": dataset,
        "panel": ex.panel,
        "index": index,
        "assignment": assignment,
        "definition": definition,
        "text": ex.text,
        "y": ex.y,
        "options": [asdict(o) for o in options],
        "expected": expected,
        "fallback_index": 1,
        "criterion": criterion,
        "design": design.name,
        "factors": factors,
        "inventory": [c.id for c in inventory],
    }
    return Request(
        request_id=content_id(body),
        text_id=ex.text_id,
        dataset=dataset,
        panel=ex.panel,
        index=index,
        assignment=assignment,
        definition=definition,
        text=ex.text,
        y=ex.y,
        options=options,
        expected=expected,
        fallback_index=1,
        criterion=criterion,
        inventory=inventory,
        design=design.name,
        factors=factors,
    )


def quality_cost_quad(ex: Example, index: int, dataset: Dataset, design: Design) -> list[Request]:
    q_fast, gain, cost = COMBINATIONS[index % len(COMBINATIONS)]
    q_slow = q_fast + gain
    options = (Option("A", "Fast", False, "Fast"), Option("B", None, True, "Defer"))
    out = []
    for assignment, lam in (("R", gain / cost + MARGIN), ("F", gain / cost - MARGIN)):
        if defer_required(q_fast, q_slow, lam, cost) != (assignment == "F"):  # pragma: no cover - invariant
            raise DesignError(f"policy combination {q_fast}, {gain}, {cost} does not flip the required action")
        extra = {"q_fast": _num(q_fast), "q_slow": _num(q_slow), "cost": _num(cost), "lambda": _num(lam)}
        for definition in ("U", "C"):
            rule = quality_cost_criterion(definition, design.policy_info, q_fast, q_slow, lam, cost)
            out.append(_request(ex, index, dataset.name, design, assignment, definition, options, rule, (), extra))
    return out


#: boundary panel → (kind recorded in the factors, the gains d its texts are dealt to)
BOUNDARY_PANELS: dict[str, tuple[str, tuple[Fraction, ...]]] = {
    "boundary-zero-gain": ("zero-gain", (Fraction(0),)),
    "boundary-negative-gain": ("negative-gain", (Fraction(-10, 100), Fraction(-15, 100))),
    "boundary-tie": ("tie", (Fraction(10, 100), Fraction(15, 100))),
}
#: the two slots of a boundary quad: (assignment field, cost c)
BOUNDARY_SLOTS = (("R", COSTS[0]), ("F", COSTS[1]))


def is_boundary_panel(panel: str) -> bool:
    return panel in BOUNDARY_PANELS


def boundary_lambda(kind: str, gain: Fraction, cost: Fraction) -> Fraction:
    """``λ = 1`` at zero and negative gain; ``λ = d/c`` (an exact utility tie) for ties."""
    return gain / cost if kind == "tie" else Fraction(1)


def boundary_quad(ex: Example, index: int, dataset: Dataset, design: Design) -> list[Request]:
    """The four requests of one boundary-panel text; all four require Fast (see the module docstring)."""
    if ex.panel not in BOUNDARY_PANELS:
        raise DesignError(f"panel {ex.panel!r} is not a boundary panel ({', '.join(BOUNDARY_PANELS)})")
    kind, gains = BOUNDARY_PANELS[ex.panel]
    combos = tuple(itertools.product(Q_FAST, gains))
    q_fast, gain = combos[index % len(combos)]
    q_slow = q_fast + gain
    options = (Option("A", "Fast", False, "Fast"), Option("B", None, True, "Defer"))
    out = []
    for assignment, cost in BOUNDARY_SLOTS:
        lam = boundary_lambda(kind, gain, cost)
        if defer_required(q_fast, q_slow, lam, cost) or (kind == "tie" and q_slow - lam * cost != q_fast):
            raise DesignError(f"boundary {q_fast}, {gain}, {cost} does not require Fast")  # pragma: no cover
        extra = {"q_fast": _num(q_fast), "q_slow": _num(q_slow), "cost": _num(cost), "lambda": _num(lam),
                 "boundary": kind}  # fmt: skip
        for definition in ("U", "C"):
            rule = quality_cost_criterion(definition, design.policy_info, q_fast, q_slow, lam, cost)
            out.append(
                _request(ex, index, dataset.name, design, assignment, definition, options, rule, (), extra, expected=0)
            )
    return out


def _hash_sorted(items: list[str], *key: object) -> list[str]:
    prefix = "|".join(str(k) for k in key)
    return sorted(items, key=lambda it: hashlib.sha256(f"{prefix}|{it}".encode()).hexdigest())


def category_policy_quad(ex: Example, index: int, dataset: Dataset, design: Design) -> list[Request]:
    ids = [c.id for c in dataset.inventory]
    order = _hash_sorted(ids, design.seed, dataset.name, "policy-half", ex.text_id)
    fast = set(order[: len(ids) // 2])
    if ex.y in fast:
        partner = next(c for c in order if c not in fast)
        fast_r, fast_f = fast, (fast - {ex.y}) | {partner}
    else:
        partner = next(c for c in order if c in fast)
        fast_r, fast_f = (fast - {partner}) | {ex.y}, fast
    options = (Option("A", "Fast", False, "Fast"), Option("B", None, True, "System2"))
    out = []
    for assignment, fast_group in (("R", fast_r), ("F", fast_f)):
        system2 = [c for c in ids if c not in fast_group]
        for definition in ("U", "C"):
            if definition == "U":
                rule = f"Choose System2 if the input's category is one of: {', '.join(system2)}; otherwise choose Fast."
            else:
                rule = (
                    f"Choose System2 if the input's category is none of: {', '.join(sorted(fast_group))}; "
                    "otherwise choose Fast."
                )
            out.append(
                _request(ex, index, dataset.name, design, assignment, definition, options, rule, dataset.inventory, {})
            )
    return out


def check_policy(design: Design, dataset: Dataset) -> None:
    if design.task == "category-policy" and len(dataset.inventory) < 2:
        raise DesignError("the category policy needs at least two categories")
