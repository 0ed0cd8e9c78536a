"""Loaders read the original release files with the counts verified in shared/data/README.md."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from pfr.data.loaders import UserFormat, load_dataset, load_user_file
from pfr.data.sources import SOURCES, fetch_dataset
from pfr.data.types import Dataset
from pfr.errors import DataError

HEX16 = re.compile(r"[0-9a-f]{16}")


@pytest.fixture(scope="module")
def clinc(data_dir: Path) -> Dataset:
    return load_dataset("clinc150", data_dir)


@pytest.fixture(scope="module")
def banking(data_dir: Path) -> Dataset:
    return load_dataset("banking77", data_dir)


@pytest.fixture(scope="module")
def trec(data_dir: Path) -> Dataset:
    return load_dataset("trec", data_dir)


def test_files_come_from_the_data_dir_without_touching_the_cache(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PFR_CACHE_DIR", str(cache))
    for name, sources in SOURCES.items():
        paths = fetch_dataset(name, data_dir)
        assert set(paths) == {s.name for s in sources}
        for src in sources:
            assert paths[src.name] == data_dir / name / src.name
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


def test_clinc150_counts(clinc: Dataset) -> None:
    assert len(clinc.inventory) == 150
    assert list(clinc.category_ids) == sorted(clinc.category_ids)
    assert "oos" not in clinc.category_ids
    sizes = {split: len(exs) for split, exs in clinc.splits.items()}
    assert sizes == {"train": 15_000, "val": 3_000, "test": 4_500}
    assert set(Counter(ex.y for ex in clinc.splits["test"]).values()) == {30}
    assert set(Counter(ex.y for ex in clinc.splits["val"]).values()) == {20}
    cat = clinc.category("accept_reservations")
    assert cat.description == "accept reservations" and cat.parent is None


def test_banking77_counts(banking: Dataset) -> None:
    assert len(banking.inventory) == 77
    assert len(banking.splits["test"]) == 3_080
    assert len(banking.splits["train"]) == 10_003
    test_counts = Counter(ex.y for ex in banking.splits["test"])
    assert len(test_counts) == 77 and set(test_counts.values()) == {40}
    train_counts = Counter(ex.y for ex in banking.splits["train"])
    assert (min(train_counts.values()), max(train_counts.values())) == (35, 187)
    # quoted fields with embedded newlines are read as one record
    assert any("\n" in ex.text for ex in banking.splits["train"])
    assert banking.category("card_arrival").description == "card arrival"


def test_trec_counts_and_inventory(trec: Dataset) -> None:
    assert len(trec.splits["train"]) == 5_452
    assert len(trec.splits["test"]) == 500
    assert len(trec.inventory) == 50
    assert {c.parent for c in trec.inventory} == {"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"}
    for c in trec.inventory:
        assert c.parent == c.id.split(":")[0]
        assert c.description.strip()
    assert len({ex.y for ex in trec.splits["test"]}) == 42
    coarse = Counter(ex.y.split(":")[0] for ex in trec.splits["train"])
    assert coarse == {"ABBR": 86, "DESC": 1_162, "ENTY": 1_250, "HUM": 1_223, "LOC": 835, "NUM": 896}
    assert Counter(ex.y for ex in trec.splits["train"])["ENTY:cremat"] == 207
    assert trec.category("ENTY:cremat").description == "inventions, books and other creative pieces"
    assert trec.category("NUM:dist").description == "linear measures"


def test_trec_line_66_keeps_its_0xf0_byte(trec: Dataset, data_dir: Path) -> None:
    raw = (data_dir / "trec" / "train_5500.label").read_bytes().split(b"\n")[65]
    assert b"\xf0" in raw
    ex = trec.splits["train"][65]
    assert ex.text.encode("latin-1") == raw.split(b" ", 1)[1]
    assert "sister\u00f0city" in ex.text


def test_examples_carry_stable_ids_and_source_order(clinc: Dataset, trec: Dataset) -> None:
    for ds in (clinc, trec):
        for split, exs in ds.splits.items():
            assert [ex.source_index for ex in exs] == list(range(len(exs)))
            assert all(HEX16.fullmatch(ex.text_id) and ex.split == split for ex in exs)
    first = trec.splits["train"][0]
    assert (first.y, first.text) == ("DESC:manner", "How did serfdom develop in and then leave Russia ?")


def test_demo_dataset() -> None:
    demo = load_dataset("demo")
    assert len(demo.inventory) == 24
    assert len(demo.splits["all"]) == 144
    assert {ex.y for ex in demo.splits["all"]} <= set(demo.category_ids)
    assert all(c.description.strip() and c.description != c.id for c in demo.inventory)


def test_unknown_dataset_name() -> None:
    with pytest.raises(DataError, match="unknown dataset 'nosuch'"):
        load_dataset("nosuch")


# --- user files --------------------------------------------------------------------------------


def _write_user_files(tmp_path: Path) -> tuple[list[tuple[str, str]], Path]:
    rows = [
        ("Reset my password please", "password"),
        ("The VPN drops every hour", "vpn"),
        ("Printer jammed", "printer"),
    ]
    desc = tmp_path / "cats.csv"
    desc.write_text("id,description\nvpn,VPN problems\npassword,password resets\nprinter,printer trouble\n")
    return rows, desc


def test_user_csv_jsonl_parquet_agree(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, desc = _write_user_files(tmp_path)
    csv_path = tmp_path / "tickets.csv"
    csv_path.write_text("body,intent\n" + "".join(f'"{t}",{y}\n' for t, y in rows))
    jsonl_path = tmp_path / "tickets.jsonl"
    jsonl_path.write_text("".join(json.dumps({"body": t, "intent": y}) + "\n" for t, y in rows))
    pq_path = tmp_path / "tickets.parquet"
    pq.write_table(pa.table({"body": [t for t, _ in rows], "intent": [y for _, y in rows]}), pq_path)
    fmt = UserFormat("body", "intent", str(desc))
    loaded = [load_user_file(p, fmt, name="tickets") for p in (csv_path, jsonl_path, pq_path)]
    for ds in loaded:
        assert ds.category_ids == ("password", "printer", "vpn")
        assert ds.category("vpn").description == "VPN problems"
        assert [(ex.text, ex.y) for ex in ds.splits["all"]] == rows
    assert len({tuple(ex.text_id for ex in ds.splits["all"]) for ds in loaded}) == 1


def test_user_file_without_descriptions_uses_labels(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("text,label\nhello,greet_user\nbye,say_goodbye\n")
    ds = load_user_file(path)
    assert ds.name.startswith("t@") and len(ds.name) == len("t@") + 8  # shown by name, keyed by content
    assert [(c.id, c.description) for c in ds.inventory] == [
        ("greet_user", "greet user"),
        ("say_goodbye", "say goodbye"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("text,label\nhello,a\n ,b\n", r"t\.csv: line 3: empty text"),
        ("text,label\nhello,a\nbye,\n", r"t\.csv: line 3: empty label"),
        ("text,lab\nhello,a\n", r"t\.csv: line 1: missing column 'label'"),
        ("text,label\n", r"t\.csv: no records"),
    ],
)
def test_user_csv_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_user_file(path)


def test_user_label_missing_from_descriptions_names_the_line(tmp_path: Path) -> None:
    _rows, desc = _write_user_files(tmp_path)
    path = tmp_path / "t.csv"
    path.write_text("text,label\nhello,vpn\nprint please,printer\nwhat,unknown_thing\n")
    with pytest.raises(DataError, match=r"t\.csv: line 4: unknown label 'unknown_thing'") as info:
        load_user_file(path, UserFormat(descriptions=str(desc)))
    assert str(desc) in str(info.value)


# ---------------------------------------------------------------- user files, honestly (issue 9 item 5)


def _sorted_file(path: Path) -> Path:
    """A user file sorted by label, the way exports often are: the first rows are all one label."""
    rows = [(f"{label} question number {i}", label) for label in ("alpha", "beta", "gamma", "delta") for i in range(9)]
    path.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in sorted(rows, key=lambda r: r[1])))
    return path


def test_limit_on_a_user_file_is_a_balanced_hash_sample(tmp_path: Path) -> None:
    from pfr.data.panels import build_panel

    ds = load_user_file(_sorted_file(tmp_path / "sorted.csv"))
    sample = build_panel(ds, limit=8)
    assert sorted(ex.y for ex in sample) == ["alpha", "alpha", "beta", "beta", "delta", "delta", "gamma", "gamma"]
    assert [ex.source_index for ex in sample] == sorted(ex.source_index for ex in sample)  # file order
    assert sample != build_panel(ds)[:8]  # not the first rows
    assert set(build_panel(ds, limit=4)) < set(sample)  # nested
    assert build_panel(ds, limit=8) == sample  # deterministic
    assert build_panel(ds, limit=8, seed=1) != sample  # and keyed on the seed
    assert build_panel(ds, limit=100) == build_panel(ds)


def test_duplicates_and_conflicting_labels_are_dropped_and_listed(tmp_path: Path) -> None:
    from pfr.data.panels import build_panel, dropped_examples

    path = tmp_path / "dups.csv"
    path.write_text("text,label\nReset my password,login\nreset my password!,login\nVPN down,vpn\n"
                    "printer jam,printer\nPrinter jam,vpn\nhello,login\n")  # fmt: skip
    ds = load_user_file(path)
    dropped = dropped_examples(ds)
    assert [(d.reason, d.example.where) for d in dropped] == [
        ("duplicate", f"{path}: line 3"),
        ("conflicting labels", f"{path}: line 5"),
        ("conflicting labels", f"{path}: line 6"),
    ]
    assert "line 2" in dropped[0].line() and "'printer' at line 5" in dropped[1].line()
    assert [ex.text for ex in build_panel(ds)] == ["Reset my password", "VPN down", "hello"]


def test_two_files_with_one_name_are_two_datasets(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = tmp_path / "a" / "tickets.csv", tmp_path / "b" / "tickets.csv"
    one.write_text("text,label\nhello,greet\nbye,leave\n")
    two.write_text("text,label\nhello,greet\nbye,leave\nsee you,leave\n")
    a, b = load_user_file(one), load_user_file(two)
    assert a.name != b.name and a.name.startswith("tickets@") and b.name.startswith("tickets@")
    same = tmp_path / "renamed.csv"
    same.write_bytes(one.read_bytes())
    assert load_user_file(same).name.split("@")[1] == a.name.split("@")[1]  # content, not the path
    assert a.splits["all"][0].text_id != b.splits["all"][0].text_id
