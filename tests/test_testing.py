"""pfr.testing.check_backend: passes real backends (baselines, a python: file) and names the clause a
backend breaks (batch size, identity stability, batch independence, score shape, close)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pfr.design.types import Request
from pfr.models.base import Scores
from pfr.models.registry import load_model
from pfr.models.simple.baselines import Baseline
from pfr.testing import ContractError, check_backend, sample_requests

ALL = ["protocol", "identity", "temperature", "batch_size", "prompt", "score", "batch independence", "close"]


@pytest.fixture(scope="module")
def requests() -> list[Request]:
    return sample_requests()


@pytest.mark.parametrize("kind", Baseline.KINDS)
def test_baselines_keep_the_contract(kind: str, requests: list[Request]) -> None:
    assert check_backend(load_model(f"baseline:{kind}", {"temperature": "0.5"}), requests) == ALL


def test_a_python_file_keeps_the_contract(tmp_path: Path, requests: list[Request]) -> None:
    file = tmp_path / "lengths.py"
    file.write_text("def score(request):\n    return [-len(o.label) / 10 for o in request.options]\n")
    assert check_backend(load_model(f"python:{file}:score", {"params": "1K"}), requests) == ALL


def test_a_python_file_answering_labels_outside_the_options_keeps_the_contract(
    tmp_path: Path, requests: list[Request]
) -> None:
    file = tmp_path / "router.py"
    file.write_text("def route(request):\n    return 'unknown_intent' if request.definition == 'C' else 0\n")
    assert check_backend(load_model(f"python:{file}:route"), requests) == ALL
    scored = load_model(f"python:{file}:route").score(requests)
    assert [s.choice for s in scored] == [-1 if r.definition == "C" else 0 for r in requests]


def test_default_requests_come_from_the_bundled_demo() -> None:
    reqs = sample_requests(limit=3)
    assert len(reqs) == 12 and {r.dataset for r in reqs} == {"demo"}


class _ZeroBatch(Baseline):
    batch_size = 0


class _Drifting(Baseline):
    """Its identity counts the calls: a store would file every batch under a new model."""

    calls = 0

    @property
    def identity(self) -> dict[str, Any]:
        self.calls += 1
        return {**super().identity, "call": self.calls}


class _BatchDependent(Baseline):
    """Scores shift with the batch size: the runner's batching would change the results."""

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return [Scores(tuple(x + len(requests) for x in s.logits)) for s in super().score(requests)]


class _Short(Baseline):
    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return [Scores(s.logits[:-1]) for s in super().score(requests)]


class _Infinite(Baseline):
    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return [Scores((float("-inf"), *s.logits[1:])) for s in super().score(requests)]


class _ValidContradiction(Baseline):
    """A label-only answer whose reason is invalid but whose choice is an option: the report would count it twice."""

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        return [Scores((), meta={"invalid": False, "parse": "contradiction"}, choice=r.fallback_index)
                for r in requests]  # fmt: skip


class _CloseOnce(Baseline):
    closed = False

    def close(self) -> None:
        if self.closed:
            raise RuntimeError("already closed")
        self.closed = True


@pytest.mark.parametrize(
    ("cls", "clause"),
    [
        (_ZeroBatch, "batch_size"),
        (_Drifting, "identity stable"),
        (_BatchDependent, "batch independence"),
        (_Short, "score shape"),
        (_Infinite, "score finiteness"),
        (_ValidContradiction, "parse reason"),
    ],
)
def test_a_broken_backend_fails_naming_the_clause(cls: type[Baseline], clause: str, requests: list[Request]) -> None:
    with pytest.raises(ContractError, match=rf"^{clause}: "):
        check_backend(cls("oracle"), requests)


def test_close_must_be_idempotent(requests: list[Request]) -> None:
    with pytest.raises(ContractError, match=r"^close: a second close\(\) raised RuntimeError: already closed"):
        check_backend(_CloseOnce("oracle"), requests)
    assert "close" not in check_backend(_CloseOnce("oracle"), requests, close=False)


def test_an_object_without_the_protocol_is_refused(requests: list[Request]) -> None:
    with pytest.raises(ContractError, match=r"^protocol: object lacks identity, temperature, batch_size"):
        check_backend(object(), requests)
