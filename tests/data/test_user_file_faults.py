"""User data files that used to load wrongly: labels with stray spaces, the JSONL label 0, numeric
labels, ragged CSV rows, unquoted delimiters, TSV files and multi-line records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfr.data.user import UserFormat, load_user_file, read_descriptions
from pfr.errors import DataError

ROWS = [("how do I pay my bill", "billing"), ("card was charged twice", "billing "), ("reset my password", "account")]


def _labels(path: Path, fmt: UserFormat = UserFormat()) -> list[str]:
    return [ex.y for ex in load_user_file(path, fmt).splits["all"]]


def test_labels_are_normalised_like_texts(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("text,label\n" + "".join(f'"{t}","{lab}"\n' for t, lab in ROWS) + "x y z,\u00a0account\u3000\n")
    ds = load_user_file(f)
    assert [c.id for c in ds.inventory] == ["account", "billing"]
    assert _labels(f) == ["billing", "billing", "account", "account"]


def test_descriptions_match_labels_after_normalising(tmp_path: Path) -> None:
    f, d = tmp_path / "t.csv", tmp_path / "d.csv"
    f.write_text("text,label\n" + "".join(f'"{t}","{lab}"\n' for t, lab in ROWS))
    d.write_text("id,description\nbilling  ,Bills and payments\naccount,Log-in and passwords\n")
    assert sorted(c.id for c in read_descriptions(d)) == ["account", "billing"]
    assert _labels(f, UserFormat(descriptions=str(d))) == ["billing", "billing", "account"]


def test_jsonl_label_zero_and_numbers_are_labels_as_written(tmp_path: Path) -> None:
    f = tmp_path / "t.jsonl"
    rows = ['{"text": "a", "label": 0}', '{"text": "b", "label": 1.50}', '{"text": "c", "label": "0"}',
            '{"text": 42, "label": 2e3}']  # fmt: skip
    f.write_text("\n".join(rows) + "\n")
    assert _labels(f) == ["0", "1.50", "0", "2e3"]
    assert load_user_file(f).splits["all"][3].text == "42"


@pytest.mark.parametrize(
    ("line", "message"),
    [('{"text": "a", "label": null}', "line 2: empty label"),
     ('{"text": "a", "label": true}', "line 2: field 'label' must be a text or a number"),
     ('{"text": "a", "label": ["x"]}', "line 2: field 'label' must be a text or a number"),
     ('{"text": "a"', "line 2: not valid JSON")],
)  # fmt: skip
def test_jsonl_bad_labels_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"text": "ok", "label": "x"}) + "\n" + line + "\n")
    with pytest.raises(DataError, match=message):
        load_user_file(f)


def test_csv_numeric_labels_stay_text(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("text,label\na,007\nb,1.50\n")
    assert _labels(f) == ["007", "1.50"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("text,label\nfine,a\nan unquoted, comma,b\n", r"line 3: 3 fields where the header has 2 \(an unquoted comma"),
        ("text,label\nfine,a\nno label\n", "line 3: 1 fields where the header has 2"),
        ('text,label\nfine,a\n"never closed,b\nmore,c\n', "line 3: a double quote opened in this record is never"),
        ('text,label\nfine,a\n\nx,"b"c\n', "line 4: not valid CSV"),
        ("text,labl\nfine,a\n", "line 1: missing column 'label'"),
        ("", "no header line"),
    ],
)
def test_csv_rows_that_would_invent_a_category_are_refused(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "t.csv"
    f.write_text(body)
    with pytest.raises(DataError, match=message):
        load_user_file(f)


def test_a_multi_line_record_error_names_the_line_where_it_starts(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text('text,label\n"first\nsecond\nthird",a\n"one\ntwo",b,extra\n')
    with pytest.raises(DataError, match="line 5: 3 fields"):
        load_user_file(f)
    f.write_text('text,label\n"first\nsecond\nthird",a\n')
    assert load_user_file(f).splits["all"][0].where.endswith("line 2")


def test_tsv_is_read_as_tsv(tmp_path: Path) -> None:
    f = tmp_path / "t.tsv"
    f.write_text("text\tlabel\nhello, world\tgreeting\nbye, then\tfarewell\n")
    assert _labels(f) == ["greeting", "farewell"]
    f.write_text("text\tlabel\nhello\tworld\tgreeting\n")
    with pytest.raises(DataError, match=r"line 2: 3 fields where the header has 2 \(an unquoted tab"):
        load_user_file(f)


def test_tsv_descriptions(tmp_path: Path) -> None:
    d = tmp_path / "d.tsv"
    d.write_text("id\tdescription\tparent\ngreeting\tSaying hello, politely\tsocial\n")
    (c,) = read_descriptions(d)
    assert (c.id, c.description, c.parent) == ("greeting", "Saying hello, politely", "social")
