"""The §4.1 invariants on every quad of the three main panels, and the §4.2 factors."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import pfr
from pfr.data.loaders import load_dataset
from pfr.data.panels import build_panel
from pfr.data.types import Dataset, Example
from pfr.design.builder import build_quad
from pfr.design.tasks import build_requests
from pfr.design.types import FALLBACK_NAMES, SYMBOLS, Design, Request
from pfr.errors import DesignError

DATASETS = ("clinc150", "banking77", "trec")
N_REQUESTS = {"clinc150": 1_800, "banking77": 1_540, "trec": 2_000}
UNION = re.compile(r"Choose (?P<fb>.+?) if the input belongs to one of these categories: (?P<m>.*)\.", re.S)
COMPLEMENT = re.compile(
    r"Choose (?P<fb>.+?) if the input belongs to none of the categories offered as options: (?P<m>.*)\.", re.S
)


def _members(pattern: re.Pattern[str], criterion: str) -> list[str]:
    match = pattern.fullmatch(criterion)
    assert match, criterion[:120]
    return match["m"].replace(",\n", ", ").split(", ")


def _quads(requests: list[Request]) -> list[list[Request]]:
    assert len(requests) % 4 == 0
    return [requests[i : i + 4] for i in range(0, len(requests), 4)]


@pytest.fixture(scope="module")
def main_requests(data_dir: Path) -> dict[str, list[Request]]:
    return {name: pfr.build(name, "main", data_dir=data_dir) for name in DATASETS}


@pytest.fixture(scope="module")
def trec_examples(data_dir: Path) -> tuple[Dataset, list[Example]]:
    ds = load_dataset("trec", data_dir)
    return ds, list(build_panel(ds, "main", limit=64))


def _trec(design: Design, data_dir: Path) -> list[Request]:
    return pfr.build("trec", "main", design, data_dir=data_dir, limit=64)


# --- §4.1 on every quad of the main panels ----------------------------------------------------------


def test_request_counts(main_requests: dict[str, list[Request]]) -> None:
    assert {name: len(reqs) for name, reqs in main_requests.items()} == N_REQUESTS
    assert sum(N_REQUESTS.values()) == 5_340
    ids = [r.request_id for reqs in main_requests.values() for r in reqs]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", DATASETS)
def test_quad_invariants(main_requests: dict[str, list[Request]], name: str) -> None:
    requests = main_requests[name]
    inventory = requests[0].inventory
    inv_ids = [c.id for c in inventory]
    assert inv_ids == sorted(inv_ids)
    slots: Counter[int] = Counter()
    for i, quad in enumerate(_quads(requests)):
        ru, rc, fu, fc = quad
        assert [(r.assignment, r.definition) for r in quad] == [("R", "U"), ("R", "C"), ("F", "U"), ("F", "C")]
        assert {r.index for r in quad} == {i} and len({r.text_id for r in quad}) == 1
        assert len({(r.text, r.y, r.panel, r.dataset, r.design) for r in quad}) == 1
        assert all(r.inventory == inventory for r in quad)
        y = ru.y
        # 16 options, one fallback, in the same slot across the quad, cycling over panel order
        p = i % 16
        for r in quad:
            assert len(r.options) == 16
            assert [o.symbol for o in r.options] == list(SYMBOLS[:16])
            assert [j for j, o in enumerate(r.options) if o.is_fallback] == [p]
            assert r.fallback_index == p
            fb = r.options[p]
            assert (fb.category, fb.label) == (None, "Other")
            regular = [o.category for o in r.options if not o.is_fallback]
            assert len(set(regular)) == 15 and set(regular) <= set(inv_ids)
        slots[p] += 1
        # U and C offer identical options
        assert ru.options == rc.options and fu.options == fc.options
        # R and F differ in exactly the gold slot: y under R, a c15 outside S_R under F
        diff = [j for j in range(16) if ru.options[j] != fu.options[j]]
        assert len(diff) == 1
        g = diff[0]
        assert ru.options[g].category == y
        c15 = fu.options[g].category
        s_r = {o.category for o in ru.options if not o.is_fallback}
        s_f = {o.category for o in fu.options if not o.is_fallback}
        assert c15 is not None and c15 != y and c15 not in s_r and y not in s_f
        assert s_f == (s_r - {y}) | {c15}
        # expected answer
        assert ru.expected == rc.expected == g
        assert fu.expected == fc.expected == p
        # criteria: union names exactly U \ S (lexicographic), complement names exactly S
        for union, complement, s in ((ru, rc, s_r), (fu, fc, s_f)):
            members = _members(UNION, union.criterion)
            assert members == sorted(set(inv_ids) - s)
            assert len(members) == len(inv_ids) - 15
            assert sorted(_members(COMPLEMENT, complement.criterion)) == sorted(s)
            assert _members(COMPLEMENT, complement.criterion) == sorted(s)
    # the fallback slot cycles: every slot used, as evenly as the panel size allows
    assert set(slots) == set(range(16))
    assert max(slots.values()) - min(slots.values()) <= 1


def test_union_sizes(main_requests: dict[str, list[Request]]) -> None:
    sizes = {name: len(_members(UNION, reqs[0].criterion)) for name, reqs in main_requests.items()}
    assert sizes == {"clinc150": 135, "banking77": 62, "trec": 35}


def test_draws_are_keyed_on_the_text_not_its_position(trec_examples: tuple[Dataset, list[Example]]) -> None:
    ds, examples = trec_examples
    ex = examples[3]
    a, b = build_quad(ex, 3, ds, Design()), build_quad(ex, 3 + 16 * 5 + 4, ds, Design())
    for ra, rb in zip(a, b):
        assert [o.category for o in ra.options if not o.is_fallback] == [
            o.category for o in rb.options if not o.is_fallback
        ]
        assert (ra.fallback_index, rb.fallback_index) == (3, 7)
        assert ra.criterion == rb.criterion


def test_draws_differ_between_texts(trec_examples: tuple[Dataset, list[Example]]) -> None:
    ds, examples = trec_examples
    quads = [build_quad(ex, 0, ds, Design()) for ex in examples[:16]]
    # different texts get different draws (hash-seeded, not a fixed list)
    assert len({tuple(o.category for o in q[0].options) for q in quads}) == 16


# --- §4.2 factors -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trec_default(data_dir: Path) -> list[Request]:
    return _trec(Design(), data_dir)


@pytest.mark.parametrize("name", FALLBACK_NAMES)
def test_fallback_name(data_dir: Path, trec_default: list[Request], name: str) -> None:
    reqs = _trec(Design(fallback=name), data_dir)
    for r, d in zip(reqs, trec_default):
        assert r.options[r.fallback_index].label == name
        assert [o.category for o in r.options] == [o.category for o in d.options]
        assert r.criterion.startswith(f"Choose {name} if ")
        pattern = UNION if r.definition == "U" else COMPLEMENT
        assert _members(pattern, r.criterion) == _members(pattern, d.criterion)
    assert (reqs[0].design == "direct") == (name == "Other")


def test_fallback_name_equal_to_a_category_is_rejected(data_dir: Path) -> None:
    with pytest.raises(DesignError, match="NUM:dist"):
        _trec(Design(fallback="NUM:dist"), data_dir)


@pytest.mark.parametrize("pair", [1, 2, 3])
def test_wording_pairs(data_dir: Path, trec_default: list[Request], pair: int) -> None:
    reqs = _trec(Design(wording=pair), data_dir)
    inv = {c.id for c in reqs[0].inventory}
    texts = set()
    for r, d in zip(reqs, trec_default):
        s = {o.category for o in r.options if not o.is_fallback}
        assert r.options == d.options
        head, sep, tail = r.criterion.rpartition(": ")
        assert sep and tail.endswith(".") and "Other" in head
        members = tail[:-1].split(", ")
        assert members == (sorted(inv - s) if r.definition == "U" else sorted(s))
        texts.add((r.definition, head))
    assert len(texts) == 2  # one U and one C wording, the same for every text
    assert (reqs[0].design == "direct") == (pair == 1)
    with pytest.raises(DesignError, match="wording"):
        _trec(Design(wording=4), data_dir)


def test_wording_pairs_differ(data_dir: Path) -> None:
    heads = {pair: _trec(Design(wording=pair), data_dir)[0].criterion.split(":")[0] for pair in (1, 2, 3)}
    assert len(set(heads.values())) == 3


@pytest.mark.parametrize("info", ["text", "text+label", "label"])
def test_information_condition(data_dir: Path, trec_default: list[Request], info: str) -> None:
    reqs = _trec(Design(info=info), data_dir)
    for r, d in zip(reqs, trec_default):
        assert r.options == d.options and r.criterion == d.criterion and r.text == d.text
        if info == "text":
            assert r.supplied is None and r.show_text
        else:
            assert r.supplied is not None and r.supplied == r.inventory[[c.id for c in r.inventory].index(r.y)]
            assert r.show_text == (info == "text+label")


def test_membership_table(data_dir: Path) -> None:
    reqs = _trec(Design(membership=True), data_dir)
    inv = [c.id for c in reqs[0].inventory]
    for r in reqs:
        s = {o.category for o in r.options if not o.is_fallback}
        lines = r.criterion.split("\n")
        assert lines[0] == "Membership table:"
        table, rule = lines[1:-1], lines[-1]
        assert table == [f"- {cid}: {'T1' if cid in s else 'T2'}" for cid in inv]  # every category tagged
        if r.definition == "U":
            assert rule == "Choose Other if the input's category is marked T2 in the membership table."
        else:
            assert rule == "Choose Other if the input's category is not marked T1 in the membership table."
        # the input's own category is never singled out: it appears once, as one row of the table
        assert sum(line.startswith(f"- {r.y}: ") for line in lines) == 1
        assert not any(cid in rule or cid in lines[0] for cid in inv)
    # the table depends on S only: U and C of one assignment share it
    for quad in _quads(reqs):
        assert quad[0].criterion.split("\n")[:-1] == quad[1].criterion.split("\n")[:-1]


@pytest.mark.parametrize("name", DATASETS)
def test_layout_breaks(data_dir: Path, name: str) -> None:
    line = pfr.build(name, "main", Design(), data_dir=data_dir, limit=32)
    broken = pfr.build(name, "main", Design(layout="breaks"), data_dir=data_dir, limit=32)
    for r, d in zip(broken, line):
        assert r.options == d.options
        if r.definition == "C":
            assert r.criterion == d.criterion
            continue
        assert r.criterion.count("\n") == 6
        assert r.criterion.replace("\n", " ") == d.criterion  # same members, order, punctuation
        assert all(part.endswith(",") for part in r.criterion.split("\n")[:-1])
        per_line = [len(part.split(", ")) for part in r.criterion.split(": ", 1)[1].split("\n")]
        assert max(per_line) - min(per_line) <= 1  # evenly spaced


@pytest.mark.parametrize("replacement", ["same", "different"])
def test_replacement_parent(data_dir: Path, trec_default: list[Request], replacement: str) -> None:
    reqs = _trec(Design(replacement=replacement), data_dir)
    parent = {c.id: c.parent for c in reqs[0].inventory}
    other = _trec(Design(replacement="different" if replacement == "same" else "same"), data_dir)
    for quad, quad2 in zip(_quads(reqs), _quads(other)):
        ru, fu = quad[0], quad[2]
        g = ru.expected
        c15 = fu.options[g].category
        assert c15 is not None
        assert (parent[c15] == parent[ru.y]) == (replacement == "same")
        assert ru.options == quad2[0].options  # c1..c14 and the gold slot are shared by both variants


def test_choice_set_and_fixed_position(data_dir: Path, trec_default: list[Request]) -> None:
    for position in (1, 6, 11, 16):
        reqs = _trec(Design(position=position), data_dir)
        assert {r.fallback_index for r in reqs} == {position - 1}
        assert all(r.options[position - 1].is_fallback for r in reqs)
    sets = [_trec(Design(choice_set=c, position=1), data_dir) for c in (0, 1, 2)]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        differ = sum(
            {o.category for o in ra.options} != {o.category for o in rb.options} for ra, rb in zip(sets[a], sets[b])
        )
        assert differ == len(sets[a])


def test_fewer_categories_than_options(data_dir: Path) -> None:
    ds = load_dataset("trec", data_dir)
    with pytest.raises(DesignError, match="50 categories, fewer than the 51"):
        build_requests(ds, build_panel(ds, "main", limit=4), Design(k=51))
    reqs = build_requests(ds, build_panel(ds, "main", limit=4), Design(k=50))
    assert all(len(r.options) == 50 for r in reqs)
    assert all(len(_members(UNION, r.criterion)) == 1 for r in reqs if r.definition == "U")
