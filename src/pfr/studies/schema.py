"""Study files: one TOML file declares models × datasets × designs, so each analysis of the paper
is one file and a user's own study is one more (docs/method.md §9).

Example::

    name = "table1"
    store = "runs/table1"            # relative to this file
    family = "primary"               # Holm family: primary, all, or a list of settings (below)
    [[models]]
    model = "smollm2-135m"           # the --model spec ("spec" is accepted too)
    model-opt = { temperature = 1.0 }
    [[datasets]]
    dataset = "trec"                 # or a path (relative to this file), with text-col / label-col / descriptions,
                                     # or "hf:NAME[:CONFIG]" (a Hub id or folder) with split = "test"
    panel = "main"
    limit = 32                       # optional
    [[designs]]                      # the design flags of `pfr build`; several tables = several designs
    fallback = "Other"
    [report]
    format = ["text", "html"]
    draws = 10000

Key names equal the command-line flags without their dashes (``choice-set``, ``policy-info``,
``options`` or ``k``, ``text-col``, ``data-dir``, ``model-opt``); ``_`` may stand for ``-``. A
design key given as a list is crossed. An unknown key is an error that names it and lists the
valid ones. Relative paths (store, data-dir, dataset files, descriptions, ``python:`` model files)
resolve against the study file's folder.

``family`` may list the settings of the Holm family as tables of ``model``/``dataset``/``panel``/
``design`` (``[[family]]`` entries); a setting belongs to it when one entry matches it.
``[template]`` sets the prompt template of every LM backend (``renderer = "text"`` with any of the
template's fields — ``instruction``, ``inventory-header``, ``category-line``, ``input-line``,
``supplied-line``, ``options-header``, ``option-line``, ``rule-header``, ``answer-cue`` — or
``renderer = "json"``, the structured-JSON rendering for decision services, with ``instruction`` and
``answer-cue``); it becomes part of the model identity, so it is recorded with every result.
A model's ``num-cpus``, ``num-gpus`` and ``replicas`` size its Ray actors under ``pfr study
--executor ray`` (one actor per replica, each holding those resources; docs/scale-out.md).
``[check]`` (``min``, ``max``, ``on``; ``baseline`` with ``max_drop``, ``max_rise``) checks the report like
``pfr check`` (:mod:`pfr.studies.check`).
``[thresholds]`` (``dev-panel``, ``alpha``, ``draws``) also scores each dataset's development
panel under every design and writes the fixed-score selection-rule analyses (``pfr thresholds``).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pfr.analysis.stats_tests import Family, family_from
from pfr.data.loaders import UserFormat
from pfr.design.types import Design
from pfr.errors import DataError, PfrError
from pfr.options import ALPHA, DRAWS, PROBABILITY_OPEN, SEED, Number, Rule, option
from pfr.studies.check import parse_check

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPORT_FORMATS = ("text", "markdown", "latex", "csv", "json", "html")

#: study key (a CLI flag without its dashes) → Design field
DESIGN_KEYS: dict[str, str] = {
    "options": "k",
    "k": "k",
    "fallback": "fallback",
    "wording": "wording",
    "info": "info",
    "membership": "membership",
    "layout": "layout",
    "replacement": "replacement",
    "choice-set": "choice_set",
    "position": "position",
    "seed": "seed",
    "task": "task",
    "policy-info": "policy_info",
}
assert set(DESIGN_KEYS.values()) == {f.name for f in fields(Design)}
TOP_KEYS = ("name", "store", "data-dir", "family", "models", "datasets", "designs", "report", "thresholds", "template",
            "check")  # fmt: skip
MODEL_KEYS = ("model", "spec", "model-opt", "options", "num-cpus", "num-gpus", "replicas")
DATASET_KEYS = ("dataset", "name", "panel", "limit", "text-col", "label-col", "descriptions", "encoding", "split",
                "dev-fraction", "dev-seed")  # fmt: skip
REPORT_KEYS = ("format", "formats", "draws", "seed", "family")
THRESHOLD_KEYS = ("dev-panel", "alpha", "draws", "seed")
_PATH_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".tsv")


@dataclass(frozen=True)
class ModelEntry:
    """A study's model; ``num_cpus``/``num_gpus``/``replicas`` size its Ray actors (``--executor ray``)."""

    spec: str
    options: Mapping[str, Any] = field(default_factory=dict)
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    replicas: int = 1


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    panel: str = "main"
    limit: int | None = None
    fmt: UserFormat = field(default_factory=UserFormat)


@dataclass(frozen=True)
class ThresholdSpec:
    dev_panel: str = "development"
    alpha: float = ALPHA
    draws: int = 2000
    seed: int = 0


@dataclass(frozen=True)
class Study:
    name: str
    store: Path
    models: tuple[ModelEntry, ...]
    datasets: tuple[DatasetEntry, ...]
    designs: tuple[Design, ...]
    data_dir: str | None = None
    formats: tuple[str, ...] = ("text",)
    draws: int = 10_000
    seed: int = 0
    family: Family = field(default_factory=Family)
    thresholds: ThresholdSpec | None = None
    source: Path | None = None
    template: Any = None  # a pfr.models.lm.prompt.PromptTemplate for every LM backend of the study
    check: Any = None  # a pfr.studies.check.CheckSpec: the [check] thresholds (exit like `pfr check`)


def _fraction(value: object, where: str) -> float:
    """A user file's development share (``dev-fraction``), checked like ``--dev-fraction``."""
    from pfr.data.devsplit import check_fraction

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where}: expected a number between 0 and 1, got {value!r}")
    try:
        check_fraction(float(value))
    except PfrError as exc:
        raise DataError(f"{where}: {exc}") from None
    return float(value)


def _norm(key: object) -> str:
    return str(key).replace("_", "-")


def _check_keys(table: Any, valid: Sequence[str], where: str) -> dict[str, Any]:
    """``table`` with normalised keys; an unknown key is an error naming it and the valid ones."""
    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a table, got {type(table).__name__}")
    out: dict[str, Any] = {}
    for key, value in table.items():
        k = _norm(key)
        if k not in valid:
            raise DataError(f"{where}: unknown key {key!r} (valid keys: {', '.join(valid)})")
        out[k] = value
    return out


def _one_of(table: Mapping[str, Any], names: Sequence[str], where: str, default: Any = None) -> Any:
    given = [n for n in names if n in table]
    if len(given) > 1:
        raise DataError(f"{where}: {given[0]!r} and {given[1]!r} name the same setting; give one")
    return table[given[0]] if given else default


def _entries(
    tables: Sequence[Any], at: str, valid: Sequence[str], names: Sequence[str]
) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Each table of an array (``[[models]]``, ``[[datasets]]``): where it stands, its checked keys, and
    the value of the key it must have (``names``: that key and its other spellings)."""
    for i, table in enumerate(tables):
        where = f"{at}[{i}]"
        checked = _check_keys(table, valid, where)
        value = _one_of(checked, names, where)
        if value is None:
            raise DataError(f"{where}: missing key '{names[0]}'")
        yield where, checked, value


def _resolve_path(value: str, base: Path) -> str:
    p = Path(value).expanduser()
    return os.path.normpath(p if p.is_absolute() else (base / p))


def _looks_like_path(name: str) -> bool:
    return name.lower().endswith(_PATH_SUFFIXES) or "/" in name or "\\" in name


def _resolve_spec(spec: str, base: Path) -> str:
    """``python:FILE.py:FUNC`` with a relative file resolves against the study folder."""
    if spec.startswith("python:"):
        target, sep, func = spec[len("python:") :].rpartition(":")
        if sep and target.endswith(".py") and not Path(target).is_absolute():
            return f"python:{_resolve_path(target, base)}:{func}"
    return spec


def _expand_design(table: Mapping[str, Any], where: str) -> list[Design]:
    checked = _check_keys(table, tuple(DESIGN_KEYS), where)
    if "options" in checked and "k" in checked:
        raise DataError(f"{where}: 'options' and 'k' name the same setting; give one")
    keys = sorted(checked)
    values = [checked[k] if isinstance(checked[k], list) else [checked[k]] for k in keys]
    try:
        return [Design(**{DESIGN_KEYS[k]: v for k, v in zip(keys, combo)}) for combo in itertools.product(*values)]
    except PfrError as exc:
        raise DataError(f"{where}: {exc}") from None


def _opt(table: Mapping[str, Any], key: str, rule: Rule, default: Any, where: str) -> Any:
    """``table[key]`` parsed by its :mod:`pfr.options` rule; an error names the file and table."""
    try:
        return option(table, key, rule, default)
    except PfrError as exc:
        raise DataError(f"{where}: {exc}") from None


def load_study(
    path: str | Path,
    *,
    model: str | None = None,
    model_options: Mapping[str, str] | None = None,
    limit: int | None = None,
    store: str | Path | None = None,
) -> Study:
    """Parse and check a study file; every problem names the file and the table or key.

    ``model``, ``limit`` and ``store`` override the file (``pfr study FILE --model --limit --store``):
    one model instead of the file's, every dataset's first ``limit`` texts, another store (relative
    to the current directory, as on the command line). ``model_options`` (``--model-opt``) go with
    ``model``.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: study file not found")
    base = p.resolve().parent
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{p}: not valid TOML ({exc})") from None
    top = _check_keys(raw, TOP_KEYS, str(p))
    models = []
    if model is not None:
        models.append(ModelEntry(model, dict(model_options or {})))
    else:
        if not top.get("models"):
            raise DataError(f"{p}: a study needs at least one [[models]] table (or pass --model)")
        for where, m, spec in _entries(top["models"], f"{p}: models", MODEL_KEYS, ("model", "spec")):
            opts = _one_of(m, ("model-opt", "options"), where, {})
            if isinstance(opts, list):
                from pfr.models.registry import parse_options

                try:
                    opts = parse_options([str(o) for o in opts])
                except PfrError as exc:
                    raise DataError(f"{where}: {exc}") from None
            if not isinstance(opts, dict):
                raise DataError(f"{where}: model-opt must be a table or a list of key=value strings")
            models.append(
                ModelEntry(
                    _resolve_spec(str(spec), base),
                    dict(opts),
                    _opt(m, "num-cpus", Number(low=0), 1.0, where),
                    _opt(m, "num-gpus", Number(low=0), 0.0, where),
                    _opt(m, "replicas", Number(whole=True, low=1), 1, where),
                )
            )
    if not top.get("datasets"):
        raise DataError(f"{p}: a study needs at least one [[datasets]] table")
    datasets = []
    for where, d, name in _entries(top["datasets"], f"{p}: datasets", DATASET_KEYS, ("dataset", "name")):
        name = str(name)
        if name.startswith("hf:"):
            from pfr.data.hub import resolve

            name = resolve(name, base)  # a relative folder resolves against the study file
        elif _looks_like_path(name):
            name = _resolve_path(name, base)
        desc = d.get("descriptions")
        fmt = UserFormat(
            str(d.get("text-col", "text")),
            str(d.get("label-col", "label")),
            _resolve_path(str(desc), base) if desc else None,
            str(d.get("encoding", "utf-8")),
            str(d["split"]) if "split" in d else None,
            _fraction(d["dev-fraction"], f"{where}: dev-fraction") if "dev-fraction" in d else None,
            _opt(d, "dev-seed", SEED, 0, where),
        )
        lim = limit if limit is not None else _opt(d, "limit", Number(whole=True, low=0), None, where)
        datasets.append(DatasetEntry(name, str(d.get("panel", "main")), lim, fmt))
    designs: list[Design] = []
    tables = top.get("designs", [{}])
    if not isinstance(tables, list):
        raise DataError(f"{p}: designs must be an array of tables ([[designs]])")
    for i, table in enumerate(tables):
        designs.extend(_expand_design(table, f"{p}: designs[{i}]"))
    report = _check_keys(top.get("report", {}), REPORT_KEYS, f"{p}: report")
    formats_raw = _one_of(report, ("format", "formats"), f"{p}: report", ["text"])
    formats = tuple(formats_raw if isinstance(formats_raw, list) else [formats_raw])
    bad = [f for f in formats if not isinstance(f, str) or f not in REPORT_FORMATS]
    if bad:
        raise DataError(f"{p}: report.format: unknown format {bad[0]!r} (use {', '.join(REPORT_FORMATS)})")
    if "family" in top and "family" in report:
        raise DataError(f"{p}: family is given twice (top level and [report]); give one")
    try:
        family = family_from(top.get("family", report.get("family")), name=f"{raw.get('name', p.stem)}")
    except DataError:
        raise
    except PfrError as exc:
        raise DataError(f"{p}: {exc}") from None
    thresholds = None
    if "thresholds" in top:
        t = _check_keys(top["thresholds"], THRESHOLD_KEYS, f"{p}: thresholds")
        thresholds = ThresholdSpec(
            str(t.get("dev-panel", "development")),
            _opt(t, "alpha", PROBABILITY_OPEN, ALPHA, f"{p}: thresholds"),
            _opt(t, "draws", DRAWS, 2000, f"{p}: thresholds"),
            _opt(t, "seed", SEED, 0, f"{p}: thresholds"),
        )
    template = None
    if "template" in top:
        from pfr.models.lm.templates import template_from

        if not isinstance(top["template"], dict):
            raise DataError(f"{p}: template must be a table ([template])")
        template = template_from(top["template"], f"{p}: template")
    data_dir = top.get("data-dir")
    if store is not None:
        store_path = Path(store)
    else:
        store_path = Path(_resolve_path(str(top.get("store", f"runs/{p.stem}")), base))
    return Study(
        name=str(top.get("name", p.stem)),
        store=store_path,
        models=tuple(models),
        datasets=tuple(datasets),
        designs=tuple(dict.fromkeys(designs)),
        data_dir=_resolve_path(str(data_dir), base) if data_dir else None,
        formats=formats,
        draws=_opt(report, "draws", DRAWS, 10_000, f"{p}: report"),
        seed=_opt(report, "seed", SEED, 0, f"{p}: report"),
        family=family,
        thresholds=thresholds,
        source=p,
        template=template,
        check=parse_check(top["check"], f"{p}: check", base) if "check" in top else None,
    )
