"""Shards for batch arrays (issue 35 item 3): whole texts, disjoint, covering, the same in every run;
``I/N`` and the Slurm array variables parsed, anything else refused naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pfr import api
from pfr.errors import DataError
from pfr.run.shards import Shard, parse_shard, shard_of, shard_requests

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PFR_TEST_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


@pytest.mark.parametrize("count", [1, 3, 7])
def test_shards_hold_whole_texts_disjoint_and_covering(count: int) -> None:
    sets = [
        api.build("trec", "main", api.Design(), data_dir=DATA, limit=60),
        api.build("trec", "main", api.Design(wording=2, membership=True), data_dir=DATA, limit=60),
        api.build("demo", "main", api.Design()),
    ]
    for reqs in sets:
        shards = [shard_requests(reqs, Shard(i, count)) for i in range(count)]
        ids = [[id(r) for r in s] for s in shards]
        assert sorted(i for s in ids for i in s) == sorted(id(r) for r in reqs)  # covering, nothing twice
        owner: dict[str, int] = {}
        for i, s in enumerate(shards):
            for r in s:
                assert owner.setdefault(r.text_id, i) == i  # a text's requests all in one shard
            assert s == [r for r in reqs if r.text_id in {q.text_id for q in s}]  # in the run's order
        if count == 3:
            assert all(shards), "60 texts in three shards: none is empty"
    # every run agrees: a text is in the same shard under every design and limit
    small = api.build("trec", "main", api.Design(wording=3), data_dir=DATA, limit=20)
    for r in small:
        assert shard_requests([r], Shard(shard_of(r.text_id, 3), 3)) == [r]
    assert shard_of("trec-0001", 4) == shard_of("trec-0001", 4)
    assert {shard_of(f"t{i}", 4) for i in range(50)} == {0, 1, 2, 3}


def test_shard_numbers_are_one_based() -> None:
    assert parse_shard("1/3") == Shard(0, 3)
    assert parse_shard("3/3") == Shard(2, 3)
    assert str(parse_shard("2/5")) == "2/5"
    for bad, says in [("0/3", "between 1 and 3"), ("4/3", "between 1 and 3"), ("a/b", "expected I/N"),
                      ("3", "expected I/N"), ("1/0", "expected I/N"), ("", "expected I/N")]:  # fmt: skip
        with pytest.raises(DataError, match=says):
            parse_shard(bad)


def test_slurm_array_variables() -> None:
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "3"}
    assert parse_shard("slurm", env) == Shard(2, 4)  # --array=3-6: task 5 is the third
    assert parse_shard("slurm", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}) == Shard(0, 2)
    with pytest.raises(DataError, match="SLURM_ARRAY_TASK_COUNT is not set"):
        parse_shard("slurm", {"SLURM_ARRAY_TASK_ID": "1"})
    with pytest.raises(DataError, match="SLURM_ARRAY_TASK_ID is not set"):
        parse_shard("slurm", {})
    with pytest.raises(DataError, match="not an integer"):
        parse_shard("slurm", {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"})
    step = {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0"}
    with pytest.raises(DataError, match="without a step"):
        parse_shard("slurm", step)  # --array=0-12:4
