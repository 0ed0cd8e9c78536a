"""The `pfr` command in a subprocess: bad input (docs/method.md §10) ends in one line, exit code 2, nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pfr.api import read_requests
from pfr.data.sources import SOURCES
from pfr.design.types import Request

Cli = Callable[..., subprocess.CompletedProcess[str]]


def _assert_user_error(proc: subprocess.CompletedProcess[str], *names: str) -> str:
    """Exit code 2, exactly one line on stderr that contains every one of ``names``, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def _requests(path: Path) -> list[Request]:
    """The requests of a built file (format v2 keeps inventories and factors in records of their own)."""
    return read_requests(path)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A user's files: a descriptions CSV for three categories and good data beside it."""
    (tmp_path / "cats.csv").write_text("id,description\nbilling,billing questions\nlogin,log-in trouble\nvpn,VPN\n")
    return tmp_path


def _build_args(out: Path, *extra: str) -> list[str]:
    return ["build", "-o", str(out), *extra]


def test_unknown_label(cli_env: dict[str, str], pfr_cli: Cli, files: Path) -> None:
    data = files / "tickets.csv"
    data.write_text("text,label\nI cannot log in,login\nInvoice is wrong,billing\nPrinter is on fire,printer\n")
    out = files / "out" / "requests.jsonl"
    out.parent.mkdir()  # an output folder must exist (tests/cli/test_outputs.py)
    proc = pfr_cli(
        *_build_args(out, "-d", str(data), "--descriptions", str(files / "cats.csv"), "-k", "3"), env=cli_env
    )
    _assert_user_error(proc, str(data), "line 4", "'printer'", str(files / "cats.csv"))
    assert not out.exists() and not list(out.parent.iterdir())


def test_empty_text(cli_env: dict[str, str], pfr_cli: Cli, files: Path) -> None:
    data = files / "tickets.csv"
    data.write_text('text,label\nI cannot log in,login\n"   ",billing\n')
    out = files / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "-k", "2"), env=cli_env)
    _assert_user_error(proc, str(data), "line 3", "empty text")
    assert not out.exists()


def test_missing_column(cli_env: dict[str, str], pfr_cli: Cli, files: Path) -> None:
    data = files / "tickets.csv"
    data.write_text("body,label\nI cannot log in,login\n")
    out = files / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data)), env=cli_env)
    _assert_user_error(proc, str(data), "line 1", "'text'")
    proc = pfr_cli(*_build_args(out, "-d", str(data), "--text-col", "body", "--label-col", "intent"), env=cli_env)
    _assert_user_error(proc, str(data), "line 1", "'intent'")
    assert not out.exists()


def test_label_set_does_not_match_the_inventory(cli_env: dict[str, str], pfr_cli: Cli, files: Path) -> None:
    data = files / "tickets.jsonl"
    rows = [{"text": "I cannot log in", "label": "login"}, {"text": "VPN is down", "label": "VPN"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    desc = files / "cats.json"
    desc.write_text(json.dumps({"billing": "billing questions", "login": "log-in trouble", "vpn": "VPN"}))
    out = files / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "--descriptions", str(desc), "-k", "3"), env=cli_env)
    _assert_user_error(proc, str(data), "line 2", "'VPN'")
    twice = files / "twice.csv"
    twice.write_text("id,description\nlogin,a\nvpn,b\nlogin,c\n")
    proc = pfr_cli(*_build_args(out, "-d", str(data), "--descriptions", str(twice)), env=cli_env)
    _assert_user_error(proc, str(twice), "'login'")
    assert not out.exists()


def test_fewer_categories_than_options(cli_env: dict[str, str], pfr_cli: Cli, files: Path) -> None:
    data = files / "five.csv"
    data.write_text("text,label\n" + "".join(f"text number {i},cat{i}\n" for i in range(5)))
    out = files / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data)), env=cli_env)
    _assert_user_error(proc, str(data), "5 categories", "--options")
    assert not out.exists()
    ok = pfr_cli(*_build_args(out, "-d", str(data), "--options", "5"), env=cli_env)
    assert ok.returncode == 0, ok.stderr
    assert len(_requests(out)) == 20


def test_corrupt_data_dir_file(cli_env: dict[str, str], pfr_cli: Cli, data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    shutil.copytree(data_dir / "trec", folder / "trec")
    bad = folder / "trec" / "TREC_10.label"
    bad.chmod(0o644)
    bad.write_bytes(bad.read_bytes().replace(b"Denver", b"Dallas", 1))
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", "trec", "--data-dir", str(folder)), env=cli_env)
    _assert_user_error(proc, str(bad), "sha256")
    assert not out.exists()


def test_corrupt_cached_download(cli_env: dict[str, str], pfr_cli: Cli, data_dir: Path, tmp_path: Path) -> None:
    """A corrupt file in the download cache is refused (no data dir: the cache is where downloads live)."""
    cached = Path(cli_env["PFR_CACHE_DIR"]) / "data" / "trec"
    cached.mkdir(parents=True)
    for src in SOURCES["trec"]:
        shutil.copyfile(data_dir / src.relpath, cached / src.name)
    (cached / "TREC_10.label").write_bytes(b"NUM:dist How far is it ?\n")
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", "trec"), env=cli_env)
    _assert_user_error(proc, str(cached / "TREC_10.label"), "sha256")
    assert not out.exists()


def test_unknown_dataset_name(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "requests.jsonl"
    _assert_user_error(pfr_cli(*_build_args(out, "-d", "clinc151"), env=cli_env), "'clinc151'")
    missing = tmp_path / "nope.csv"
    _assert_user_error(pfr_cli(*_build_args(out, "-d", str(missing)), env=cli_env), str(missing))
    assert not out.exists()


def test_unknown_model_spec(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", "nosuch:model", "-s", str(store), "-d", "demo", "--no-progress", env=cli_env)
    _assert_user_error(proc, "'nosuch:model'")
    proc = pfr_cli("run", "-m", "baseline:psychic", "-s", str(store), "-d", "demo", "--no-progress", env=cli_env)
    _assert_user_error(proc, "'psychic'")
    assert not store.exists()


def test_python_model_file_missing(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    missing = tmp_path / "my_model.py"
    proc = pfr_cli(
        "run", "-m", f"python:{missing}:choose", "-s", str(store), "-d", "demo", "--no-progress", env=cli_env
    )
    _assert_user_error(proc, str(missing))
    assert not store.exists()


def test_bad_requests_file(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    reqs = tmp_path / "requests.jsonl"
    assert pfr_cli(*_build_args(reqs, "-d", "demo", "--limit", "1"), env=cli_env).returncode == 0
    good = reqs.read_text()
    bad_line = f"line {len(good.splitlines()) + 1}"
    reqs.write_text(good + '{"text": "half a request"}\n')
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", "baseline:oracle", "-s", str(store), "--requests", str(reqs), env=cli_env)
    _assert_user_error(proc, str(reqs), bad_line, "'kind'")
    assert not store.exists()


def test_run_report_and_rerun(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    args = ("run", "-m", "baseline:oracle", "-s", str(store), "-d", "demo", "--limit", "24", "--no-progress")
    first = pfr_cli(*args, env=cli_env)
    assert first.returncode == 0, first.stderr
    assert "96 requests: 96 scored now, 0 already" in first.stderr
    again = pfr_cli(*args, env=cli_env)
    assert again.returncode == 0, again.stderr
    assert "96 requests: 0 scored now, 96 already" in again.stderr
    report = pfr_cli("report", str(store), "--format", "json", "--draws", "200", env=cli_env)
    assert report.returncode == 0, report.stderr
    json.loads(report.stdout)
    text = pfr_cli("report", str(store), "--draws", "200", env=cli_env)
    assert text.returncode == 0, text.stderr
    assert "baseline:oracle" in text.stdout


def test_report_on_a_missing_store(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "no-store"
    _assert_user_error(pfr_cli("report", str(missing), env=cli_env), str(missing))
    assert not missing.exists()


def test_build_writes_readable_jsonl(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "demo.jsonl"
    out.parent.mkdir()  # an output folder must exist (tests/cli/test_outputs.py)
    proc = pfr_cli(*_build_args(out, "-d", "demo"), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"wrote 576 requests (144 texts) to {out}"
    assert [p.name for p in out.parent.iterdir()] == ["demo.jsonl"]  # no temporary file left
    assert len(_requests(out)) == 576


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty private cache and no data folder: nothing outside tmp is touched."""
    return {"PFR_CACHE_DIR": str(tmp_path / "cache"), "PFR_DATA_DIR": ""}


# ---------------------------------------------------------------- the command line itself (issue 9 item 3)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["run", "--no-such-flag"], ["--no-such-flag", "pfr run --help"]),
        (["no-such-command"], ["'no-such-command'"]),
        (["run", "-d", "demo"], ["Missing option", "--model"]),
        (["build", "-d", "demo"], ["Missing option", "--out"]),
        (["build", "-d", "demo", "-o", "x.jsonl", "--options", "many"], ["--options", "integer"]),
        (["report"], ["Missing argument", "'STORE...'"]),
        (["--no-such-global"], ["--no-such-global"]),
    ],
)
def test_usage_errors_are_one_line_exit_2(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path,
                                          args: list[str], names: list[str]) -> None:  # fmt: skip
    proc = pfr_cli(*args, env=cli_env, cwd=tmp_path)
    line = _assert_user_error(proc, *names)
    assert line.startswith("pfr: error: ")
    assert not (tmp_path / "x.jsonl").exists()


def test_version_and_help(cli_env: dict[str, str], pfr_cli: Cli) -> None:
    from pfr import __version__

    proc = pfr_cli("--version", env=cli_env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"pfr {__version__}\n", "")
    helped = pfr_cli("run", "--help", env=cli_env)
    assert helped.returncode == 0 and "--model" in helped.stdout and helped.stderr == ""
    bare = pfr_cli(env=cli_env)  # no command: the help text, exit 2 as click does
    assert bare.returncode == 2 and "Commands" in bare.stdout and "Traceback" not in bare.stderr


def test_cli_dependency_pins_match_what_is_installed() -> None:
    """The CLI relies on typer's parsing and exception types; pyproject pins the tested range."""
    import importlib.metadata as md
    import re

    from packaging.requirements import Requirement

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    line = re.search(r'^\s*"(typer[^"]*)"', text, re.MULTILINE)
    assert line is not None
    typer_req = Requirement(line.group(1))
    assert typer_req.specifier.contains(md.version("typer"))
    assert any(s.operator == "<" for s in typer_req.specifier), "typer needs an upper bound"


# ---------------------------------------------------------------- files and stores (issue 9 item 4)


def test_latin1_csv_names_file_line_and_encoding(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "tickets.csv"
    data.write_bytes("text,label\nthe printer is down,printer\nle café est fermé,food\n".encode("latin-1"))
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "-k", "2"), env=cli_env)
    _assert_user_error(proc, str(data), "line 3", "utf-8", "--encoding", "0xe9")
    assert not out.exists()
    ok = pfr_cli(*_build_args(out, "-d", str(data), "-k", "2", "--encoding", "latin-1"), env=cli_env)
    assert ok.returncode == 0, ok.stderr
    texts = {r.text for r in _requests(out)}
    assert "le café est fermé" in texts
    bad = pfr_cli(*_build_args(out, "-d", str(data), "--encoding", "klingon"), env=cli_env)
    _assert_user_error(bad, "'klingon'")


def test_utf8_bom_csv_and_descriptions_build(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts with a byte-order mark: the header still reads as `text`."""
    data = tmp_path / "excel.csv"
    data.write_bytes(b"\xef\xbb\xbf" + "text,label\r\ncafé closed,food\r\nneed a taxi,travel\r\n".encode())
    cats = tmp_path / "cats.csv"
    cats.write_bytes(b"\xef\xbb\xbf" + b"id,description\r\nfood,eating out\r\ntravel,getting around\r\n")
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "--descriptions", str(cats), "-k", "2"), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    rows = _requests(out)
    assert rows[0].text == "café closed"
    assert [c.description for c in rows[0].inventory] == ["eating out", "getting around"]


def test_unwritable_output_and_store_paths(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    """A file where a folder must go (works for root too): the output folder and the store folder."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    proc = pfr_cli(*_build_args(blocker / "out.jsonl", "-d", "demo"), env=cli_env)
    _assert_user_error(proc, str(blocker))
    proc = pfr_cli("run", "-m", "baseline:oracle", "-d", "demo", "-s", str(blocker), "--no-progress", env=cli_env)
    _assert_user_error(proc, str(blocker), "is a file")
    proc = pfr_cli("run", "-m", "baseline:oracle", "-d", "demo", "-s", str(blocker / "st"), "--no-progress",
                   env=cli_env)  # fmt: skip
    _assert_user_error(proc, str(blocker / "st"))
    proc = pfr_cli("report", str(blocker), env=cli_env)
    _assert_user_error(proc, str(blocker))
    assert blocker.read_text() == "not a folder\n"


@pytest.fixture
def small_store(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> Path:
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", "baseline:oracle", "-d", "demo", "--limit", "8", "-s", str(store), "--no-progress",
                   env=cli_env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return store


def test_damaged_store_exit_2(cli_env: dict[str, str], pfr_cli: Cli, small_store: Path) -> None:
    db = small_store / "results.sqlite"
    raw = bytearray(db.read_bytes())
    page = 4096
    for start in range(page, len(raw), page * 2):  # overwrite every other page after the first
        raw[start : start + 200] = b"\x5a" * 200
    db.write_bytes(bytes(raw))
    for args in (["report", str(small_store)], ["export", str(small_store), "-o", "-"]):
        proc = pfr_cli(*args, env=cli_env)
        _assert_user_error(proc, str(db))
        assert proc.stdout == ""
    proc = pfr_cli("run", "-m", "baseline:oracle", "-d", "demo", "--limit", "8", "-s", str(small_store),
                   "--no-progress", env=cli_env)  # fmt: skip
    _assert_user_error(proc, str(db))


def test_malformed_store_rows_exit_2(cli_env: dict[str, str], pfr_cli: Cli, small_store: Path) -> None:
    import sqlite3

    db = small_store / "results.sqlite"
    edits = [
        ("UPDATE results SET logprobs='[1, 2' WHERE rowid=3", "results row 3", "scores"),
        ("UPDATE results SET choice=99 WHERE rowid=2", "results row 2", "choice"),
        ("UPDATE requests SET request=json_set(request, '$.expected', 40)", "expected", "out of range"),
    ]
    for sql, *names in edits:
        backup = db.read_bytes()
        with sqlite3.connect(db) as con:
            con.execute(sql)
        con.close()
        proc = pfr_cli("report", str(small_store), "--draws", "50", env=cli_env)
        _assert_user_error(proc, str(db), *names)
        db.write_bytes(backup)
    assert pfr_cli("report", str(small_store), "--draws", "50", env=cli_env).returncode == 0


def test_hand_edited_request_out_of_range(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    reqs = tmp_path / "requests.jsonl"
    assert pfr_cli(*_build_args(reqs, "-d", "demo", "--limit", "2"), env=cli_env).returncode == 0
    lines = reqs.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[5])
    row["expected"] = 16
    lines[5] = json.dumps(row)
    reqs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", "baseline:oracle", "-s", str(store), "--requests", str(reqs), env=cli_env)
    _assert_user_error(proc, str(reqs), "line 6", "expected", "out of range")
    assert not store.exists()


def test_export_to_stdout(cli_env: dict[str, str], pfr_cli: Cli, small_store: Path) -> None:
    proc = pfr_cli("export", str(small_store), "--out", "-", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 32 and all("scores" in r for r in rows)
    assert not (Path.cwd() / "-").exists()


def test_user_file_limit_and_dropped_rows_are_reported(cli_env: dict[str, str], pfr_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "sorted.csv"
    rows = [f"{lab} issue {i},{lab}\n" for lab in ("a_cat", "b_cat", "c_cat") for i in range(6)]
    data.write_text("text,label\n" + "".join(rows) + "a_cat issue 0,b_cat\nb_cat issue 1,b_cat\n")
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "-k", "3", "--limit", "6"), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "dropped 1 duplicate text(s) and 2 row(s) whose text has conflicting labels; --show-dropped" in proc.stderr
    assert "hash-ranked sample of 6 of 17 texts, balanced over the labels" in proc.stderr
    labels = [r.y for r in _requests(out)]
    assert sorted(set(labels)) == ["a_cat", "b_cat", "c_cat"] and len(labels) == 24
    shown = pfr_cli(*_build_args(out, "-d", str(data), "-k", "3", "--show-dropped"), env=cli_env)
    assert f"{data}: line 2: conflicting labels" in shown.stderr and f"{data}: line 21: duplicate" in shown.stderr


def test_a_label_with_a_comma_or_quote_is_quoted_in_the_union_rule(cli_env: dict[str, str], pfr_cli: Cli,
                                                                   tmp_path: Path) -> None:  # fmt: skip
    data = tmp_path / "odd.csv"
    labels = ["plain", "billing, refunds", 'the "vip" desk', "other_thing"]
    data.write_text("text,label\n" + "".join(f'"text {i}","{lab.replace(chr(34), 2 * chr(34))}"\n'
                                             for i, lab in enumerate(labels)))  # fmt: skip
    out = tmp_path / "requests.jsonl"
    proc = pfr_cli(*_build_args(out, "-d", str(data), "-k", "2"), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    rules = [r.criterion for r in _requests(out)]
    union = [r for r in rules if "one of these categories" in r]
    assert any('"billing, refunds"' in r for r in union) and any('"the ""vip"" desk"' in r for r in union)
    assert not any(", refunds" in r.replace('"billing, refunds"', "") for r in union)
