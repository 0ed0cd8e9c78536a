"""Study files: one TOML file declares models × datasets × designs, so each analysis of the paper
is one file and a user's own study is one more (DESIGN §9).

Example::

    name = "table1"
    store = "runs/table1"            # relative to the current directory
    [[models]]
    spec = "smollm2-135m"
    options = { temperature = 1.0 }
    [[datasets]]
    name = "trec"                    # or a path, with text_col / label_col / descriptions
    panel = "main"
    limit = 32                       # optional
    [[designs]]                      # any Design field; several tables = several designs
    fallback = "Other"
    [report]
    formats = ["text", "html"]
    draws = 10000

A design table may give a list for a factor (``fallback = ["Other", "None"]``): the study crosses
the listed values.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pfr.data.loaders import UserFormat
from pfr.design.types import Design
from pfr.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_DESIGN_FIELDS = {f.name for f in fields(Design)}
REPORT_FORMATS = ("text", "markdown", "latex", "csv", "json", "html")


@dataclass(frozen=True)
class ModelEntry:
    spec: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    panel: str = "main"
    limit: int | None = None
    fmt: UserFormat = field(default_factory=UserFormat)


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


def _expand_design(table: Mapping[str, Any], where: str) -> list[Design]:
    unknown = set(table) - _DESIGN_FIELDS
    if unknown:
        raise DataError(f"{where}: unknown design factor(s) {', '.join(sorted(unknown))}")
    keys = sorted(table)
    values = [table[k] if isinstance(table[k], list) else [table[k]] for k in keys]
    return [Design(**dict(zip(keys, combo))) for combo in itertools.product(*values)]


def load_study(path: str | Path) -> Study:
    """Parse and check a study file; every problem names the file and the table or key."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: study file not found")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{p}: not valid TOML ({exc})") from None
    if not raw.get("models"):
        raise DataError(f"{p}: a study needs at least one [[models]] table")
    if not raw.get("datasets"):
        raise DataError(f"{p}: a study needs at least one [[datasets]] table")
    models = []
    for i, m in enumerate(raw["models"]):
        if "spec" not in m:
            raise DataError(f"{p}: models[{i}]: missing key 'spec'")
        models.append(ModelEntry(str(m["spec"]), dict(m.get("options", {}))))
    datasets = []
    for i, d in enumerate(raw["datasets"]):
        if "name" not in d:
            raise DataError(f"{p}: datasets[{i}]: missing key 'name'")
        fmt = UserFormat(d.get("text_col", "text"), d.get("label_col", "label"), d.get("descriptions"))
        datasets.append(DatasetEntry(str(d["name"]), str(d.get("panel", "main")), d.get("limit"), fmt))
    designs: list[Design] = []
    for i, table in enumerate(raw.get("designs", [{}])):
        designs.extend(_expand_design(table, f"{p}: designs[{i}]"))
    report = raw.get("report", {})
    formats = tuple(report.get("formats", ["text"]))
    bad = [f for f in formats if f not in REPORT_FORMATS]
    if bad:
        raise DataError(f"{p}: report.formats: unknown format(s) {', '.join(bad)}")
    return Study(
        name=str(raw.get("name", p.stem)),
        store=Path(raw.get("store", f"runs/{p.stem}")),
        models=tuple(models),
        datasets=tuple(datasets),
        designs=tuple(dict.fromkeys(designs)),
        data_dir=raw.get("data_dir"),
        formats=formats,
        draws=int(report.get("draws", 10_000)),
        seed=int(report.get("seed", 0)),
    )
