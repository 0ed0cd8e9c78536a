"""The request JSONL format: version 2 round-trips exactly, holds each inventory once, reads version 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pfr
from pfr.design.types import Design
from pfr.errors import DataError


@pytest.fixture(scope="module")
def banking(data_dir: Path) -> list[pfr.design.types.Request]:  # type: ignore[name-defined]
    return pfr.build("banking77", "main", data_dir=data_dir, limit=6)


def test_round_trip_is_exact_and_shares_the_inventory(banking: list, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    pfr.write_requests(banking, path)
    back = pfr.read_requests(path)
    assert back == banking
    assert [r.factors for r in back] == [r.factors for r in banking]
    assert len({id(r.inventory) for r in back}) == 1  # one tuple shared by every request
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"format": "pfr-requests", "version": 2}
    kinds = [x.get("kind") for x in lines[1:]]
    assert kinds.count("inventory") == 1 and kinds.count("request") == len(banking)


def test_supplied_category_and_other_designs_round_trip(data_dir: Path, tmp_path: Path) -> None:
    reqs = pfr.build("trec", "main", Design(info="text+label", membership=True), data_dir=data_dir, limit=3)
    reqs += pfr.build("trec", "main", Design(fallback="None"), data_dir=data_dir, limit=2)
    path = tmp_path / "r.jsonl"
    pfr.write_requests(reqs, path)
    back = pfr.read_requests(path)
    assert back == reqs and all(a.supplied == b.supplied for a, b in zip(back, reqs))
    assert [r.factors for r in back] == [r.factors for r in reqs]


def test_version_2_is_much_smaller_and_version_1_is_still_read(banking: list, tmp_path: Path) -> None:
    v1 = tmp_path / "v1.jsonl"
    v1.write_text("".join(r.to_json() + "\n" for r in banking), encoding="utf-8")
    v2 = tmp_path / "v2.jsonl"
    pfr.write_requests(banking, v2)
    assert pfr.read_requests(v1) == banking
    # 24 BANKING77 requests: the 77-category inventory is written once instead of 24 times.
    assert v2.stat().st_size * 3 < v1.stat().st_size


def test_a_request_before_its_inventory_names_the_line(banking: list, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    pfr.write_requests(banking[:1], path)
    lines = path.read_text(encoding="utf-8").splitlines()
    inv = next(i for i, x in enumerate(lines) if json.loads(x).get("kind") == "inventory")
    del lines[inv]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line \d+: inventory '[0-9a-f]+' is not defined on an earlier line"):
        pfr.read_requests(path)


def test_unknown_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"format": "pfr-requests", "version": 9}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 1: request file version 9"):
        pfr.read_requests(path)
