"""The report's data: everything a report shows, computed once from one or more results stores.

:func:`load_report` reads the stores, builds the per-text indicator matrix of every setting
(model × dataset × panel × design), bootstraps intervals, runs the McNemar tests with Holm over
the whole report, and keeps the per-request results that the HTML and the figures need (margins,
fallback positions, the four requests of each text). :mod:`pfr.report.render` turns a
:class:`Report` into one of the formats of ``pfr report``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from pfr.analysis import reference
from pfr.analysis.bootstrap import Interval, check_draws, paired_bootstrap, setting_rng
from pfr.analysis.metrics import (
    DECOMPOSITION,
    DELTA_OF,
    INDICATORS,
    METRICS,
    QUAD,
    SETTING,
    identity_key,
    model_labels,
    quad_indicators,
    results_frame,
)
from pfr.analysis.pooling import pool_groups, pooled_matrix
from pfr.analysis.stats_tests import Family, McNemar, family_from, holm, setting_tests
from pfr.models.decide import reason_counts
from pfr.options import FAMILY_ALPHA
from pfr.report.identity import model_family, parse_params
from pfr.run.store import Store, StoredResult

Key = tuple[str, str, str, str]


@dataclass(frozen=True)
class Setting:
    """The statistics of one model × dataset × panel × design (fractions, not percent)."""

    model: str
    dataset: str
    panel: str
    design: str
    n: int
    incomplete: int
    censored: float
    metrics: dict[str, Interval]
    delta: dict[str, Interval]
    decomposition: dict[str, dict[str, int]]
    tests: tuple[McNemar, ...]
    counts: dict[str, int]
    stratified: bool
    params: float | None = None
    family: str | None = None  # the model family: the recall-against-size figure joins only its members
    task: str = "category"
    parses: dict[str, int] = field(default_factory=dict)  # answers per meta.parse reason (how they were read)
    accuracy: Interval | None = None  # the classify-then-map reference's classification accuracy
    subset: str | None = None  # "reference-correct": a direct setting restricted to those texts
    pooled_over: str | None = None  # a pooled setting: the factor group its members differ in
    members: tuple[str, ...] = ()  # … and the members' design names
    label_only: float = 0.0  # the share of requests answered with a label and no scores

    @property
    def invalid(self) -> dict[str, float]:
        """Invalid-answer rates (docs/method.md §6.1): ``all`` (INV) and per RU/RC/FU/FC (INV_RU …)."""
        return {"all": self.metrics["INV"].value, **{c: self.metrics[f"INV_{c}"].value for c in QUAD}}

    @property
    def key(self) -> Key:
        return (self.model, self.dataset, self.panel, self.design)

    @property
    def label(self) -> str:
        return " · ".join(self.key)

    def test(self, metric: str) -> McNemar:
        return next(t for t in self.tests if t.metric == metric)

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "dataset": self.dataset,
            "panel": self.panel,
            "design": self.design,
            "n": self.n,
            "incomplete": self.incomplete,
            "censored": self.censored,
            "resampling": "stratified" if self.stratified else "texts",
            **{m: self.metrics[m].as_dict() for m in METRICS},
            "delta": {k: self.delta[k].as_dict() for k in DELTA_OF},
            "decomposition": self.decomposition,
            "tests": [t.as_dict() for t in self.tests],
            "task": self.task,
            "params": self.params,
            "family": self.family,
            **({"parses": self.parses} if self.parses else {}),
            **({"accuracy": self.accuracy.as_dict()} if self.accuracy is not None else {}),
            **({"subset": self.subset} if self.subset is not None else {}),
            **({"pooled_over": self.pooled_over, "members": list(self.members)} if self.pooled_over else {}),
            "label_only": self.label_only,
            "invalid": self.invalid,
        }


@dataclass(frozen=True)
class Report:
    """A report's settings plus the per-text detail behind them.

    ``texts`` has one row per complete quad (index = setting + ``text_id``) with the fallback
    position, option count, stratum, and per cell the margin ``m_<cell>`` (log p_fallback − log
    max p_regular) and ``reg_<cell>`` (the best regular option is the expected one).
    ``quads`` maps (model, dataset, panel, design, text_id) to the four stored results.
    """

    settings: tuple[Setting, ...]
    draws: int
    seed: int
    stores: tuple[str, ...]
    indicators: pd.DataFrame
    texts: pd.DataFrame
    quads: dict[tuple[str, ...], dict[str, StoredResult]] = field(repr=False)
    positions: dict[Key, np.ndarray] = field(repr=False, default_factory=dict)
    family: Family = field(default_factory=Family)
    pooled: tuple[Setting, ...] = ()  # descriptive settings averaged over templates / choice sets × positions

    def block(self, s: Setting) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The indicator rows and ``texts`` rows of one setting, in panel order."""
        pos = self.positions[s.key]
        return self.indicators.iloc[pos], self.texts.iloc[pos]

    @property
    def n_tests(self) -> int:
        """The size of the Holm family (tests outside it are descriptive)."""
        return sum(1 for s in self.settings for t in s.tests if not math.isnan(t.p_holm))

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": [s.as_dict() for s in self.settings],
            **({"pooled": [s.as_dict() for s in self.pooled]} if self.pooled else {}),
            "family": {"name": self.family.name, "tests": self.n_tests, "method": "holm", "alpha": FAMILY_ALPHA,
                       "description": self.family.describe(self.n_tests)},
            "draws": self.draws,
            "seed": self.seed,
        }


def margin(logprobs: Sequence[float], fallback_index: int) -> tuple[float, int]:
    """``m = log p_fallback − log max p_regular`` and the best regular option (first in order);
    NaN for a label-only answer, which has no scores."""
    if not logprobs:
        return math.nan, -1
    regular = [*logprobs[:fallback_index], *logprobs[fallback_index + 1 :]]
    if not regular:
        return math.inf, -1
    top = max(regular)  # the first of equal maxima, as max keeps the earlier one
    j = regular.index(top)
    return float(logprobs[fallback_index]) - float(top), j if j < fallback_index else j + 1


def is_compact(panel: str, design: str) -> bool:
    """Compact tasks (the cross-backbone panel/design) resample within coarse-category quotas."""
    names = (panel.lower(), design.lower())
    return any("cross-backbone" in s or s.startswith("compact") for s in names)


def stratum(result: StoredResult) -> str:
    """The coarse category of a text's gold label (its parent, else the label itself)."""
    req = result.request
    return _parents(req.inventory).get(req.y) or req.y


_PARENTS: dict[int, tuple[tuple[Any, ...], dict[str, str]]] = {}


def _parents(inventory: tuple[Any, ...]) -> dict[str, str]:
    """Category id → its parent, else itself, once per inventory object (a report shares one per store)."""
    hit = _PARENTS.get(id(inventory))
    if hit is None or hit[0] is not inventory:
        table: dict[str, str] = {}
        for c in inventory:
            table.setdefault(c.id, c.parent or c.id)  # the first of a repeated id, as a scan would find
        if len(_PARENTS) > 256:
            _PARENTS.clear()
        hit = _PARENTS[id(inventory)] = (inventory, table)
    return hit[1]


def _order(values: Sequence[str]) -> dict[str, int]:
    return {v: i for i, v in enumerate(dict.fromkeys(values))}  # first appearance ranks first


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced, so that JSON output is strict JSON (no
    ``NaN``/``Infinity`` tokens): NaN (not computed) → ``null``, ±∞ (e.g. a calibration threshold
    that no development margin reaches) → the strings ``"inf"`` / ``"-inf"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    return value


def _read(stores: Sequence[str]) -> list[StoredResult]:
    results: list[StoredResult] = []
    for path in stores:
        with Store(path, create=False) as st:
            results.extend(st.results())
    return results


def load_report(
    stores: Sequence[str], draws: int = 10_000, seed: int = 0, family: str | Family | None = None
) -> Report:
    """Read ``stores`` and compute every setting's intervals, tests (Holm over ``family``) and details."""
    check_draws(draws, seed)
    results = _read(stores)
    return build_report(results, draws=draws, seed=seed, stores=stores, family=family)


def build_report(
    results: Sequence[StoredResult],
    draws: int = 10_000,
    seed: int = 0,
    stores: Sequence[str] = (),
    family: str | Family | None = None,
) -> Report:
    """The report of already-read results (see :func:`load_report`)."""
    fam = family_from(family)
    results, outcomes = reference.expand(results)  # classify-then-map → its mapped main quads
    identities: dict[str, dict[str, Any]] = {}
    first_seen: dict[Key, None] = {}  # settings in order of first appearance
    quads: dict[tuple[str, ...], dict[str, StoredResult]] = {}
    labels = model_labels(results)
    model_of = [labels[identity_key(r.model)] for r in results]  # each result's model label
    for name, r in zip(model_of, results):
        q = r.request
        qkey = (name, q.dataset, q.panel, q.design, q.text_id)
        cells = quads.get(qkey)
        if cells is None:
            cells = quads[qkey] = {}
            if (name, q.dataset, q.panel, q.design) not in first_seen:
                identities.setdefault(name, r.model)
                first_seen[(name, q.dataset, q.panel, q.design)] = None
        cells.setdefault(q.assignment + q.definition, r)
    # each level's values in order of first appearance: the order of the first settings that hold them
    seen: dict[str, list[str]] = {lvl: [k[i] for k in first_seen] for i, lvl in enumerate(SETTING)}
    ind = quad_indicators(results_frame(results, model_of))
    if ind.empty:
        empty = pd.DataFrame()
        return Report((), draws, seed, tuple(stores), ind, empty, quads, family=fam)

    incomplete: dict[Key, int] = {}
    for tkey, qcells in quads.items():
        if len(qcells) < len(QUAD):
            k = (tkey[0], tkey[1], tkey[2], tkey[3])
            incomplete[k] = incomplete.get(k, 0) + 1

    quad_rows = [quads[tuple(str(k) for k in key)] for key in ind.index]
    firsts = [cells["RU"] for cells in quad_rows]
    columns: dict[str, list[Any]] = {
        "fallback_index": [r.request.fallback_index for r in firsts],
        "k": [len(r.request.options) for r in firsts],
        "stratum": [stratum(r) for r in firsts],
        "y": [r.request.y for r in firsts],
        "censored": [sum(any(cells[c].censored) for c in QUAD) for cells in quad_rows],
        "label_only": [sum(cells[c].label_only for c in QUAD) for cells in quad_rows],
    }
    for c in QUAD:
        cell = [cells[c] for cells in quad_rows]
        scored = [margin(res.logprobs, res.request.fallback_index) for res in cell]
        columns[f"m_{c}"] = [m for m, _ in scored]
        columns[f"reg_{c}"] = [best == res.request.expected for (_, best), res in zip(scored, cell)]
    texts = pd.DataFrame(columns, index=ind.index)

    positions: dict[Key, np.ndarray] = {}
    for key, pos in ind.groupby(level=SETTING, sort=False).indices.items():
        parts = [str(v) for v in key] if isinstance(key, tuple) else [str(key)] * 4
        positions[(parts[0], parts[1], parts[2], parts[3])] = np.asarray(pos)
    ident_keys = {name: identity_key(ident) for name, ident in identities.items()}
    text_ids = np.asarray([str(k[4]) for k in ind.index])
    subsets = reference.subset_positions(positions, text_ids, outcomes, ident_keys)
    for k4, (pos, _) in subsets.items():
        positions[k4] = pos
        seen["design"].append(k4[3])
        for tid in text_ids[pos]:
            quads[(*k4, str(tid))] = quads[(k4[0], k4[1], k4[2], "direct", str(tid))]
    names = {lvl: _order(seen[lvl]) for lvl in SETTING}
    order = sorted(
        positions,
        key=lambda k: (names["model"][k[0]], names["dataset"][k[1]], names["panel"][k[2]], k[3] != "direct",
                       names["design"][k[3]]),
    )  # fmt: skip
    matrix = ind[INDICATORS].to_numpy(dtype=np.float64)

    raw = [(k4, setting_tests(matrix[positions[k4]], INDICATORS)) for k4 in order]
    members = fam.members(order)  # the family is decided over the whole report (primary: per model × dataset)
    in_family = [k4 in members for k4, tests in raw for _ in tests]
    fam_p, fam_r = holm([t.p for (k4, tests) in raw for t in tests if k4 in members])
    fam_iter = iter(zip(fam_p, fam_r))
    adjusted, reject = [], []
    for member in in_family:
        p_adj, rej = next(fam_iter) if member else (math.nan, False)
        adjusted.append(p_adj)
        reject.append(rej)

    settings = []
    i = 0
    for k4, tests in raw:
        x = matrix[positions[k4]]
        compact = is_compact(k4[2], k4[3])
        strata = texts["stratum"].to_numpy()[positions[k4]] if compact else None
        first = quads[(*k4, str(text_ids[positions[k4][0]]))]["RU"].request
        task = str(first.factors.get("task", "category"))
        correct = None  # the classify-then-map reference's per-text accuracy, paired with its metrics
        if task == reference.TASK:
            keys = [(ident_keys[k4[0]], k4[1], k4[2], k4[3], str(t)) for t in text_ids[positions[k4]]]
            correct = np.array([outcomes[k] for k in keys], dtype=np.float64)
        boot = paired_bootstrap(x, draws, setting_rng(seed, k4), strata, extra=correct)
        accuracy = boot.extra[0] if correct is not None else None
        filled = []
        for t in tests:
            filled.append(replace(t, p_holm=adjusted[i], reject=reject[i]))
            i += 1
        counts = {c: round(float(v)) for c, v in zip(INDICATORS, x.sum(axis=0))}
        n = len(x)
        settings.append(
            Setting(
                model=k4[0],
                dataset=k4[1],
                panel=k4[2],
                design=k4[3],
                n=n,
                incomplete=incomplete.get(k4, 0),
                censored=float(texts["censored"].to_numpy()[positions[k4]].sum()) / (len(QUAD) * n),
                metrics=boot.metrics,
                delta=boot.delta,
                decomposition={a: {k: counts[f"{a}_{k}"] for k in DECOMPOSITION} for a in ("R", "F")},
                tests=tuple(filled),
                counts=counts,
                stratified=compact,
                params=parse_params(identities.get(k4[0], {})),
                family=model_family(identities.get(k4[0], {}), k4[0]),
                task=task,
                parses=reason_counts(r.meta for t in text_ids[positions[k4]] for r in quads[(*k4, str(t))].values()),
                accuracy=accuracy,
                subset=reference.SUBSET if k4 in subsets else None,
                label_only=float(texts["label_only"].to_numpy()[positions[k4]].sum()) / (len(QUAD) * n),
            )
        )
    pooled = pooled_settings(matrix, positions, text_ids, texts, quads, settings, draws, seed)
    return Report(tuple(settings), draws, seed, tuple(stores), ind, texts, quads, positions, family=fam, pooled=pooled)


def pooled_settings(
    matrix: np.ndarray,
    positions: Mapping[Key, np.ndarray],
    text_ids: np.ndarray,
    texts: Any,
    quads: Mapping[tuple[str, ...], Mapping[str, Any]],
    settings: Sequence[Setting],
    draws: int,
    seed: int,
) -> tuple[Setting, ...]:
    """The report's pooled settings (:mod:`pfr.analysis.pooling`): intervals, no tests."""
    by_key = {s.key: s for s in settings if s.subset is None}  # a subset is not a design of its own texts
    factors = {k: dict(quads[(*k, str(text_ids[positions[k][0]]))]["RU"].request.factors) for k in by_key}
    out = []
    for g in pool_groups(factors):
        x, rows = pooled_matrix(matrix, positions, text_ids, g.members)
        if not len(x):
            continue
        first = by_key[g.members[0]]
        strata = texts["stratum"].to_numpy()[rows] if first.stratified else None
        boot = paired_bootstrap(x, draws, setting_rng(seed, g.key), strata)
        sums = {c: float(v) for c, v in zip(INDICATORS, x.sum(axis=0))}
        decomposition = {a: {k: round(sums[f"{a}_{k}"]) for k in DECOMPOSITION} for a in ("R", "F")}
        setting = Setting(
            model=g.key[0],
            dataset=g.key[1],
            panel=g.key[2],
            design=g.key[3],
            n=len(x),
            incomplete=0,
            censored=max(by_key[m].censored for m in g.members),
            metrics=boot.metrics,
            delta=boot.delta,
            decomposition=decomposition,
            tests=(),
            counts={c: round(v) for c, v in sums.items()},
            stratified=first.stratified,
            params=first.params,
            family=first.family,
            task=first.task,
            pooled_over=g.pool,
            members=tuple(m[3] for m in g.members),
        )
        out.append(setting)
    return tuple(out)
