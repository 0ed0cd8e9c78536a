"""Backends declared once (:mod:`pfr.models.declaration`): plug-ins found through the ``pfr.backends``
entry points, and the one generic wrapper that turns a text-completing engine into decisions."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import pfr
from pfr.errors import ModelError
from pfr.models import registry
from pfr.models.declaration import Declaration, Option
from pfr.models.registry import load_model, register
from pfr.options import POSITIVE_INT
from pfr.testing import check_backend

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLUGIN = ROOT / "examples" / "echo-backend"


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *map(str, paths)])
    env.setdefault("PFR_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    return env


def _pfr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "pfr"), *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_example_plugin_installs_and_decides_by_generating(tmp_path: Path) -> None:
    """``pip install --target DIR`` the example, then ``pfr run --model echo:…``: the entry point is the
    prefix, the engine only completes text, and the registry gives it ``decide=generate``."""
    target = tmp_path / "site"
    pip = [str(BIN / "pip"), "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*pip, str(PLUGIN)], check=True, capture_output=True, timeout=300)
    env, store = _env(target), tmp_path / "S"
    run = _pfr(env, "run", "--model", "echo:v1", "--model-opt", "decide=generate",
               "--dataset", "trec", "--limit", "2", "--store", str(store))  # fmt: skip
    assert run.returncode == 0, run.stderr
    shown = _pfr(env, "report", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "v1 [generate]" in shown.stdout
    refused = _pfr(env, "run", "--model", "echo:v1", "--model-opt", "otherwise=middle",
                   "--dataset", "trec", "--limit", "2", "--store", str(store))  # fmt: skip
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "pfr: error: model option otherwise=middle: must be one of first, last"
    ]


def test_a_broken_plugin_is_one_line_naming_its_distribution(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "pfr_broken-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pfr-broken\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[pfr.backends]\nbroken = pfr_broken:BACKEND\n")
    (site / "pfr_broken.py").write_text("import no_such_module_anywhere\n")
    out = _pfr(_env(site), "run", "--model", "broken:x", "--dataset", "trec", "--limit", "1",
               "--store", str(tmp_path / "S"))  # fmt: skip
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pfr-broken" in lines[0] and "no_such_module_anywhere" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


class Letters:
    """A real (tiny) engine: it answers the ``n``-th option letter it finds in the prompt, or with a
    ``choice`` the ``n``-th of the symbols it is allowed."""

    def __init__(self, n: int) -> None:
        self.n, self.closed = n, 0

    @property
    def identity(self) -> dict[str, Any]:
        return {"n": self.n}

    def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[str]:
        out = []
        for p in prompts:
            letters = [line[0] for line in p.splitlines() if len(line) > 2 and line[1:3] == ". "]
            out.append(f"{letters[self.n]}." if self.n < len(letters) else "no idea")
        return out

    def choose(self, prompts: Sequence[str], symbols: Sequence[Sequence[str]], max_tokens: int, seed: int,
               temperature: float) -> list[str]:  # fmt: skip
        return [f'{{"answer": "{s[self.n]}"}}' for s in symbols]

    def close(self) -> None:
        self.closed += 1


def _letters(rest: str, opts: Mapping[str, Any]) -> Letters:
    return Letters(opts["n"])


@pytest.fixture
def letters() -> Iterator[Declaration]:
    decl = Declaration(
        "letters", _letters, (Option("n", 1, "which option letter", POSITIVE_INT),), ("generate", "choice")
    )
    register(decl)
    yield decl
    registry._DECLARED.pop("letters", None)


def test_a_declared_engine_gets_both_modes_from_the_generic_wrapper(letters: Declaration) -> None:
    requests = pfr.build("demo", panel="main", limit=1)
    gen = load_model("letters:x", {"decide": "generate", "n": "2"})
    out = gen.score(requests)
    assert [s.choice for s in out] == [2] * len(requests) and all(s.label_only for s in out)
    assert out[0].meta == {"raw": f"{requests[0].options[2].symbol}.", "invalid": False, "parse": "letter"}
    ident = gen.identity
    assert ident["backend"] == "letters" and ident["name"] == "x [generate]" and ident["n"] == 2
    assert ident["decide"] == "generate" and ident["sampling"]["max_tokens"] == 8
    check_backend(gen, requests)
    choice = load_model("letters:x", {"decide": "choice", "n": "3"})
    assert [s.choice for s in choice.score(requests)] == [3] * len(requests)
    assert choice.identity != gen.identity
    assert load_model("letters:x").identity["decide"] == "generate"  # the first mode declared is the default


def test_a_declaration_checks_its_options_and_modes(letters: Declaration) -> None:
    with pytest.raises(
        ModelError, match=r"^unknown letters option bogus \(known: n, decide, max_tokens, seed, gen_temperature\)$"
    ):
        load_model("letters:x", {"bogus": "1"})
    with pytest.raises(ModelError, match=r"^model option n=0: must be"):
        load_model("letters:x", {"n": "0"})
    with pytest.raises(ModelError, match=r"decide=scores is not available for letters: \(use generate or choice\)$"):
        load_model("letters:x", {"decide": "scores"})
    with pytest.raises(ModelError, match="max_tokens"):
        load_model("letters:x", {"max_tokens": "0"})
    assert [o.name for o in letters.options] == ["n"] and letters.rows()[0] == ("n", "1", "which option letter")
    with pytest.raises(ModelError, match="decides"):
        Declaration("bad", _letters, decides=("vote",))


def test_an_engine_that_answers_for_too_few_prompts_is_one_error(letters: Declaration) -> None:
    class Short(Letters):
        def complete(self, prompts: Sequence[str], max_tokens: int, seed: int, temperature: float) -> list[str]:
            return super().complete(prompts[:1], max_tokens, seed, temperature)

    register(Declaration("letters", lambda rest, opts: Short(1), decides=("generate",)))
    with pytest.raises(ModelError, match=r"one answer per prompt \(4\), got 1 answers"):
        load_model("letters:x").score(pfr.build("demo", panel="main", limit=1))
