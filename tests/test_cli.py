"""The `pfr` command in a subprocess: bad input (DESIGN §10) ends in one line, exit code 2, nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pfr.data.sources import SOURCES

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
    proc = pfr_cli(
        *_build_args(out, "-d", str(data), "--descriptions", str(files / "cats.csv"), "-k", "3"), env=cli_env
    )
    _assert_user_error(proc, str(data), "line 4", "'printer'", str(files / "cats.csv"))
    assert not out.exists() and not out.parent.exists()


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
    assert len(out.read_text().splitlines()) == 20


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
    reqs.write_text(reqs.read_text() + '{"text": "half a request"}\n')
    store = tmp_path / "store"
    proc = pfr_cli("run", "-m", "baseline:oracle", "-s", str(store), "--requests", str(reqs), env=cli_env)
    _assert_user_error(proc, str(reqs), "line 5")
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
    proc = pfr_cli(*_build_args(out, "-d", "demo"), env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"wrote 576 requests (144 texts) to {out}"
    assert [p.name for p in out.parent.iterdir()] == ["demo.jsonl"]  # no temporary file left
    assert len(out.read_text(encoding="utf-8").splitlines()) == 576


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty private cache and no data folder: nothing outside tmp is touched."""
    return {"PFR_CACHE_DIR": str(tmp_path / "cache"), "PFR_DATA_DIR": ""}
