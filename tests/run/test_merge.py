"""``merge_stores`` (issue 35 item 3): a union of shard stores that is idempotent and atomic, and
refuses, naming it, whatever a union would get wrong: two scores for one request, two identities of
one model, two category inventories of one setting."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from pfr import api
from pfr.errors import StoreError
from pfr.run.merge import merge_stores
from pfr.run.shards import Shard, shard_requests
from pfr.run.store import DB_NAME, Store

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def _rows(store: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / DB_NAME) as con:
        return sorted(con.execute("SELECT model_key, request_key, logits, choice FROM results"))


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """One unsharded store and three shard stores of two models on two datasets."""
    root = tmp_path_factory.mktemp("merge")
    sets = [api.build("trec", "main", data_dir=DATA, limit=24), api.build("demo", "main", limit=12)]
    full, parts = root / "full", [root / f"s{i}" for i in range(3)]
    for model in ("baseline:random", "baseline:oracle"):
        for reqs in sets:
            api.run(model, reqs, full, progress=False)
            for i, part in enumerate(parts):
                api.run(model, shard_requests(reqs, Shard(i, 3)), part, progress=False)
    return full, parts


def test_merge_is_the_union_idempotent_in_any_order(shards: tuple[Path, list[Path]], tmp_path: Path) -> None:
    full, parts = shards
    first = merge_stores(tmp_path / "m", parts)
    assert (first.sources, first.added, first.duplicates) == (3, first.read, 0)
    assert _rows(tmp_path / "m") == _rows(full)
    again = merge_stores(tmp_path / "m", [parts[1], parts[0]])  # the same results again: nothing added
    assert (again.added, again.duplicates) == (0, again.read) and again.read > 0
    merge_stores(tmp_path / "r", [parts[2], parts[0], parts[2], parts[1]])
    assert _rows(tmp_path / "r") == _rows(full)
    assert api.metrics(tmp_path / "r") == api.metrics(full)


def test_two_scores_for_one_request_are_refused_and_nothing_is_merged(
    shards: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    _, parts = shards
    bad = tmp_path / "bad"
    shutil.copytree(parts[1], bad)
    with sqlite3.connect(bad / DB_NAME) as con:  # a model that scored one request differently in another run
        rkey, logits = con.execute("SELECT request_key, logits FROM results ORDER BY rowid LIMIT 1").fetchone()
        other = json.dumps([x + 0.25 for x in json.loads(logits)])
        con.execute("UPDATE results SET logits = ? WHERE request_key = ?", (other, rkey))
        rid = con.execute("SELECT request_id FROM requests WHERE request_key = ?", (rkey,)).fetchone()[0]
    dest = tmp_path / "dest"
    merge_stores(dest, [parts[0]])
    before = (dest / DB_NAME).read_bytes(), _rows(dest)
    with pytest.raises(StoreError) as err:
        merge_stores(dest, [parts[1], parts[2], bad])
    message = str(err.value)
    assert rkey in message and rid in message and "baseline model" in message and str(parts[1]) in message
    assert "\n" not in message
    assert _rows(dest) == before[1]  # the two sources merged before the clash were rolled back too
    with pytest.raises(StoreError, match=rkey):
        merge_stores(tmp_path / "fresh", [parts[1], bad])
    assert not (tmp_path / "fresh").exists()  # a refused merge into a new store leaves none behind


def test_one_model_under_two_identities_is_refused(tmp_path: Path) -> None:
    reqs = api.build("trec", "main", data_dir=DATA, limit=12)
    api.run("baseline:random", shard_requests(reqs, Shard(0, 2)), tmp_path / "a", progress=False)
    api.run("baseline:random", shard_requests(reqs, Shard(1, 2)), tmp_path / "b", progress=False,
            options={"temperature": "2"})  # fmt: skip
    with pytest.raises(StoreError, match=r"two identities \(they differ in temperature\)"):
        merge_stores(tmp_path / "m", [tmp_path / "a", tmp_path / "b"])
    assert not (tmp_path / "m").exists()


def test_a_setting_under_two_inventories_is_refused(tmp_path: Path) -> None:
    demo = ROOT / "src" / "pfr" / "data" / "demo"
    texts = tmp_path / "tickets.csv"
    shutil.copy(demo / "requests.csv", texts)
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    shutil.copy(demo / "categories.csv", old)
    new.write_text(old.read_text().replace("forgotten or expired", "forgotten or lapsed"))
    for i, desc in enumerate((old, new)):
        fmt = api.UserFormat(descriptions=str(desc), name="tickets")
        reqs = api.build(str(texts), "main", fmt=fmt)
        api.run("baseline:random", shard_requests(reqs, Shard(i, 2)), tmp_path / f"s{i}", progress=False)
    with pytest.raises(StoreError, match="another category inventory"):
        merge_stores(tmp_path / "m", [tmp_path / "s0", tmp_path / "s1"])
    merge_stores(tmp_path / "m", [tmp_path / "s0"])
    with Store(tmp_path / "m", create=False) as st:
        n = st.count()
    with pytest.raises(StoreError, match="another category inventory"):
        merge_stores(tmp_path / "m", [tmp_path / "s1"])
    with Store(tmp_path / "m", create=False) as st:
        assert st.count() == n


def test_merging_a_store_into_itself_or_nothing_is_refused(shards: tuple[Path, list[Path]]) -> None:
    _, parts = shards
    with pytest.raises(StoreError, match="destination store itself"):
        merge_stores(parts[0], [parts[0]])
    with pytest.raises(StoreError, match="no store"):
        merge_stores(parts[0], [])
