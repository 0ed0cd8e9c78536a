"""``--dataset hf:NAME[:CONFIG] --split S`` through the ``datasets`` library, offline: real TREC rows
saved to local folders (``save_to_disk`` and Parquet data files) must load exactly as the same rows
in a CSV file do, with ``ClassLabel`` names, split choice, content identity and one-line errors."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from pfr import api
from pfr.data.loaders import UserFormat, load_dataset, load_user_file
from pfr.data.panels import build_panel
from pfr.data.types import Dataset
from pfr.design.types import Design
from pfr.errors import DataError

datasets = pytest.importorskip("datasets")

N_TRAIN, N_TEST = 40, 60


@pytest.fixture(scope="module")
def trec_rows(data_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """Real TREC texts and coarse labels: the train split's first rows and the test split's first rows."""
    trec = load_dataset("trec", data_dir)
    return {
        "train": [(ex.text, ex.y) for ex in trec.splits["train"][:N_TRAIN]],
        "test": [(ex.text, ex.y) for ex in trec.splits["test"][:N_TEST]],
    }


def _hf_split(rows: list[tuple[str, str]], names: list[str]) -> object:
    """A ``datasets.Dataset`` with an integer ``ClassLabel`` column, as Hub datasets usually store labels."""
    features = datasets.Features({"question": datasets.Value("string"), "coarse": datasets.ClassLabel(names=names)})
    return datasets.Dataset.from_dict(
        {"question": [t for t, _ in rows], "coarse": [names.index(y) for _, y in rows]}, features=features
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, trec_rows: dict[str, list[tuple[str, str]]]) -> Path:
    """A ``DatasetDict.save_to_disk`` folder with a train and a test split."""
    names = sorted({y for rows in trec_rows.values() for _, y in rows})
    folder = tmp_path_factory.mktemp("hub") / "trec_saved"
    datasets.DatasetDict({s: _hf_split(r, names) for s, r in trec_rows.items()}).save_to_disk(str(folder))
    return folder


FMT = UserFormat("question", "coarse", split="test")


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question", "coarse"])
        w.writerows(rows)
    return path


def test_saved_folder_loads_as_the_same_rows_in_a_csv_do(
    saved: Path, trec_rows: dict[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    ds = load_dataset(f"hf:{saved}", fmt=FMT)
    assert ds.name.startswith("hf:trec_saved/test@")  # the folder's own name, the split and a content hash
    assert list(ds.splits) == ["test"]
    examples = ds.splits["test"]
    assert [(ex.text, ex.y) for ex in examples] == trec_rows["test"]  # ClassLabel integers came back as names
    assert examples[0].where == f"hf:{saved} (split 'test'): row 1"
    as_csv = load_user_file(_csv(tmp_path / "same.csv", trec_rows["test"]), UserFormat("question", "coarse"))
    assert ds.inventory == as_csv.inventory
    # the panels treat the split exactly as the CSV: same texts, same labels, in the same order (a --limit
    # sample is hash-ranked on the dataset's name, so it is another sample of the same size and labels)
    assert [(e.text, e.y) for e in build_panel(ds)] == [(e.text, e.y) for e in build_panel(as_csv)]
    assert sorted(e.y for e in build_panel(ds, limit=12)) == sorted(e.y for e in build_panel(as_csv, limit=12))
    train = load_dataset(f"hf:{saved}", fmt=UserFormat("question", "coarse", split="train"))
    assert [(ex.text, ex.y) for ex in train.splits["train"]] == trec_rows["train"]
    assert train.name != ds.name


def test_identity_follows_the_content_not_the_place(
    saved: Path, trec_rows: dict[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    names = sorted({y for rows in trec_rows.values() for _, y in rows})
    moved = tmp_path / "elsewhere" / "trec_saved"
    datasets.DatasetDict({"test": _hf_split(trec_rows["test"], names)}).save_to_disk(str(moved))
    assert load_dataset(f"hf:{moved}", fmt=FMT).name == load_dataset(f"hf:{saved}", fmt=FMT).name
    edited = list(trec_rows["test"])
    text, label = edited[0]
    edited[0] = (text, next(n for n in names if n != label))
    changed = tmp_path / "edited" / "trec_saved"
    datasets.DatasetDict({"test": _hf_split(edited, names)}).save_to_disk(str(changed))
    assert load_dataset(f"hf:{changed}", fmt=FMT).name != load_dataset(f"hf:{saved}", fmt=FMT).name


def test_a_folder_of_parquet_files_splits_by_file_name(
    trec_rows: dict[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "trec_parquet"
    folder.mkdir()
    for split, rows in trec_rows.items():
        table = pa.table({"question": [t for t, _ in rows], "coarse": [y for _, y in rows]})
        pq.write_table(table, folder / f"{split}.parquet")
    ds = load_dataset(f"hf:{folder}", fmt=FMT)
    assert [(ex.text, ex.y) for ex in ds.splits["test"]] == trec_rows["test"]
    with pytest.raises(DataError, match=r"2 splits \('(train|test)', '(train|test)'\); choose one with --split"):
        load_dataset(f"hf:{folder}", fmt=UserFormat("question", "coarse"))


def test_a_single_split_is_used_without_split(trec_rows: dict[str, list[tuple[str, str]]], tmp_path: Path) -> None:
    names = sorted({y for _, y in trec_rows["test"]})
    folder = tmp_path / "one_split"
    datasets.DatasetDict({"validation": _hf_split(trec_rows["test"], names)}).save_to_disk(str(folder))
    ds = load_dataset(f"hf:{folder}", fmt=UserFormat("question", "coarse"))
    assert list(ds.splits) == ["validation"] and len(ds.splits["validation"]) == N_TEST


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        (UserFormat("question", "coarse"), r"2 splits \('train', 'test'\); choose one with --split"),
        (UserFormat("question", "coarse", split="dev"), r"unknown split 'dev' \(--split; available splits: 'train'"),
        (UserFormat("text", "coarse", split="test"), r"missing column 'text' \(--text-col; columns: question, coarse"),
        (UserFormat("question", "label", split="test"), r"missing column 'label' \(--label-col"),
    ],
)  # fmt: skip
def test_errors_name_the_split_and_the_column(saved: Path, fmt: UserFormat, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_dataset(f"hf:{saved}", fmt=fmt)


def test_missing_folder_and_unreachable_hub_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DataError, match="folder not found"):
        load_dataset(f"hf:{tmp_path / 'nope'}", fmt=FMT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(DataError) as info:
        load_dataset("hf:pfr-test/no-such-dataset-xyz", fmt=FMT)
    assert "\n" not in str(info.value) and str(info.value).startswith("hf:pfr-test/no-such-dataset-xyz")


def test_cli_builds_and_runs_an_hf_split(
    saved: Path, tmp_path: Path, pfr_cli: Callable[..., CompletedProcess[str]]
) -> None:
    out = tmp_path / "reqs.jsonl"
    common = ("--dataset", f"hf:{saved}", "--split", "test", "--text-col", "question", "--label-col", "coarse")
    done = pfr_cli("build", *common, "--limit", "12", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert api.read_requests(out) == api.build(f"hf:{saved}", "main", Design(), limit=12, fmt=FMT)
    bad = pfr_cli("build", *common[:4], "--out", str(tmp_path / "x.jsonl"))  # default columns text/label
    assert bad.returncode == 2 and "missing column 'text'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    model = tmp_path / "m.py"
    model.write_text(
        "def score(req):\n    return [0.0 if i == req.expected else -1.0 for i in range(len(req.options))]\n"
    )
    store = tmp_path / "store"
    done = pfr_cli("run", *common, "--limit", "8", "--model", f"python:{model}:score", "--store", str(store))
    assert done.returncode == 0, done.stderr
    rep = pfr_cli("report", str(store), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    report = json.loads(rep.stdout)
    assert any(s["dataset"].startswith("hf:trec_saved/test@") for s in report["settings"])


def test_study_file_takes_split_and_a_folder_relative_to_it(saved: Path, tmp_path: Path, data_dir: Path) -> None:
    from pfr.studies import load_study

    study_dir = saved.parent
    path = study_dir / "hub.toml"
    path.write_text(
        '[[models]]\nmodel = "baseline:random"\n[[datasets]]\ndataset = "hf:./trec_saved"\nsplit = "test"\n'
        'text-col = "question"\nlabel-col = "coarse"\nlimit = 8\n[[designs]]\n',
        encoding="utf-8",
    )
    study = load_study(path)
    (entry,) = study.datasets
    assert entry.name == f"hf:{saved}" and entry.fmt.split == "test"
    ds: Dataset = load_dataset(entry.name, data_dir, entry.fmt)
    assert ds.name == load_dataset(f"hf:{saved}", fmt=FMT).name
