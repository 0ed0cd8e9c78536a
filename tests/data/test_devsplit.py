"""Development texts from a user's own data: ``--dev-fraction`` and ``--dataset-name``, and the docs'
recipe run as written."""

from __future__ import annotations

import csv
import re
import shlex
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pfr import api
from pfr.data.devsplit import split_development
from pfr.data.loaders import UserFormat, load_dataset
from pfr.data.panels import build_panel, normalise
from pfr.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


def _demo_files() -> tuple[Path, Path]:
    folder = Path(str(resources.files("pfr.data").joinpath("demo")))
    return folder / "requests.csv", folder / "categories.csv"


def test_split_is_disjoint_reproducible_and_sized(tmp_path: Path) -> None:
    data, cats = _demo_files()
    user = tmp_path / "tickets.csv"
    with open(data, encoding="utf-8") as f:
        rows = list(csv.reader(f))
    rows.append([rows[1][0].upper() + "!", rows[1][1]])  # a repeated text (after normalisation)
    with open(user, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    fmt = UserFormat(descriptions=str(cats), dev_fraction=0.25, dev_seed=3)
    ds = load_dataset(str(user), fmt=fmt)
    dev, test = build_panel(ds, "development", seed=3), build_panel(ds, "main", seed=3)
    distinct = {normalise(r[0]) for r in rows[1:]}
    assert len(dev) == round(0.25 * len(distinct)) and len(dev) + len(test) == len(distinct)
    assert not {normalise(e.text) for e in dev} & {normalise(e.text) for e in test}
    assert [e.source_index for e in dev] == sorted(e.source_index for e in dev)  # file order
    whole = load_dataset(str(user), fmt=UserFormat(descriptions=str(cats)))
    again = split_development(whole, 0.25, 3)
    assert again.splits["development"] == ds.splits["development"]  # the same split every time
    other = split_development(whole, 0.25, 4)
    assert {e.text for e in other.splits["development"]} != {e.text for e in dev}
    copies = [e for split in ds.splits.values() for e in split if normalise(e.text) == normalise(rows[1][0])]
    assert len(copies) == 2 and copies[0].split == copies[1].split  # both copies on one side
    # the texts keep their ids: the dataset name does not depend on the split
    assert {e.text_id for e in build_panel(whole, "main")} == {e.text_id for e in (*dev, *test)}
    reqs = api.build(str(user), "development", seed=3, fmt=fmt)
    assert {r.panel for r in reqs} == {"development"} and len(reqs) == 4 * len(dev)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.2, float("nan"), 0.001])
def test_bad_fraction(fraction: float) -> None:
    data, cats = _demo_files()
    with pytest.raises(DataError, match="--dev-fraction"):
        load_dataset(str(data), fmt=UserFormat(descriptions=str(cats), dev_fraction=fraction))


def test_cli_errors(pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    res = pfr_cli("build", "-d", "demo", "--panel", "development", "-o", str(tmp_path / "x.jsonl"))
    assert res.returncode == 2 and "--dev-fraction" in res.stderr
    res = pfr_cli("build", "-d", "trec", "--dev-fraction", "0.3", "-o", str(tmp_path / "x.jsonl"))
    assert res.returncode == 2 and "user file" in res.stderr
    res = pfr_cli("build", "-d", "demo", "--limit", "0", "-o", str(tmp_path / "x.jsonl"))
    assert res.returncode == 2 and "0 requests" in res.stderr and not (tmp_path / "x.jsonl").exists()


def _recipe() -> list[list[str]]:
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- recipe: own-data-thresholds.*?-->\n```bash\n(.*?)```", text, re.S)
    assert block, "the own-data thresholds recipe is missing from docs/usage.md"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def test_docs_recipe_runs_as_written(pfr_cli: Callable[..., Any], tmp_path: Path) -> None:
    data, cats = _demo_files()
    shutil.copy(data, tmp_path / "tickets.csv")
    shutil.copy(cats, tmp_path / "categories.csv")
    with open(data, encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    for name, part in (("tickets-dev.csv", rows[::3]), ("tickets-test.csv", [r for i, r in enumerate(rows) if i % 3])):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([header, *part])
    outputs = []
    for argv in _recipe():
        assert argv[0] == "pfr"
        extra = ["--no-progress"] if argv[1] == "run" else []
        res = pfr_cli(*argv[1:], *extra, cwd=tmp_path)
        assert res.returncode == 0, (argv, res.stderr)
        if argv[1] == "thresholds":
            outputs.append(res.stdout)
    assert len(outputs) == 2
    n_dev = round(0.3 * len(rows))
    assert f"(test: main panel, n={len(rows) - n_dev}; development: development panel, n={n_dev})" in outputs[0]
    n_dev = len(rows[::3])
    assert f"(test: main panel, n={len(rows) - n_dev}; development: main panel, n={n_dev})" in outputs[1]
    assert "tickets · direct" in outputs[1] and "development τ" in outputs[1]


def test_study_dataset_keys(tmp_path: Path) -> None:
    from pfr.studies import load_study

    data, cats = _demo_files()
    study = tmp_path / "s.toml"
    body = (f'[[models]]\nmodel = "baseline:oracle"\n[[datasets]]\ndataset = "{data}"\ndescriptions = "{cats}"\n'
            "dev-fraction = 0.25\ndev-seed = 3\n[thresholds]\n")  # fmt: skip
    study.write_text(body, encoding="utf-8")
    [d] = load_study(study).datasets
    assert (d.fmt.dev_fraction, d.fmt.dev_seed) == (0.25, 3)
    dev = api.build(d.name, "development", fmt=d.fmt)
    test = api.build(d.name, "main", fmt=d.fmt)
    assert {r.text_id for r in dev}.isdisjoint({r.text_id for r in test}) and dev and test
    study.write_text(body.replace("0.25", "1.5"), encoding="utf-8")
    with pytest.raises(DataError, match="dev-fraction"):
        load_study(study)
