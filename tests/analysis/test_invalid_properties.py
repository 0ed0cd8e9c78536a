"""Property suite (issue 31, item 10): random decision tables with invalid answers (choice -1, naming no
option), on the direct task, the classify-then-map reference and the quality-cost policy. Every metric
the report gives equals a small independent implementation written here from docs/method.md §6 and
§6.1 (plain loops over quads, no pfr metric code), and no invalid answer is ever counted correct or as
a fallback pick, nor given a margin by the threshold rules (§8).

Seeded (``derandomize=True``) and bounded, so the suite is deterministic and takes seconds."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pfr
from pfr.analysis.thresholds import margin_tables, rates
from pfr.design.types import Design, Request
from pfr.errors import DataError
from pfr.report.model import build_report
from pfr.run.store import StoredResult

SETTINGS = settings(
    max_examples=25, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
CELLS = ("RU", "RC", "FU", "FC")
TEXTS = 8
MODEL = {"backend": "python", "name": "table"}


@pytest.fixture(scope="module")
def tasks(data_dir: Path) -> dict[str, Any]:
    """Real requests of each task: direct quads (k = 4), the reference's full-inventory requests with
    the main quads they map onto, and the quality-cost policy's Fast/Defer quads."""
    ref = pfr.build("demo", "main", Design(task="classify-then-map", k=4), limit=TEXTS)
    return {
        "direct": pfr.build("demo", "main", Design(k=4), limit=TEXTS),
        "reference": ref,
        "mapped": pfr.build("demo", "main", Design(k=4), limit=TEXTS),
        "policy": pfr.build("trec", "policy", Design(task="quality-cost"), data_dir=data_dir, limit=TEXTS),
    }


def _result(q: Request, choice: int) -> StoredResult:
    """A stored result as a label-only backend leaves it: an invalid answer is choice -1 with meta.invalid."""
    meta = {"raw": "?" if choice < 0 else q.options[choice].label, "invalid": choice < 0, "label_only": True}
    return StoredResult(MODEL, q, None, (), (), (), choice, 0.0, meta)


# ------------------------------------------------------------------ the independent implementation


def _picks(choice: int, option: int) -> bool:
    return choice >= 0 and choice == option


def _g_s(q: Request, predicted: str | None) -> int:
    """docs/method.md §4.2: the predicted category's regular option, else the fallback; no prediction
    (an invalid classification) stays invalid (§6.1)."""
    if predicted is None:
        return -1
    for i, o in enumerate(q.options):
        if not o.is_fallback and o.category == predicted:
            return i
    return q.fallback_index


def _by_hand(quads: list[dict[str, tuple[int, int, int]]]) -> dict[str, Any]:
    """§6 and §6.1 over quads of (choice, expected, fallback index) per cell."""
    n = len(quads)
    m: dict[str, Any] = {}
    for d in "UC":
        m[f"A+_{d}"] = sum(_picks(t[f"R{d}"][0], t[f"R{d}"][1]) for t in quads) / n
        m[f"A-_{d}"] = sum(_picks(t[f"F{d}"][0], t[f"F{d}"][2]) for t in quads) / n
        m[f"F+_{d}"] = sum(_picks(t[f"R{d}"][0], t[f"R{d}"][2]) for t in quads) / n
        m[f"J_{d}"] = sum(_picks(*t[f"R{d}"][:2]) and _picks(*t[f"F{d}"][:2]) for t in quads) / n
        m[f"B_{d}"] = (m[f"A+_{d}"] + m[f"A-_{d}"]) / 2
    m["P4"] = sum(all(_picks(*t[c][:2]) for c in CELLS) for t in quads) / n
    for c in CELLS:
        m[f"INV_{c}"] = sum(t[c][0] < 0 for t in quads) / n
    m["INV"] = sum(t[c][0] < 0 for t in quads for c in CELLS) / (4 * n)
    decomposition: dict[str, dict[str, int]] = {}
    for a in "RF":
        counts = {"c2w": 0, "w2c": 0, "w2w": 0, "inv": 0}
        changed = 0
        for t in quads:
            u, c = t[f"{a}U"], t[f"{a}C"]
            if u[0] >= 0 and c[0] >= 0 and u[0] == c[0]:
                continue  # the same decision
            changed += 1
            if u[0] < 0 or c[0] < 0:
                counts["inv"] += 1
            elif _picks(*u[:2]):
                counts["c2w"] += 1
            elif _picks(*c[:2]):
                counts["w2c"] += 1
            else:
                counts["w2w"] += 1
        m[f"DR_{a}"] = changed / n
        decomposition[a] = counts
    m["decomposition"] = decomposition
    m["delta"] = {k: m[f"{k}_C"] - m[f"{k}_U"] for k in ("A+", "A-", "F+", "J", "B")}
    tests = {}
    for metric, cell in (("A-", "F"), ("F+", "R")):
        fb_u = [_picks(t[f"{cell}U"][0], t[f"{cell}U"][2]) for t in quads]
        fb_c = [_picks(t[f"{cell}C"][0], t[f"{cell}C"][2]) for t in quads]
        tests[metric] = (sum(u and not c for u, c in zip(fb_u, fb_c)), sum(c and not u for u, c in zip(fb_u, fb_c)))
    m["tests"] = tests
    return m


def _quads(results: list[StoredResult]) -> list[dict[str, tuple[int, int, int]]]:
    by_text: dict[str, dict[str, tuple[int, int, int]]] = {}
    for r in results:
        q = r.request
        by_text.setdefault(q.text_id, {})[q.assignment + q.definition] = (r.choice, q.expected, q.fallback_index)
    return list(by_text.values())


def _check(results: list[StoredResult], want: dict[str, Any]) -> Any:
    """The report's one setting against the hand computation, and the invalid rule on its indicator rows."""
    report = build_report(results, draws=1, seed=0)
    (s,) = report.settings
    for key, value in want.items():
        if key == "decomposition":
            assert s.decomposition == value
        elif key == "delta":
            assert all(math.isclose(s.delta[k].value, v, abs_tol=1e-12) for k, v in value.items()), s.delta
        elif key == "tests":
            assert {t.metric: (t.b, t.c) for t in s.tests} == value
        else:
            assert math.isclose(s.metrics[key].value, value, abs_tol=1e-12), (key, s.metrics[key].value, value)
    assert s.invalid == {"all": want["INV"], **{c: want[f"INV_{c}"] for c in CELLS}}
    assert sum(s.decomposition["R"].values()) == round(want["DR_R"] * s.n)
    rows, _ = report.block(s)
    for tkey, row in zip(rows.index, rows.to_dict("records")):
        cells = report.quads[(*s.key, str(tkey[-1]))]
        for c in CELLS:
            if cells[c].choice < 0:  # never correct, never a fallback pick, never the same decision
                assert (row[f"{c}_ok"], row[f"{c}_fb"], row[f"{c}_inv"], row[f"DR_{c[0]}"]) == (0, 0, 1, 1)
                assert row["P4"] == 0 and row[f"J_{c[1]}"] == 0
    return s


def _choices(k: int) -> st.SearchStrategy[int]:
    """An answer: invalid (-1) often, otherwise any option."""
    return st.one_of(st.just(-1), st.integers(0, k - 1))


# ------------------------------------------------------------------------------------- properties


@SETTINGS
@given(data=st.data())
def test_direct_metrics_equal_the_definitions(tasks: dict[str, Any], data: st.DataObject) -> None:
    reqs = tasks["direct"]
    n = data.draw(st.integers(1, TEXTS)) * 4
    results = [_result(q, data.draw(_choices(len(q.options)))) for q in reqs[:n]]
    _check(results, _by_hand(_quads(results)))


@SETTINGS
@given(data=st.data())
def test_policy_metrics_equal_the_definitions(tasks: dict[str, Any], data: st.DataObject) -> None:
    reqs = tasks["policy"]
    n = data.draw(st.integers(1, TEXTS)) * 4
    results = [_result(q, data.draw(_choices(len(q.options)))) for q in reqs[:n]]
    _check(results, _by_hand(_quads(results)))


@SETTINGS
@given(data=st.data())
def test_classify_then_map_keeps_an_invalid_classification_invalid(tasks: dict[str, Any], data: st.DataObject) -> None:
    refs, mapped = tasks["reference"], tasks["mapped"]
    n = data.draw(st.integers(1, TEXTS))
    picks = [data.draw(_choices(len(r.options))) for r in refs[:n]]
    results = [_result(r, c) for r, c in zip(refs[:n], picks)]
    quads = []
    for i, (r, c) in enumerate(zip(refs[:n], picks)):
        predicted = r.options[c].category if c >= 0 else None
        quad = mapped[4 * i : 4 * i + 4]
        assert [q.text_id for q in quad] == [r.text_id] * 4
        quads.append({q.assignment + q.definition: (_g_s(q, predicted), q.expected, q.fallback_index) for q in quad})
    s = _check(results, _by_hand(quads))
    assert math.isclose(s.accuracy.value if s.accuracy else -1, sum(r.options[c].category == r.y if c >= 0 else False
                        for r, c in zip(refs[:n], picks)) / n)  # fmt: skip
    assert s.metrics["J_U"].value == s.metrics["J_C"].value == s.accuracy.value  # J = accuracy, invalid or not


@SETTINGS
@given(data=st.data())
def test_thresholds_never_read_an_invalid_answer(tasks: dict[str, Any], data: st.DataObject) -> None:
    """Threshold rules need margins: a setting with an invalid answer gets no margin table (refused, naming
    it, or left out), so an invalid answer is never a fallback there; a setting with scores only is read
    as its scores say (native F+ and A− at τ = 0 from the first-in-order argmax, no ties)."""
    reqs = tasks["direct"]
    n = data.draw(st.integers(1, TEXTS)) * 4
    scored = []
    for q in reqs[:n]:
        perm = data.draw(st.permutations(range(len(q.options))))
        lps = tuple(-1.0 - float(v) for v in perm)  # distinct scores: no ties
        best = max(range(len(lps)), key=lambda i: lps[i])
        scored.append(StoredResult({"backend": "python", "name": "scored"}, q, None, lps, lps,
                                   tuple(False for _ in lps), best, 0.0, {}))  # fmt: skip
    bad = [_result(reqs[0], -1), *(_result(q, data.draw(_choices(len(q.options)))) for q in reqs[1:n])]
    try:
        tables = margin_tables([*scored, *bad])
    except DataError as exc:
        assert "table · demo · main · k=4 is invalid" in str(exc) or "k=4 is label-only" in str(exc)
        tables = margin_tables(scored)
    assert [k[0] for k in tables] == ["scored"]  # the table with invalid answers has no margins
    (table,) = tables.values()
    native = rates(table, 0.0)
    quads = _quads(scored)
    want = _by_hand(quads)
    for key in ("A+_U", "A+_C", "A-_U", "A-_C", "F+_U", "F+_C"):
        assert math.isclose(float(native[key][0]), want[key]), key
