"""docs/results say what docs/results/report.json (and thresholds.json) say: every percentage in the
prose of docs/results/README.md is written as a figure this test reads, and each figure matches the
stored report within the rounding it is written with. No model is rerun: the JSON is the record.

A figure is ``METRIC VALUES UNIT [INTERVAL] (MODEL, DATASETS, DESIGNS[, WHERE][; p = P, p_Holm = Q, n = N])``:

* METRIC: ``A+``, ``A−``, ``F+``, ``J``, ``B`` with `` (U)`` or `` (C)``, or ``P4``, ``DR-R``, ``DR-F``,
  ``accuracy``, or ``Δ`` + A+/A−/F+/J/B (C − U);
* VALUES: one number, numbers joined by ``/`` (one per dataset or design, in order), or ``a → b``
  (U → C, or the two WHEREs of ``τ = 0 → development τ``); UNIT ``%`` or ``pp``;
* DATASETS, DESIGNS: names joined by ``/``; a single value holds for each of them;
* WHERE (thresholds.json): ``τ = 0``, ``development τ`` or ``calibrated τ``.

A metric with U and C given without ``(U)``/``(C)`` and one value holds under both.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

NUM = r"[+−-]?\d+(?:\.\d+)?(?:e[+−-]?\d+)?"
FIGURE = re.compile(
    r"(?P<metric>Δ?(?:A\+|A−|F\+|J|B)|P4|DR-R|DR-F|accuracy)(?: \((?P<d>[UC])\))? "
    rf"(?P<vals>{NUM}(?:(?:/| → ){NUM})*) ?(?P<unit>%|pp)"
    rf"(?: \[(?P<lo>{NUM}), (?P<hi>{NUM})\])? \((?P<ctx>[^()]*)\)"
)
PERCENT = re.compile(r"\d+(?:\.\d+)? ?(?:%|pp\b)")
#: percentages that are settings of the run, not results
NOT_RESULTS = ("95 % paired", "the 5 % budget", "a 5 % budget")
WHERE = {"τ = 0": "native", "development τ": "dev_threshold", "calibrated τ": "calibration"}


def _number(text: str) -> tuple[float, float]:
    """The number and half a unit of its last written digit (the rounding it may carry)."""
    text = text.replace("−", "-")
    mantissa, _, exp = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = 10.0 ** int(exp) if exp else 1.0
    return float(text), 0.5 * 10.0**-decimals * scale + 1e-12


def _prose() -> str:
    text = (RESULTS / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\s+", " ", re.sub(r"```.*?```", "", text, flags=re.S))  # a figure may wrap


def _settings() -> dict[tuple[str, str, str], dict[str, Any]]:
    report = json.loads((RESULTS / "report.json").read_text(encoding="utf-8"))
    return {(s["model"], s["dataset"], s["design"]): s for s in report["settings"] if s["panel"] == "main"}


def _thresholds() -> dict[tuple[str, str, str], dict[str, Any]]:
    rows = json.loads((RESULTS / "thresholds.json").read_text(encoding="utf-8"))
    return {(r["model"], r["dataset"], r["design"]): r for r in rows if r["panel"] == "main"}


def _value(source: dict[str, Any], metric: str, d: str | None, where: str | None) -> list[dict[str, Any] | float]:
    """The stored value(s) a figure names: dicts with value/lo/hi from report.json, floats from thresholds."""
    metric = metric.replace("−", "-")  # the JSON keys are ASCII
    if where is not None:
        section = source[WHERE[where]]
        keys = [metric] if metric == "P4" else [f"{metric}_{x}" for x in ([d] if d else ["U", "C"])]
        return [float(section[k]) for k in keys]
    if metric.startswith("Δ"):
        return [source["delta"][metric[1:]]]
    if metric in ("P4", "accuracy"):
        return [source[metric]]
    if metric in ("DR-R", "DR-F"):
        return [source[metric.replace("-", "_")]]
    return [source[f"{metric}_{x}"] for x in ([d] if d else ["U", "C"])]


def _close(quoted: str, stored: float, scale: float = 100.0) -> bool:
    q, tol = _number(quoted)
    return math.isclose(q, scale * stored, rel_tol=0, abs_tol=tol)


def _check(m: re.Match[str], settings: dict[Any, dict[str, Any]], thresholds: dict[Any, dict[str, Any]]) -> list[str]:
    """Every disagreement between one figure and the stored report, as messages."""
    main, *extras = m["ctx"].split("; ")
    model, datasets, designs, *rest = main.split(", ")
    where = rest[0] if rest else None
    metric, d = m["metric"].replace("A-", "A−"), m["d"]
    combos = [(ds.lower(), des) for ds in datasets.split("/") for des in designs.split("/")]
    arrow = " → " in m["vals"]
    vals = m["vals"].split(" → ") if arrow else m["vals"].split("/")
    wheres = where.split(" → ") if where and " → " in where else [where, where]
    if arrow and wheres[0] == wheres[1] and (d or metric.startswith("Δ") or metric in ("P4", "DR-R", "DR-F")):
        return [f"{m[0]!r}: a → b is U → C, but {metric} is not given per definition here"]
    if not arrow and len(vals) not in (1, len(combos)):
        return [f"{m[0]!r}: {len(vals)} values for {len(combos)} settings"]
    problems = []
    for i, (dataset, design) in enumerate(combos):
        key = (model, dataset, design)
        table = settings if where is None else thresholds
        if key not in table:
            problems.append(f"{m[0]!r}: no setting {key} in {'report' if where is None else 'thresholds'}.json")
            continue
        if arrow:  # U → C of one metric, or one metric at two WHEREs
            pairs = [(vals[0], wheres[0], d or "U"), (vals[1], wheres[1], d or "C")]
        else:
            pairs = [(vals[i] if len(vals) > 1 else vals[0], where, d)]
        for quoted, at, dd in pairs:
            src = settings[key] if at is None else thresholds[key]
            for stored in _value(src, metric, dd, at):
                v = stored["value"] if isinstance(stored, dict) else stored
                if not _close(quoted, v):
                    problems.append(f"{m[0]!r}: {key} {metric} {dd or ''} is {100 * v:.2f}, not {quoted}")
                bounds = stored if m["lo"] and isinstance(stored, dict) else None
                if bounds and not (_close(m["lo"], bounds["lo"]) and _close(m["hi"], bounds["hi"])):
                    problems.append(f"{m[0]!r}: interval is [{100 * stored['lo']:.1f}, {100 * stored['hi']:.1f}]")
        for extra in (e for part in extras for e in part.split(", ")):
            name, _, quoted = extra.partition(" = ")
            s = settings[key]
            if name == "n":
                stored_n: float = s["n"]
            else:
                (test,) = [t for t in s["tests"] if t["metric"] == metric.lstrip("Δ").replace("−", "-")]
                stored_n = test["p_holm" if name == "p_Holm" else "p"]
            if not _close(quoted, stored_n, scale=1.0):
                problems.append(f"{m[0]!r}: {key} {name} is {stored_n:.4g}, not {quoted}")
    return problems


def test_every_percentage_of_the_results_prose_is_a_checked_figure() -> None:
    text = _prose()
    covered = [range(*m.span()) for m in FIGURE.finditer(text)]
    allowed = [range(m.start(), m.start() + len(p)) for p in NOT_RESULTS for m in re.finditer(re.escape(p), text)]
    loose = [
        text[max(0, p.start() - 40) : p.end()].replace("\n", " ")
        for p in PERCENT.finditer(text)
        if not any(p.start() in r for r in covered + allowed)
    ]
    assert not loose, "percentages not written as figures (see this file's docstring):\n" + "\n".join(loose)
    assert len(covered) > 20


def test_every_figure_of_the_results_prose_matches_report_json() -> None:
    settings, thresholds = _settings(), _thresholds()
    problems = [p for m in FIGURE.finditer(_prose()) for p in _check(m, settings, thresholds)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("figure", "ok"),
    [
        ("DR-R 10.9 % (qwen2.5-coder-1.5b, CLINC150, membership)", True),
        ("DR-R 0 % (qwen2.5-coder-1.5b, CLINC150, membership)", False),
        ("A+ (C) 7.8 % (qwen2.5-coder-1.5b, BANKING77, membership)", True),
        ("A+ 3.1/4.7 % (qwen2.5-coder-1.5b, CLINC150/BANKING77, membership)", False),
        ("A− 98.4 → 81.2 % (minilm-router, CLINC150, direct)", True),
        ("ΔA− −17.2 pp [−26.6, −7.8] (minilm-router, CLINC150, direct; p_Holm = 0.021)", True),
        ("ΔA− −17.2 pp [−26.6, −7.8] (minilm-router, CLINC150, direct; p_Holm = 0.03)", False),
        ("ΔA− −17.2 pp [−20.0, −7.8] (minilm-router, CLINC150, direct)", False),
        ("B (U) 82.0 → 86.7 % (minilm-router, CLINC150, direct, τ = 0 → development τ)", True),
        ("F+ (U) 6.2 % (minilm-router, BANKING77, direct/membership, calibrated τ)", True),
    ],
)
def test_a_figure_is_checked(figure: str, ok: bool) -> None:
    m = FIGURE.fullmatch(figure)
    assert m, figure
    assert (not _check(m, _settings(), _thresholds())) == ok
