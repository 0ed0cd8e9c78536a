"""Panels (docs/method.md §3.2), checked against an independent recomputation of normalisation and hash ranks."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from pfr.data.loaders import load_dataset
from pfr.data.panels import build_panel, build_panels, hash_rank, normalise, text_id
from pfr.data.types import Dataset, Example
from pfr.errors import DataError

DATASETS = ("clinc150", "banking77", "trec")
MAIN = {"clinc150": ("test", 3), "banking77": ("test", 5), "trec": ("test", None)}
POOL = {"clinc150": "val", "banking77": "train", "trec": "train"}
CORE = ("main", "diagnostic", "development", "calibration")


# --- an independent reading of §3.2 ---------------------------------------------------------------


@cache
def _norm(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).lower()
    t = "".join(ch for ch in t if not unicodedata.category(ch).startswith("P"))
    return " ".join(t.split())


def _rank(dataset: str, panel: str, text: str, seed: int = 0) -> int:
    return int(hashlib.sha256(f"{seed}|{dataset}|{panel}|{_norm(text)}".encode()).hexdigest(), 16)


def _pool(ds: Dataset, split: str, panel: str, excluded: set[str]) -> list[Example]:
    """Eligible texts by (rank, raw text, source order), each normalised text once."""
    keyed = []
    for ex in ds.splits[split]:
        norm = _norm(ex.text)
        if norm not in excluded:
            rank = int(hashlib.sha256(f"0|{ds.name}|{panel}|{norm}".encode()).hexdigest(), 16)
            keyed.append((rank, ex.text, ex.source_index, norm, ex))
    keyed.sort(key=lambda k: k[:3])
    seen: set[str] = set()
    out = []
    for *_, norm, ex in keyed:
        if norm not in seen:
            seen.add(norm)
            out.append(ex)
    return out


def _expected_panels(ds: Dataset) -> dict[str, list[Example]]:
    out: dict[str, list[Example]] = {}
    split, per_class = MAIN[ds.name]
    if per_class is None:  # the full split in file order
        out["main"] = list(ds.splits[split])
    else:
        by_class: dict[str, list[Example]] = {}
        for ex in _pool(ds, split, "main", set()):
            by_class.setdefault(ex.y, []).append(ex)
        out["main"] = [ex for cid in sorted(by_class) for ex in by_class[cid][:per_class]]
    excluded = {_norm(ex.text) for ex in out["main"]}

    queues: dict[str, list[Example]] = {}
    for ex in _pool(ds, POOL[ds.name], "diagnostic", excluded):
        queues.setdefault(ex.y, []).append(ex)
    diag: list[Example] = []
    rounds = 0
    while len(diag) < 128:
        diag += [queues[cid][rounds] for cid in sorted(queues) if rounds < len(queues[cid])]
        rounds += 1
    out["diagnostic"] = diag[:128]
    excluded |= {_norm(ex.text) for ex in out["diagnostic"]}

    for panel in ("development", "calibration"):
        out[panel] = _pool(ds, POOL[ds.name], panel, excluded)[:128]
        excluded |= {_norm(ex.text) for ex in out[panel]}
    return out


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(data_dir: Path) -> dict[str, Dataset]:
    return {name: load_dataset(name, data_dir) for name in DATASETS}


@pytest.fixture(scope="module")
def panels(loaded: dict[str, Dataset]) -> dict[str, dict[str, tuple[Example, ...]]]:
    return {name: build_panels(ds, "calibration") for name, ds in loaded.items()}


# --- normalisation and ids ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("Ｈｅｌｌｏ,   WORLD!", "hello world"),  # NFKC folds full-width forms
        ("¿Qué  tal?", "qué tal"),
        ("don’t stop—now…", "dont stopnow"),  # Pd, Pf and the NFKC-expanded ellipsis are P*
        ("\tTabs\nand\u00a0nbsp\u2003em  ", "tabs and nbsp em"),
        ("$5 + 3 = 8 ©", "$5 + 3 = 8 ©"),  # symbols (S*) stay
        ("ﬁle Ⅻ", "file xii"),
        ('"(quoted)" [brackets] {braces}', "quoted brackets braces"),
        ("   ", ""),
    ],
)
def test_normalise(raw: str, norm: str) -> None:
    assert normalise(raw) == norm == _norm(raw)


def test_text_id_and_hash_rank_values() -> None:
    tid = text_id("trec", "How far is it from Denver to Aspen ?")
    assert re.fullmatch(r"[0-9a-f]{16}", tid)
    assert tid == hashlib.sha256(b"trec|how far is it from denver to aspen").hexdigest()[:16]
    assert text_id("trec", "how far is it from denver to aspen") == tid  # same normalised text
    assert text_id("clinc150", "How far is it from Denver to Aspen ?") != tid  # keyed on the dataset
    digest = hashlib.sha256(b"7|trec|main|how far is it from denver to aspen").hexdigest()
    assert hash_rank(7, "trec", "main", "How far is it from Denver to Aspen ?") == int(digest, 16)


@pytest.mark.parametrize("name", DATASETS)
def test_every_example_id_is_the_hash_of_its_normalised_text(loaded: dict[str, Dataset], name: str) -> None:
    for exs in loaded[name].splits.values():
        for ex in exs:
            assert ex.text_id == hashlib.sha256(f"{name}|{_norm(ex.text)}".encode()).hexdigest()[:16]


# --- panels ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_panels_match_independent_recomputation(
    loaded: dict[str, Dataset], panels: dict[str, dict[str, tuple[Example, ...]]], name: str
) -> None:
    expected = _expected_panels(loaded[name])
    for panel in CORE:
        got = panels[name][panel]
        assert [(ex.text, ex.y, ex.source_index) for ex in got] == [
            (ex.text, ex.y, ex.source_index) for ex in expected[panel]
        ], panel
        assert {ex.panel for ex in got} == {panel}


@pytest.mark.parametrize(("name", "size", "per_class"), [("clinc150", 450, 3), ("banking77", 385, 5)])
def test_main_panels_are_class_balanced_in_panel_order(
    panels: dict[str, dict[str, tuple[Example, ...]]], name: str, size: int, per_class: int
) -> None:
    main = panels[name]["main"]
    assert len(main) == size
    labels = [ex.y for ex in main]
    assert labels == sorted(labels)
    assert set(Counter(labels).values()) == {per_class}
    for i in range(0, size, per_class):
        ranks = [_rank(name, "main", ex.text) for ex in main[i : i + per_class]]
        assert ranks == sorted(ranks)
    assert {ex.split for ex in main} == {"test"}


def test_trec_main_is_the_test_file_in_order(
    loaded: dict[str, Dataset], panels: dict[str, dict[str, tuple[Example, ...]]]
) -> None:
    main = panels["trec"]["main"]
    assert len(main) == 500
    assert [ex.source_index for ex in main] == list(range(500))
    assert [ex.text for ex in main] == [ex.text for ex in loaded["trec"].splits["test"]]


def test_main_panels_total_1335(panels: dict[str, dict[str, tuple[Example, ...]]]) -> None:
    assert sum(len(p["main"]) for p in panels.values()) == 1_335


@pytest.mark.parametrize("name", DATASETS)
def test_pool_panels_sizes_and_order(panels: dict[str, dict[str, tuple[Example, ...]]], name: str) -> None:
    built = panels[name]
    for panel in ("diagnostic", "development", "calibration"):
        assert len(built[panel]) == 128
        assert {ex.split for ex in built[panel]} == {POOL[name]}
    for panel in ("development", "calibration"):
        ranks = [_rank(name, panel, ex.text) for ex in built[panel]]
        assert ranks == sorted(ranks)
    diag = [ex.y for ex in built["diagnostic"]]
    n_classes = len({ex.y for ex in built["diagnostic"]})
    first_round = diag[: min(n_classes, 128)]
    assert first_round == sorted(first_round) and len(set(first_round)) == len(first_round)


@pytest.mark.parametrize("name", DATASETS)
def test_panels_are_disjoint_and_free_of_duplicates(
    panels: dict[str, dict[str, tuple[Example, ...]]], name: str
) -> None:
    norms = {panel: [_norm(ex.text) for ex in exs] for panel, exs in panels[name].items()}
    for panel, texts in norms.items():
        assert len(texts) == len(set(texts)), panel
    for a in CORE:
        for b in CORE:
            if a < b:
                assert not set(norms[a]) & set(norms[b]), (a, b)


@pytest.mark.parametrize("name", DATASETS)
def test_nested_development_subsets_are_prefixes(
    loaded: dict[str, Dataset], panels: dict[str, dict[str, tuple[Example, ...]]], name: str
) -> None:
    dev = panels[name]["development"]
    for size in (32, 64):
        sub = build_panel(loaded[name], f"development-{size}")
        assert [ex.text_id for ex in sub] == [ex.text_id for ex in dev[:size]]
        assert {ex.panel for ex in sub} == {f"development-{size}"}


def test_trec_extra_panels_are_disjoint_and_cross_backbone_quotas(loaded: dict[str, Dataset]) -> None:
    built = build_panels(loaded["trec"], "cross-backbone")
    seen: set[str] = set()
    for panel, exs in built.items():
        texts = {_norm(ex.text) for ex in exs}
        assert len(texts) == len(exs) and not texts & seen, panel
        seen |= texts
    quotas = Counter(ex.y.split(":")[0] for ex in built["cross-backbone"])
    assert quotas == {"ABBR": 43, "DESC": 43, "ENTY": 43, "HUM": 43, "LOC": 42, "NUM": 42}


def test_seed_changes_the_selection(loaded: dict[str, Dataset]) -> None:
    a = build_panel(loaded["clinc150"], "main", seed=0)
    b = build_panel(loaded["clinc150"], "main", seed=1)
    assert [ex.y for ex in a] == [ex.y for ex in b]
    assert [ex.text_id for ex in a] != [ex.text_id for ex in b]


def test_limit_keeps_the_first_texts(loaded: dict[str, Dataset]) -> None:
    full = build_panel(loaded["banking77"], "main")
    assert build_panel(loaded["banking77"], "main", limit=7) == full[:7]


def test_unknown_panel_and_user_data_panels(loaded: dict[str, Dataset]) -> None:
    with pytest.raises(DataError, match="unknown panel 'nope'"):
        build_panel(loaded["trec"], "nope")
    demo = load_dataset("demo")
    main = build_panel(demo, "main")
    assert [ex.text for ex in main] == [ex.text for ex in demo.splits["all"]]
    with pytest.raises(DataError, match="one split"):
        build_panel(demo, "development")
