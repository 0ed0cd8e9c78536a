"""Property-based bad input: whatever bytes a data or descriptions file holds, whatever string an
option gets, whatever a study file says, `pfr` ends with exit 0 or 2 (one line on stderr) and never
with a traceback. The commands run in process (``pfr.cli.main(argv)``), so an unexpected exception
fails the test with its traceback. Seeded (``derandomize=True``) and bounded, so the suite takes
seconds and gives the same examples on every run."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pfr
from pfr.cli import main
from pfr.errors import PfrError
from pfr.studies import load_study

SETTINGS = settings(
    max_examples=30, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip

WORK = Path(tempfile.mkdtemp(prefix="pfr-properties-"))


@pytest.fixture(scope="module", autouse=True)
def small_world() -> Iterator[None]:
    """A tiny store and request file to point options at, and a memory cap so that a random
    ``--draws`` is refused up front instead of computed."""
    if not (WORK / "store").exists():
        reqs = pfr.build("demo", limit=4)
        pfr.write_requests(reqs, WORK / "requests.jsonl")
        pfr.run("baseline:oracle", reqs, WORK / "store")
    old = os.environ.get("PFR_MEMORY_GIB")
    os.environ["PFR_MEMORY_GIB"] = "0.05"
    yield
    if old is None:
        os.environ.pop("PFR_MEMORY_GIB", None)
    else:
        os.environ["PFR_MEMORY_GIB"] = old


def pfr_exit(*argv: str) -> tuple[int, str]:
    """Run ``pfr ARGV`` in process: its exit code and stderr; any other exception propagates."""
    err = io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else 1), err.getvalue()


def assert_clean(code: int, err: str) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("pfr: error: "), err


def write(data: bytes, suffix: str) -> Path:
    """A file named by its content: the dataset cache keys on the path."""
    path = WORK / f"f{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
    path.write_bytes(data)
    return path


TEXTY = st.text(alphabet=st.sampled_from(list('ab ,\t"\n\r\x00\\{}[]:0é\u2028\u00a0billing')), max_size=40)


@st.composite
def table_file(draw: st.DrawFn, sep: str) -> bytes:
    """A plausible table with damage: the right header, rows of random fields and delimiters."""
    header = draw(st.sampled_from([f"text{sep}label", f"label{sep}text", "text", f"text{sep}label{sep}x", ""]))
    rows = draw(st.lists(st.lists(TEXTY, min_size=0, max_size=4).map(sep.join), max_size=6))
    encoding = draw(st.sampled_from(["utf-8", "latin-1", "utf-16"]))
    return "\n".join([header, *rows]).encode(encoding, "replace")


@st.composite
def jsonl_file(draw: st.DrawFn) -> bytes:
    value = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXTY, st.lists(st.integers(), max_size=2))
    rec = st.dictionaries(st.sampled_from(["text", "label", "x"]), value, max_size=3)
    lines = draw(st.lists(st.one_of(rec.map(lambda r: __import__("json").dumps(r)), TEXTY), max_size=6))
    return "\n".join(lines).encode("utf-8", "replace")


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), table_file(",")), suffix=st.sampled_from([".csv", ".txt"]))
def test_random_csv(data: bytes, suffix: str) -> None:
    path = write(data, suffix)
    assert_clean(*pfr_exit("build", "-d", str(path), "-o", str(WORK / "out.jsonl"), "-k", "2"))


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), table_file("\t")))
def test_random_tsv(data: bytes) -> None:
    assert_clean(*pfr_exit("build", "-d", str(write(data, ".tsv")), "-o", str(WORK / "out.jsonl"), "-k", "2"))


@SETTINGS
@given(data=st.one_of(st.binary(max_size=200), jsonl_file()))
def test_random_jsonl(data: bytes) -> None:
    assert_clean(*pfr_exit("build", "-d", str(write(data, ".jsonl")), "-o", str(WORK / "out.jsonl"), "-k", "2"))


@SETTINGS
@given(
    data=st.one_of(st.binary(max_size=200), table_file(","), jsonl_file()),
    suffix=st.sampled_from([".csv", ".tsv", ".json", ".jsonl"]),
)
def test_random_descriptions(data: bytes, suffix: str) -> None:
    desc = write(data, suffix)
    code, err = pfr_exit("build", "-d", "demo", "--descriptions", str(desc), "-o", str(WORK / "out.jsonl"))
    assert_clean(code, err)


OPTION_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e400", "1e-400", "0x10", "1_000", " 3 ", "", "1.5", "2**8"]),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats().map(str),
)


@SETTINGS
@given(
    key=st.sampled_from(["seed", "temperature", "bogus", "", "seed=1"]),
    value=OPTION_TEXT,
    model=st.sampled_from(["baseline:random", "baseline:oracle"]),
)
def test_random_model_options(key: str, value: str, model: str) -> None:
    code, err = pfr_exit(
        "run", "-m", model, "--requests", str(WORK / "requests.jsonl"), "--store", str(WORK / "runs" / "opt"),
        "--no-progress", "--model-opt", f"{key}={value}",
    )  # fmt: skip
    assert_clean(code, err)


@SETTINGS
@given(
    flag=st.sampled_from(
        [("report", "--draws"), ("report", "--seed"), ("thresholds", "--alpha"), ("thresholds", "--seed")]
    ),
    value=OPTION_TEXT,
)
def test_random_analysis_flags(flag: tuple[str, str], value: str) -> None:
    store = str(WORK / "store")
    where = [store, "--draws", "20"] if flag[0] == "report" else ["--dev", store, "--test", store, "--draws", "5"]
    assert_clean(*pfr_exit(flag[0], *where, flag[1], value))


@SETTINGS
@given(
    flag=st.sampled_from(["--options", "--wording", "--position", "--choice-set", "--limit", "--info", "--layout",
                          "--replacement", "--task", "--policy-info", "--fallback", "--seed"]),
    value=OPTION_TEXT,
)  # fmt: skip
def test_random_design_flags(flag: str, value: str) -> None:
    code, err = pfr_exit("build", "-d", "demo", "--limit", "3", "-o", str(WORK / "out.jsonl"), flag, value)
    assert_clean(code, err)


TOML_VALUE = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "true", "false", "[]", "[1, 2]", '["a", 3]', "{}", '""']),
    TEXTY.map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'),
)
DESIGN_KEYS = ["options", "k", "wording", "info", "membership", "layout", "replacement", "choice-set", "position",
               "seed", "task", "policy-info", "fallback", "bogus"]  # fmt: skip


@SETTINGS
@given(
    entries=st.lists(st.tuples(st.sampled_from(DESIGN_KEYS), TOML_VALUE), max_size=3, unique_by=lambda e: e[0]),
    report=st.lists(st.tuples(st.sampled_from(["draws", "seed", "format"]), TOML_VALUE), max_size=2,
                    unique_by=lambda e: e[0]),
    limit=TOML_VALUE,
    noise=st.one_of(st.just(""), TEXTY),
)  # fmt: skip
def test_random_study_files(entries: list[tuple[str, str]], report: list[tuple[str, str]], limit: str,
                            noise: str) -> None:  # fmt: skip
    body = "\n".join([
        'store = "runs/x"', "[[models]]", 'model = "baseline:oracle"', "[[datasets]]", 'dataset = "demo"',
        f"limit = {limit}", "[[designs]]", *(f"{k} = {v}" for k, v in entries), "[report]",
        *(f"{k} = {v}" for k, v in report), noise,
    ])  # fmt: skip
    path = write(body.encode("utf-8", "replace"), ".toml")
    try:
        study = load_study(path)
        for d in study.designs:  # build what a run would score (scoring is the other tests' business)
            pfr.build("demo", design=d, limit=2)
    except PfrError as exc:
        assert "\n" not in " ".join(str(exc).split())
