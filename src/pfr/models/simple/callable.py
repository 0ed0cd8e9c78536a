"""``python:PATH_OR_MODULE:FUNCTION``: a user's own decision function as a model.

The function receives one request object (its JSONL fields as attributes: ``text``,
``options`` with ``symbol``/``category``/``is_fallback``/``label``, ``criterion``, ``inventory``, …;
docs/backends.md lists every field) and returns one score per option (log-probabilities or any
log-scores), or a label-only answer: an option's label or symbol (a string) or its 0-based index;
a label that names no option (or an index out of range) is stored as an invalid answer, or stops
the run under ``strict=true``. The options are :data:`BACKEND`'s (a user function cannot be asked for
its size or family).

The identity holds the resolved file (a relative and an absolute path to one file are one model)
and a hash of its source, so editing the function re-scores instead of mixing results.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pfr.design.types import Request
from pfr.errors import ModelError
from pfr.models.base import Scores
from pfr.models.declaration import Declaration, Option
from pfr.models.http.answers import AnswerError, read_answer
from pfr.models.options import NAME, PARAMS
from pfr.options import TEMPERATURE, Switch


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while user code ran: the message says where (the command line exits 130)."""


class _Exited(SystemExit):
    """User code called ``os._exit``: raised in its place, so pfr says so instead of vanishing."""


@contextlib.contextmanager
def _no_hard_exit() -> Iterator[list[int]]:
    """While user code runs, ``os._exit(n)`` raises :class:`_Exited` instead of ending the process at
    once (no cleanup, no message, exit status 0 after half a run); yields the codes asked for, so a call
    from a thread of the user's is seen too. A forked child (multiprocessing) still exits as asked."""
    real, owner, asked = os._exit, os.getpid(), []

    def refuse(status: int) -> NoReturn:
        if os.getpid() != owner:
            real(status)
        asked.append(status)
        if threading.current_thread() is not threading.main_thread():
            raise SystemExit(status)  # the thread ends quietly (threading ignores exactly SystemExit)
        raise _Exited(status)

    os._exit = refuse
    try:
        yield asked
    finally:
        os._exit = real


def _what(exc: BaseException) -> str:
    if isinstance(exc, _Exited):
        return f"it called os._exit({exc.code!r}), which would have ended pfr without a word"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _resolved(target: str) -> str:
    """A file target as its absolute, resolved path (one file, one model); a module name as given."""
    path = Path(target)
    return str(path.resolve()) if target.endswith(".py") or path.is_file() else target


def _load(target: str, func: str) -> tuple[Callable[[Request], Sequence[float]], str]:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ModelError(f"python model: file not found: {target}")
        name = f"pfr_user_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ModelError(f"python model: cannot import {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            with _no_hard_exit():
                spec.loader.exec_module(module)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: user code must not end pfr silently
            raise ModelError(f"python model: importing {target} failed: {_what(exc)}") from None
        source = path.read_bytes()
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise ModelError(f"python model: cannot import module {target!r}: {exc}") from None
        try:
            source = inspect.getsource(module).encode()
        except (OSError, TypeError):
            source = target.encode()
    fn = getattr(module, func, None)
    if not callable(fn):
        raise ModelError(f"python model: {target} has no callable {func!r}")
    return fn, hashlib.sha256(source).hexdigest()[:16]


class CallableModel:
    """Wraps a user function; its identity includes a hash of the source file, so editing the
    function invalidates stored results instead of silently mixing them."""

    calls_out = True  # a dry run never calls the user's function (pfr.models.base.no_contact)

    def __init__(
        self,
        target: str,
        func: str,
        temperature: float = 1.0,
        *,
        params: int | None = None,
        family: str | None = None,
        version: str | None = None,
        strict: bool = False,
    ) -> None:
        self.target, self.func, self.version = target, func, version
        self.strict = strict  # not in the identity: it decides whether a run stops, not what is stored
        self._fn, self._source_hash = _load(target, func)
        self._temperature = temperature
        self.params, self.family = params, family  # options: a function cannot be asked for its size
        #: requests per ``score`` call the runner sends (the function sees one request at a time)
        self.batch_size = 16

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "backend": "python",
            "target": _resolved(self.target),
            "function": self.func,
            "source_sha": self._source_hash,
            "temperature": self._temperature,
            **({"params": self.params} if self.params is not None else {}),
            **({"family": self.family} if self.family else {}),
            **({"version": self.version} if self.version else {}),
        }

    @property
    def temperature(self) -> float:
        return self._temperature

    def prompt(self, request: Request) -> str | None:
        return None

    def close(self) -> None:
        """Nothing to free (the user's module stays imported)."""

    def score(self, requests: Sequence[Request]) -> list[Scores]:
        with _no_hard_exit() as exits:
            return self._score(requests, exits)

    def _score(self, requests: Sequence[Request], exits: list[int]) -> list[Scores]:
        out = []
        for r in requests:
            try:
                answer = self._fn(r)
                if exits:  # os._exit from a thread of the function's: the process was meant to end
                    raise _Exited(exits[0])
                if isinstance(answer, (str, int)) and not isinstance(answer, bool):  # a label-only answer
                    out.append(read_answer(answer, r, None, strict=self.strict))
                    continue
                raw = list(answer)
            except AnswerError as exc:
                raise ModelError(f"python model {self.target}:{self.func}, request {r.request_id}: {exc}") from None
            except KeyboardInterrupt:
                raise Interrupted(f"in python model {self.target}:{self.func} on request {r.request_id}") from None
            except BaseException as exc:  # SystemExit and GeneratorExit too: one line, exit 2, the store kept
                raise ModelError(
                    f"python model {self.target}:{self.func} failed on request {r.request_id}: "
                    f"{_what(_Exited(exits[0]) if exits else exc)}"
                ) from None
            if len(raw) != len(r.options):
                raise ModelError(
                    f"python model {self.target}:{self.func} returned {len(raw)} scores for "
                    f"{len(r.options)} options (request {r.request_id})"
                )
            try:
                vals = tuple(float(x) for x in raw)
            except (TypeError, ValueError, OverflowError):
                raise ModelError(
                    f"python model {self.target}:{self.func} returned a non-numeric score (request {r.request_id})"
                ) from None
            if any(math.isnan(v) for v in vals):
                raise ModelError(f"python model {self.target}:{self.func} returned NaN (request {r.request_id})")
            out.append(Scores(vals))
        return out


def from_spec(rest: str, opts: Mapping[str, Any]) -> CallableModel:
    """``python:PATH_OR_MODULE:FUNCTION`` with the options of :data:`BACKEND`, parsed."""
    target, sep, func = rest.rpartition(":")
    if not sep or not target or not func:
        raise ModelError(f"python model spec must be python:PATH_OR_MODULE:FUNCTION, got 'python:{rest}'")
    return CallableModel(target, func, **opts)


#: ``python:PATH_OR_MODULE:FUNCTION`` (docs/backends.md)
BACKEND = Declaration(
    "python",
    from_spec,
    options=(
        Option("temperature", 1.0, "score temperature T", TEMPERATURE),
        Option(
            "params",
            None,
            "the model's parameter count (`135M`, `1.5B`, `7e9`), for the recall-against-size figure; in the identity",
            PARAMS,
        ),
        Option("family", None, "the model family, joining sizes by a line in that figure; in the identity", NAME),
        Option(
            "version",
            None,
            "your model's version, in the identity: a new version is scored again ([deployed.md](deployed.md))",
            NAME,
        ),
        Option(
            "strict",
            False,
            "`true`: a returned label that names no option (or an index out of range) stops the run with one line, "
            "exit 2, instead of being stored as an invalid answer ([deployed.md](deployed.md))",
            Switch(),
        ),
    ),
)
