"""Builders of the Fast/Defer policies (docs/method.md §4.3), the boundary panels and the compact task
(§4.2): invariants, the required action recomputed with ``fractions.Fraction`` from the printed
numbers, combination counts and quotas; panels and tasks that do not belong together are refused."""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

import pfr
from pfr.design.types import Design, Request
from pfr.errors import DesignError

NUM = r"(-?[0-9]+(?:\.[0-9]+)?)"
ESTIMATES = re.compile(
    rf"q_fast = {NUM}, the slow model's is q_slow = {NUM}, deferring to the slow model costs c = {NUM} extra, "
    rf"and the cost weight is λ = {NUM}\."
)
GAIN = "Choose Defer if the quality gain q_slow − q_fast is greater than λ·c; otherwise choose Fast."
UTILITY = "Choose Defer unless q_fast ≥ q_slow − λ·c; if q_fast ≥ q_slow − λ·c, choose Fast."


def _printed(r: Request) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(q_fast, q_slow, c, λ) read back from the criterion text, as exact fractions."""
    m = ESTIMATES.search(r.criterion)
    assert m, r.criterion
    return tuple(Fraction(x) for x in m.groups())  # type: ignore[return-value]


def _defer(q_fast: Fraction, q_slow: Fraction, c: Fraction, lam: Fraction) -> bool:
    return q_slow - lam * c > q_fast  # ties select Fast


def _quads(reqs: list[Request]) -> list[list[Request]]:
    assert len(reqs) % 4 == 0
    return [reqs[i : i + 4] for i in range(0, len(reqs), 4)]


@pytest.fixture(scope="module")
def policy(data_dir: Path) -> dict[str, list[Request]]:
    return {
        info: pfr.build("trec", "policy", Design(task="quality-cost", policy_info=info), data_dir=data_dir)
        for info in ("estimates", "utilities", "predicate")
    }


def test_quality_cost_combinations_and_required_action(policy: dict[str, list[Request]]) -> None:
    reqs = policy["estimates"]
    assert len(reqs) == 512
    combos: Counter[tuple[Fraction, Fraction, Fraction]] = Counter()
    for i, quad in enumerate(_quads(reqs)):
        assert [r.assignment + r.definition for r in quad] == ["RU", "RC", "FU", "FC"]
        assert {r.index for r in quad} == {i}
        q_fast, q_slow, c, _ = _printed(quad[0])
        d = q_slow - q_fast
        combos[(q_fast, d, c)] += 1
        for r in quad:
            qf, qs, cc, lam = _printed(r)
            assert (qf, qs, cc) == (q_fast, q_slow, c)  # only λ changes within a quad
            assert lam == d / c + (Fraction(1, 4) if r.assignment == "R" else -Fraction(1, 4))
            defer = _defer(qf, qs, cc, lam)
            assert defer == (r.assignment == "F")  # R requires Fast, F requires Defer
            assert r.expected == (1 if defer else 0)
            options = [(o.symbol, o.label, o.is_fallback) for o in r.options]
            assert options == [("A", "Fast", False), ("B", "Defer", True)]
            assert r.fallback_index == 1
            assert r.criterion.endswith(GAIN if r.definition == "U" else UTILITY)
            recorded = tuple(Fraction(r.factors[k]) for k in ("q_fast", "q_slow", "cost", "lambda"))
            assert recorded == (qf, qs, cc, lam)  # the factors record what the request prints
    # round-robin in panel order: text i gets combination i mod 12
    grid = {(q, d, c) for q in (Fraction("0.50"), Fraction("0.65"), Fraction("0.80"))
            for d in (Fraction("0.10"), Fraction("0.15")) for c in (Fraction("0.10"), Fraction("0.20"))}  # fmt: skip
    assert set(combos) == grid
    assert sorted(combos.values()) == [10] * 4 + [11] * 8


def test_information_conditions(policy: dict[str, list[Request]]) -> None:
    u_slow = re.compile(rf"u_fast = q_fast = {NUM}; u_slow = q_slow − λ·c = {NUM}\.")
    for est, util, pred in zip(policy["estimates"], policy["utilities"], policy["predicate"]):
        assert est.text_id == util.text_id == pred.text_id and est.expected == util.expected == pred.expected
        q_fast, q_slow, c, lam = _printed(util)
        m = u_slow.search(util.criterion)
        assert m and Fraction(m[1]) == q_fast and Fraction(m[2]) == q_slow - lam * c
        assert "u_slow" not in est.criterion and "predicate" not in est.criterion
        defer = _defer(q_fast, q_slow, c, lam)
        if pred.definition == "U":
            assert f"q_slow − q_fast > λ·c is {'TRUE' if defer else 'FALSE'}" in pred.criterion
        else:
            assert f"q_fast ≥ q_slow − λ·c is {'FALSE' if defer else 'TRUE'}" in pred.criterion
        assert est.request_id != util.request_id != pred.request_id


@pytest.mark.parametrize(
    ("panel", "gains"),
    [
        ("boundary-zero-gain", {Fraction(0)}),
        ("boundary-negative-gain", {Fraction("-0.10"), Fraction("-0.15")}),
        ("boundary-tie", {Fraction("0.10"), Fraction("0.15")}),
    ],
)
def test_boundary_panels_require_fast_everywhere(data_dir: Path, panel: str, gains: set[Fraction]) -> None:
    reqs = pfr.build("trec", panel, Design(task="quality-cost"), data_dir=data_dir)
    assert len(reqs) == 256 and len({r.text_id for r in reqs}) == 64
    seen: Counter[tuple[Fraction, Fraction]] = Counter()
    for quad in _quads(reqs):
        assert [r.assignment + r.definition for r in quad] == ["RU", "RC", "FU", "FC"]
        q0 = _printed(quad[0])
        seen[(q0[0], q0[1] - q0[0])] += 1
        for r in quad:
            q_fast, q_slow, c, lam = _printed(r)
            assert not _defer(q_fast, q_slow, c, lam) and r.expected == 0  # Fast required
            d = q_slow - q_fast
            assert d in gains
            if panel == "boundary-zero-gain":
                assert d == 0 and lam == 1
            elif panel == "boundary-negative-gain":
                assert d < 0 and lam > 0
            else:
                assert q_slow - lam * c == q_fast  # an exact utility tie
            assert r.criterion.endswith(GAIN if r.definition == "U" else UTILITY)
        # the two slots differ only in the cost (and λ where it follows from it)
        assert {_printed(r)[2] for r in quad} == {Fraction("0.10"), Fraction("0.20")}
    assert {d for _, d in seen} == gains
    n_combos = 3 * len(gains)
    assert sorted(seen.values()) == sorted([64 // n_combos + (1 if i < 64 % n_combos else 0) for i in range(n_combos)])


def test_boundary_panels_are_disjoint_from_the_policy_panel(data_dir: Path, policy: dict[str, list[Request]]) -> None:
    ids = {r.text_id for r in policy["estimates"]}
    for panel in ("boundary-zero-gain", "boundary-negative-gain", "boundary-tie"):
        b = {r.text_id for r in pfr.build("trec", panel, Design(task="quality-cost"), data_dir=data_dir)}
        assert not b & ids
        ids |= b


@pytest.mark.parametrize("task", ["category", "compact", "category-policy", "classify-then-map"])
def test_boundary_panel_with_another_task_is_refused(data_dir: Path, task: str) -> None:
    with pytest.raises(DesignError, match="boundary panel"):
        pfr.build("trec", "boundary-tie", Design(task=task), data_dir=data_dir, limit=4)


def test_cli_boundary(pfr_cli, data_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "b.jsonl"
    ok = pfr_cli("build", "--dataset", "trec", "--panel", "boundary-negative-gain", "--task", "quality-cost",
                 "--out", str(out), "--data-dir", str(data_dir))  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "256 requests (64 texts)" in ok.stderr
    reqs = pfr.read_requests(out)
    assert len(reqs) == 256 and all(r.expected != r.fallback_index for r in reqs)
    # the boundary file runs as it was built: every request requires Fast, also under assignment F
    run = pfr_cli("run", "-m", "baseline:oracle", "--requests", str(out), "-s", str(tmp_path / "st"),
                  "--no-progress")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "256 requests: 256 scored now" in run.stderr
    bad = pfr_cli("build", "--dataset", "trec", "--panel", "boundary-zero-gain", "--task", "category",
                  "--out", str(tmp_path / "x.jsonl"), "--data-dir", str(data_dir))  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "boundary-zero-gain" in bad.stderr
    assert not (tmp_path / "x.jsonl").exists()


# --- the category policy ---------------------------------------------------------------------------

LIST = re.compile(r"Choose System2 if the input's category is (one|none) of: (.*); otherwise choose Fast\.")


@pytest.mark.parametrize("dataset", ["trec", "banking77"])
def test_category_policy_invariants(data_dir: Path, dataset: str) -> None:
    reqs = pfr.build(dataset, "category-policy", Design(task="category-policy"), data_dir=data_dir)
    assert len(reqs) == 512
    inventory = sorted(c.id for c in reqs[0].inventory)
    half = len(inventory) // 2
    for quad in _quads(reqs):
        groups = {}
        for r in quad:
            m = LIST.fullmatch(r.criterion)
            assert m, r.criterion
            members = m[2].split(", ")
            assert m[1] == ("one" if r.definition == "U" else "none")
            fast = set(members) if r.definition == "C" else set(inventory) - set(members)
            groups[r.assignment + r.definition] = fast
            assert [(o.label, o.is_fallback) for o in r.options] == [("Fast", False), ("System2", True)]
            assert r.expected == (0 if r.assignment == "R" else 1)
            assert members == sorted(members)
            assert r.supplied is None  # the input's category is never disclosed:
            assert not any(c in r.criterion.replace(m[2], "") for c in inventory)  # only the member list names any
        assert groups["RU"] == groups["RC"] and groups["FU"] == groups["FC"]  # U and C state one partition
        fast_r, fast_f = groups["RU"], groups["FU"]
        y = quad[0].y
        assert len(fast_r) == len(fast_f) == half  # group sizes stay
        assert y in fast_r and y not in fast_f  # R: gold → Fast; F: gold → System2
        assert len(fast_r - fast_f) == 1 and len(fast_f - fast_r) == 1  # one swap: the gold and a partner
        assert fast_r - fast_f == {y}


def test_category_policy_binary_metrics(data_dir: Path, tmp_path: Path) -> None:
    """Binary options: A+ + F+ = 1 under each definition, whatever the decisions."""
    reqs = pfr.build("trec", "category-policy", Design(task="category-policy"), data_dir=data_dir, limit=40)
    pfr.run("baseline:random", reqs, tmp_path / "s", progress=False)
    (m,) = pfr.metrics(tmp_path / "s")
    assert m["A+_U"] + m["F+_U"] == pytest.approx(1) and m["A+_C"] + m["F+_C"] == pytest.approx(1)
    assert 0 < m["F+_U"] < 1


# --- the compact cross-backbone task -----------------------------------------------------------------


def test_compact_task_quotas_and_balance(data_dir: Path) -> None:
    reqs = pfr.build("trec", "cross-backbone", Design(task="compact", k=4, info="text+label"), data_dir=data_dir)
    assert len(reqs) == 1024
    quads = _quads(reqs)
    coarse = sorted({"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"})
    assert sorted(c.id for c in reqs[0].inventory) == coarse
    quotas = Counter(q[0].y for q in quads)
    assert quotas == {"ABBR": 43, "DESC": 43, "ENTY": 43, "HUM": 43, "LOC": 42, "NUM": 42}
    assert Counter(q[0].fallback_index for q in quads) == {0: 64, 1: 64, 2: 64, 3: 64}
    for quad in quads:
        r_u, r_c, f_u, f_c = quad
        assert len(r_u.options) == 4 and sum(o.is_fallback for o in r_u.options) == 1
        assert r_u.options == r_c.options and f_u.options == f_c.options
        assert r_u.options[r_u.expected].category == r_u.y and f_u.expected == f_u.fallback_index
        diff = [i for i, (a, b) in enumerate(zip(r_u.options, f_u.options)) if a != b]
        assert diff == [r_u.expected]  # F replaces the gold in its slot; nothing else moves
        assert f_u.options[r_u.expected].category not in (r_u.y, None)
        assert r_u.supplied is not None and r_u.supplied.id == r_u.y
